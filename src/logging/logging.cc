#include "logging/logging.h"

#include <time.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <utility>

#include <spdlog/formatter.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace gpool::logging {

namespace {

constexpr std::array<std::pair<std::string_view, spdlog::level::level_enum>, 9> kLevels{{
    {"trace", spdlog::level::trace},
    {"debug", spdlog::level::debug},
    {"info", spdlog::level::info},
    {"warn", spdlog::level::warn},
    {"warning", spdlog::level::warn},
    {"error", spdlog::level::err},
    {"err", spdlog::level::err},
    {"critical", spdlog::level::critical},
    {"off", spdlog::level::off},
}};

Result<spdlog::level::level_enum> levelFromName(std::string_view name) {
  for (const auto& [text, level] : kLevels) {
    if (text == name) return level;
  }
  return Status::invalidArgument("unknown log level '" + std::string(name) +
                                 "' (expected one of trace, debug, info, warn, error, critical, "
                                 "off)");
}

std::string_view levelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace: return "trace";
    case spdlog::level::debug: return "debug";
    case spdlog::level::info: return "info";
    case spdlog::level::warn: return "warn";
    case spdlog::level::err: return "error";
    case spdlog::level::critical: return "critical";
    default: return "off";
  }
}

// "2026-12-02T16:05:03.123456Z"
void appendUtcTimestamp(std::chrono::system_clock::time_point t, std::string* out) {
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  time_t secs = static_cast<time_t>(micros / 1'000'000);
  long frac = static_cast<long>(micros % 1'000'000);
  if (frac < 0) {
    frac += 1'000'000;
    --secs;
  }
  struct tm tm_utc;
  gmtime_r(&secs, &tm_utc);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm_utc.tm_year + 1900,
                tm_utc.tm_mon + 1, tm_utc.tm_mday, tm_utc.tm_hour, tm_utc.tm_min, tm_utc.tm_sec,
                frac);
  out->append(buf);
}

// Formats each record as one JSON object per line.
class JsonFormatter final : public spdlog::formatter {
 public:
  explicit JsonFormatter(std::string process) : process_(std::move(process)), pid_(::getpid()) {}

  // spdlog::formatter
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string line;
    line.reserve(msg.payload.size() + 128);
    line += "{\"ts\":\"";
    appendUtcTimestamp(msg.time, &line);
    line += "\",\"level\":\"";
    line += levelName(msg.level);
    line += "\",\"process\":\"";
    line += escapeJsonString(process_);
    line += "\",\"pid\":";
    line += std::to_string(pid_);
    line += ",\"thread\":";
    line += std::to_string(msg.thread_id);
    if (msg.logger_name.size() > 0) {
      line += ",\"logger\":\"";
      line += escapeJsonString(std::string_view(msg.logger_name.data(), msg.logger_name.size()));
      line += "\"";
    }
    line += ",\"msg\":\"";
    line += escapeJsonString(std::string_view(msg.payload.data(), msg.payload.size()));
    line += "\"}\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(process_);
  }

 private:
  std::string process_;
  int pid_;
};

// Length of the valid UTF-8 sequence at `s[i]`, or 0 if invalid.
size_t utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  // Overlong forms, surrogates and values above U+10FFFF are invalid.
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
      cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return n;
}

}  // namespace

std::string escapeJsonString(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      size_t n = utf8SequenceLength(text, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  return out;
}

Result<LogFormat> parseLogFormat(std::string_view text) {
  if (text == "text") return LogFormat::kText;
  if (text == "json") return LogFormat::kJson;
  return Status::invalidArgument("unknown log format '" + std::string(text) +
                                 "' (expected text or json)");
}

Status validateLogLevel(std::string_view level) {
  return levelFromName(level).status();
}

Status initLogging(const LogOptions& options) {
  GPOOL_ASSIGN_OR_RETURN(spdlog::level::level_enum level, levelFromName(options.level));
  spdlog::sink_ptr sink;
  try {
    if (options.file.empty()) {
      sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    } else {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.file, false);
    }
  } catch (const std::exception& e) {
    return Status::ioError("cannot open log file '" + options.file + "': " + e.what());
  }
  if (options.format == LogFormat::kJson) {
    sink->set_formatter(std::make_unique<JsonFormatter>(options.process_name));
  } else {
    // %^...%$ colours the level on a terminal; plain text otherwise. A '%' in the process
    // name must not be read as a pattern flag.
    std::string name;
    for (char c : options.process_name) {
      if (c == '%') name += '%';
      name += c;
    }
    sink->set_formatter(std::make_unique<spdlog::pattern_formatter>(
        "%Y-%m-%dT%H:%M:%S.%fZ %^%l%$ " + name + "[%P]: %v", spdlog::pattern_time_type::utc));
  }
  auto logger = std::make_shared<spdlog::logger>("", std::move(sink));
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
  return Status::ok();
}

Status setLogLevel(std::string_view level) {
  GPOOL_ASSIGN_OR_RETURN(spdlog::level::level_enum parsed, levelFromName(level));
  spdlog::default_logger()->set_level(parsed);
  return Status::ok();
}

}  // namespace gpool::logging
