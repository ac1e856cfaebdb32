#include "logging/log_config.h"

#include <utility>

namespace gpool::logging {

LogOptions readLogOptions(config::ConfigSection section, std::string process_name) {
  LogOptions options;
  options.process_name = std::move(process_name);
  std::string level = section.getString("level", options.level);
  Status level_ok = validateLogLevel(level);
  if (level_ok.isOk()) {
    options.level = level;
  } else {
    section.fail("level", level_ok.message());
  }
  std::string format = section.getString("format", "text");
  Result<LogFormat> parsed = parseLogFormat(format);
  if (parsed.ok()) {
    options.format = *parsed;
  } else {
    section.fail("format", parsed.status().message());
  }
  options.file = section.getString("file", "");
  return options;
}

}  // namespace gpool::logging
