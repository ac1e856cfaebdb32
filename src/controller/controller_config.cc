#include "controller/controller_config.h"

#include "config/config.h"

namespace gpool::controller {

Result<ControllerSettings> readControllerSettings(const std::string& path) {
  GPOOL_ASSIGN_OR_RETURN(config::ConfigFile file, config::ConfigFile::load(path));
  config::ConfigSection root = file.root();
  ControllerSettings s;
  s.log = logging::readLogOptions(root.section("log"), "gpoold");
  config::ConfigSection ctl = root.section("controller");
  s.store = ctl.getString("store", "/var/lib/gpool/gpool.db");
  s.sqlite_synchronous = ctl.getString("sqlite_synchronous", "FULL");
  s.socket = ctl.getString("socket", "");
  if (s.sqlite_synchronous != "FULL" && s.sqlite_synchronous != "NORMAL") {
    ctl.fail("sqlite_synchronous", "must be FULL or NORMAL");
  }
  s.node_down_after_s = ctl.getDuration("node_down_after", 90);
  s.lease_duration_s = ctl.getDuration("lease_duration", 60);
  s.heartbeat_interval_s = ctl.getDuration("heartbeat_interval", 5);
  s.schedule_interval_s = ctl.getDuration("schedule_interval", 10);
  s.schedule_min_gap_ms = ctl.getInt("schedule_min_gap_ms", 250, 0, 60'000);
  s.usage_half_life_s = ctl.getDuration("usage_half_life", 7 * 24 * 3600);
  s.api_threads = ctl.getInt("api_threads", 16, 1, 256);
  if (s.node_down_after_s <= 0) ctl.fail("node_down_after", "must be positive");
  if (s.schedule_interval_s <= 0) ctl.fail("schedule_interval", "must be positive");
  if (s.lease_duration_s <= 0) ctl.fail("lease_duration", "must be positive");
  if (s.heartbeat_interval_s <= 0) ctl.fail("heartbeat_interval", "must be positive");
  // An agent must have fenced itself (lease expired) before its node is declared DOWN.
  if (s.lease_duration_s + s.heartbeat_interval_s >= s.node_down_after_s) {
    ctl.fail("node_down_after", "must exceed lease_duration + heartbeat_interval");
  }
  GPOOL_RETURN_IF_ERROR(file.finish());
  return s;
}

}  // namespace gpool::controller
