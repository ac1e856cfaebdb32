#include "agent/agent_config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "config/config.h"

namespace gpool::agent {
namespace {

// "host:port" (or "wss://host:port") with a port in 1..65535: where gpool-agent connects.
bool isHostPort(std::string text) {
  if (text.rfind("wss://", 0) == 0) text = text.substr(6);
  while (!text.empty() && text.back() == '/')
    text.pop_back();
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  int port = 0;
  const char* begin = text.data() + colon + 1;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, port);
  return begin != end && ec == std::errc() && ptr == end && port >= 1 && port <= 65535;
}

// Records an error for `key` when `path` is set and cannot be read by this process.
void checkReadable(config::ConfigSection& section, const char* key, const std::string& path) {
  if (!path.empty() && ::access(path.c_str(), R_OK) != 0) {
    section.fail(key, "cannot read '" + path + "': " + std::strerror(errno));
  }
}

}  // namespace

Result<AgentSettings> readAgentSettings(const std::string& path) {
  GPOOL_ASSIGN_OR_RETURN(config::ConfigFile file, config::ConfigFile::load(path));
  config::ConfigSection a = file.root().section("agent");
  AgentSettings s;
  s.node = a.getString("node", "");
  s.controller = a.getString("controller", "");
  s.unix_socket = a.getString("unix_socket", "");
  s.ca = a.getString("ca", "");
  s.token_file = a.getString("token_file", s.token_file);
  s.state_dir = a.getString("state_dir", s.state_dir);
  s.supervisor = a.getString("supervisor", "");
  s.fake_fixture = a.getString("fake_fixture", "");
  s.vgpu_dir = a.getString("vgpu_dir", s.vgpu_dir);
  s.interposer = a.getString("interposer", "");
  s.hpc_job_mapping_dir = a.getString("hpc_job_mapping_dir", "");
  s.cgroup_parent = a.getString("cgroup_parent", s.cgroup_parent);
  s.cgroups = a.getBool("cgroups", true);
  s.allow_root_tasks = a.getBool("allow_root_tasks", false);
  s.cpu_millis = a.getCpuMillis("cpus", 0);
  s.ram_mib = a.getMemoryMiB("ram", 0);
  s.labels = a.getStringMap("labels");
  std::string fence = a.getString("fence_tasks", "requeueable");
  if (fence != "requeueable" && fence != "all") {
    a.fail("fence_tasks", "must be \"requeueable\" or \"all\", not '" + fence + "'");
  }
  s.fence_all_tasks = fence == "all";
  s.task_retention_s = a.getDuration("task_retention", s.task_retention_s);
  s.task_retention_max = a.getInt("task_retention_max", s.task_retention_max, 0, 100'000'000);
  s.podman = a.getString("podman", s.podman);
  s.container_runtime = a.getString("container_runtime", s.container_runtime);
  if (s.container_runtime != "auto" && s.container_runtime != "runc" &&
      s.container_runtime != "crun") {
    a.fail("container_runtime",
           "must be \"auto\", \"runc\" or \"crun\", not '" + s.container_runtime + "'");
  }
  s.gpu_device_dir = a.getString("gpu_device_dir", s.gpu_device_dir);
  s.image_dir = a.getString("image_dir", s.image_dir);
  if (!s.image_dir.empty() && s.image_dir.front() != '/') {
    a.fail("image_dir", "must be an absolute path");
  }
  std::string mode = a.getString("project_dir_mode", "2770");
  char* end = nullptr;
  unsigned long parsed = std::strtoul(mode.c_str(), &end, 8);
  if (mode.empty() || *end != '\0' || parsed > 07777) {
    a.fail("project_dir_mode", "must be an octal mode such as \"2770\", not '" + mode + "'");
  } else {
    s.project_dir_mode = static_cast<uint32_t>(parsed);
  }

  if (!s.controller.empty() && !s.unix_socket.empty()) {
    a.fail("unix_socket", "give agent.controller (TLS) or agent.unix_socket, not both");
  }
  // Several controllers (HA, docs/ha.md): a comma-separated list, each host:port.
  for (size_t b = 0; !s.controller.empty() && b <= s.controller.size();) {
    size_t e = std::min(s.controller.find(',', b), s.controller.size());
    std::string one = s.controller.substr(b, e - b);
    if (!isHostPort(one)) {
      a.fail("controller", "'" + one + "' is not host:port (e.g. \"ctl01:6443\" or, for two " +
                               "controllers, \"ctl01:6443,ctl02:6443\")");
    }
    b = e + 1;
  }
  if (!s.ca.empty() && s.controller.empty()) {
    a.fail("ca", "has no effect without agent.controller (host:port)");
  }
  checkReadable(a, "ca", s.ca);
  checkReadable(a, "fake_fixture", s.fake_fixture);
  checkReadable(a, "interposer", s.interposer);
  if (!s.supervisor.empty() && ::access(s.supervisor.c_str(), X_OK) != 0) {
    a.fail("supervisor", "cannot execute '" + s.supervisor + "': " + std::strerror(errno));
  }
  for (const auto& [key, value] :
       {std::pair<const char*, const std::string*>{"state_dir", &s.state_dir},
        {"vgpu_dir", &s.vgpu_dir},
        {"token_file", &s.token_file},
        {"podman", &s.podman},
        {"gpu_device_dir", &s.gpu_device_dir}}) {
    if (value->empty() || value->front() != '/') a.fail(key, "must be an absolute path");
  }
  if (s.cgroup_parent.empty()) a.fail("cgroup_parent", "must not be empty (default \"gpool\")");
  GPOOL_RETURN_IF_ERROR(file.finish());
  return s;
}

}  // namespace gpool::agent
