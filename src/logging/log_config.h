#pragma once

#include <string>

#include "config/config.h"
#include "logging/logging.h"

namespace gpool::logging {

// Reads the `[log]` section every gpool process shares:
//
//   [log]
//   level = "info"     # trace, debug, info, warn, error, critical, off
//   format = "text"    # or "json"
//   file = ""          # empty: standard error
//
// Bad values are recorded in the section's ConfigFile (reported by its `finish()`) and replaced
// by the defaults of LogOptions. `process_name` fills LogOptions::process_name.
LogOptions readLogOptions(config::ConfigSection section, std::string process_name);

}  // namespace gpool::logging
