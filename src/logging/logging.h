#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "common/status.h"

// Process-wide logging for gpool's daemons and tools. Code logs through spdlog's default logger
// (`spdlog::info("node {} joined", name)`); `initLogging` decides where those lines go and what
// they look like:
//
//   text  2026-12-02T16:05:03.123456Z info gpoold[4242]: node gpu-01 joined
//   json  {"ts":"2026-12-02T16:05:03.123456Z","level":"info","process":"gpoold","pid":4242,
//          "thread":4243,"msg":"node gpu-01 joined"}
//
// Timestamps are UTC with microseconds. JSON lines are one object per line with the message
// escaped (control characters, quotes, invalid UTF-8 replaced by U+FFFD), so they can be fed to
// a log shipper as they are.
namespace gpool::logging {

enum class LogFormat {
  kText,  // "text": human-readable lines
  kJson,  // "json": one JSON object per line
};
// Accepts "text" and "json".
Result<LogFormat> parseLogFormat(std::string_view text);

struct LogOptions {
  // trace, debug, info, warn (or warning), error, critical, off.
  std::string level = "info";
  LogFormat format = LogFormat::kText;
  // Appends to this file; empty: standard error.
  std::string file;
  // Shown in every line; e.g. "gpoold", "gpool-agent".
  std::string process_name = "gpool";
};

// Checks a level name; InvalidArgument "unknown log level 'loud' (expected one of trace, ...)".
Status validateLogLevel(std::string_view level);

// Replaces spdlog's default logger according to `options`. Lines at or above the level are
// written and flushed at once (a daemon's last words must reach the file).
// Errors: InvalidArgument for a bad level; IoError naming the file if it cannot be opened. On
// error the previous logger stays in place.
// Thread-safety: call at start-up before other threads log; logging itself is thread-safe.
Status initLogging(const LogOptions& options);

// Changes the level of the default logger at run time (e.g. from an admin request).
Status setLogLevel(std::string_view level);

// Escapes `text` for a JSON string body (without the quotes); exposed for tests.
std::string escapeJsonString(std::string_view text);

}  // namespace gpool::logging
