// Fuzz target: the configuration files (src/config, docs/config.md) through the readers the
// daemons use, gpoold's (readControllerSettings, with its [log] section) and gpool-agent's
// (readAgentSettings). The input is the file's text.
//
// Beyond "no crash, no undefined behaviour": a file is either read or refused with an
// InvalidArgument whose every line names the file ("<file>:<line>: ..." or "<file>: ..."), as
// the readers promise.

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "agent/agent_config.h"
#include "controller/controller_config.h"
#include "fuzz/fuzz_util.h"

namespace gpool::fuzz {
namespace {

void checkRefusal(const Status& status, const std::string& path, std::string_view reader) {
  if (status.code() != StatusCode::kInvalidArgument) {
    fail(std::string(reader) + " refused a readable file with " + status.toString());
  }
  std::istringstream lines(status.message());
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(path + ":", 0) != 0) {
      fail(std::string(reader) + ": an error line does not name the file: '" + line + "'");
    }
  }
}

}  // namespace
}  // namespace gpool::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpool;
  using namespace gpool::fuzz;
  static const std::string path = scratchDir() + "/config.toml";
  writeFile(path, std::string_view(reinterpret_cast<const char*>(data), size));

  Result<controller::ControllerSettings> ctl = controller::readControllerSettings(path);
  if (!ctl.ok()) checkRefusal(ctl.status(), path, "readControllerSettings");
  Result<agent::AgentSettings> agent = agent::readAgentSettings(path);
  if (!agent.ok()) checkRefusal(agent.status(), path, "readAgentSettings");
  return 0;
}
