// gpool-agent: the node agent. Connects to the controller's /v1/agent WebSocket (TLS with a
// bearer token, or the controller's Unix socket for a single-machine pool), sends `hello` on
// every (re)connect, feeds every frame to the Agent and ticks it once a second.
//
// The Agent is not thread-safe; one mutex serialises the client's I/O thread (frames,
// connects) and the main thread (ticks), so that `hello` is always the first frame of a
// connection.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/agent_config.h"
#include "agent/container.h"
#include "agent/launcher.h"
#include "agent/shell_server.h"
#include "agent/sys_util.h"
#include "agent/task_watch.h"
#include "common/units.h"
#include "gpu/backend_factory.h"
#include "net/client.h"

namespace {

std::atomic<bool> g_stop{false};

void onSignal(int) {
  g_stop = true;
}

std::string exeDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpool;
  CLI::App app{"gpool-agent: the gpool node agent"};
  std::string node_name;
  std::string controller;  // host:port
  std::string unix_socket;
  std::string ca_file;
  std::string join_token;
  std::string token_file = "/var/lib/gpool/agent/credential";
  std::string state_dir = "/var/lib/gpool/agent";
  std::string supervisor = exeDir() + "/gpool-supervisor";
  std::string fixture;
  std::string vgpu_dir = "/run/gpool/vgpu";
  std::string interposer;
  std::string slice_backstop = "end";
  std::string hpc_job_mapping_dir;
  std::string cgroup_parent = "gpool";
  bool no_cgroups = false;
  std::string podman = "/usr/bin/podman";
  std::string container_runtime = "auto";
  std::string gpu_device_dir = "/dev";
  std::string image_dir;
  mode_t project_dir_mode = 02770;  // agent.project_dir_mode only
  std::string cpus;
  std::string ram;
  std::string config_path;
  app.add_option("-c,--config", config_path,
                 "TOML configuration file (gpool-agent.toml; `gpool config check --kind agent` "
                 "checks it); flags override its keys");
  app.add_option("--node", node_name, "this node's name (or agent.node in --config)");
  app.add_option("--controller,--server", controller,
                 "the controller's TLS listener, host:port or wss://host:port; several "
                 "controllers (HA): a comma-separated list");
  app.add_option("--join-token", join_token,
                 "join token for this node's first connection (when --token-file holds no "
                 "credential yet); the node credential it is exchanged for goes to --token-file");
  app.add_option("--unix-socket", unix_socket,
                 "the controller's Unix socket instead (a comma-separated list for several)");
  app.add_option("--ca", ca_file, "PEM file of the CA for the controller's certificate");
  app.add_option("--token-file", token_file, "file holding the node credential or join token");
  app.add_option("--state-dir", state_dir, "the agent's and its tasks' state directory");
  app.add_option("--supervisor", supervisor, "the gpool-supervisor executable");
  app.add_option("--fake-fixture", fixture, "play this GPU fixture (simulated GPUs)");
  app.add_option("--vgpu-dir", vgpu_dir, "where shared-slice regions are created");
  app.add_option("--interposer", interposer, "libgpool-vgpu.so to preload into slice tasks");
  app.add_option("--slice-backstop", slice_backstop,
                 "what the agent does when a slice task's processes hold more GPU memory than its "
                 "quota (plus max(256 MiB, 10 %)): end (the task ends OUT_OF_MEMORY; default) or "
                 "report (only a health finding; the node then does not count as enforcing "
                 "slices)")
      ->check(CLI::IsMember({"end", "report"}));
  app.add_option("--hpc-job-mapping-dir", hpc_job_mapping_dir,
                 "write DCGM's HPC job mapping here (one file per GPU index listing its gpool "
                 "jobs), for dcgm-exporter --hpc-job-mapping-dir");
  app.add_option("--cgroup-parent", cgroup_parent, "cgroup below which tasks run");
  app.add_flag("--no-cgroups", no_cgroups, "run tasks without cgroups (tests, containers)");
  app.add_option("--podman", podman, "the podman executable for jobs with an image");
  app.add_option("--container-runtime", container_runtime,
                 "OCI runtime for Podman: auto (runc on hosts with v1 cgroup controllers, which "
                 "crun refuses; else crun), runc or crun");
  app.add_option("--gpu-device-dir", gpu_device_dir,
                 "where the GPUs' device nodes (nvidia<minor>, nvidiactl) are, for containers");
  app.add_option("--image-dir", image_dir,
                 "directory of image archives (<name>/<tag>.tar) loaded into Podman on first use");
  app.add_option("--cpus", cpus,
                 "CPUs this node offers to jobs, e.g. 60 or 59.5 (default: the online CPUs; "
                 "keep some for the system, or set a simulated server's)");
  app.add_option("--ram", ram, "memory this node offers to jobs, e.g. 480G (default: physical)");
  CLI11_PARSE(app, argc, argv);
  std::map<std::string, std::string> labels;
  bool fence_all_tasks = false;
  bool allow_root_tasks = false;  // the config file's only: no flag runs tasks as root
  agent::AgentSettings defaults;  // task_retention*: the config file's only
  int64_t task_retention_s = defaults.task_retention_s;
  int64_t task_retention_max = defaults.task_retention_max;
  if (!config_path.empty()) {
    Result<agent::AgentSettings> file = agent::readAgentSettings(config_path);
    if (!file.ok()) {
      std::fprintf(stderr, "gpool-agent: %s\n", file.status().message().c_str());
      return 2;
    }
    // The file's value for every setting whose flag was not given.
    auto fill = [&app](const char* flag, std::string* value, const std::string& from_file) {
      if (app.count(flag) == 0 && !from_file.empty()) *value = from_file;
    };
    fill("--node", &node_name, file->node);
    // One way to reach the controller: a flag for either replaces the file's choice.
    if (app.count("--controller") == 0 && app.count("--unix-socket") == 0) {
      controller = file->controller;
      unix_socket = file->unix_socket;
    }
    fill("--ca", &ca_file, file->ca);
    fill("--token-file", &token_file, file->token_file);
    fill("--state-dir", &state_dir, file->state_dir);
    fill("--supervisor", &supervisor, file->supervisor);
    fill("--fake-fixture", &fixture, file->fake_fixture);
    fill("--vgpu-dir", &vgpu_dir, file->vgpu_dir);
    fill("--interposer", &interposer, file->interposer);
    fill("--cgroup-parent", &cgroup_parent, file->cgroup_parent);
    fill("--hpc-job-mapping-dir", &hpc_job_mapping_dir, file->hpc_job_mapping_dir);
    if (app.count("--no-cgroups") == 0) no_cgroups = !file->cgroups;
    fill("--podman", &podman, file->podman);
    fill("--container-runtime", &container_runtime, file->container_runtime);
    fill("--gpu-device-dir", &gpu_device_dir, file->gpu_device_dir);
    fill("--image-dir", &image_dir, file->image_dir);
    project_dir_mode = file->project_dir_mode;
    if (app.count("--cpus") == 0 && file->cpu_millis != 0) cpus = formatCpuMillis(file->cpu_millis);
    if (app.count("--ram") == 0 && file->ram_mib != 0) ram = formatMemoryMiB(file->ram_mib);
    labels = file->labels;
    fence_all_tasks = file->fence_all_tasks;
    allow_root_tasks = file->allow_root_tasks;
    task_retention_s = file->task_retention_s;
    task_retention_max = file->task_retention_max;
  }
  if (node_name.empty()) {
    std::fprintf(stderr, "gpool-agent: give this node's name: --node NAME or agent.node\n");
    return 2;
  }
  if (controller.empty() == unix_socket.empty()) {
    std::fprintf(stderr,
                 "gpool-agent: give exactly one of --controller and --unix-socket (or "
                 "agent.controller / agent.unix_socket in --config)\n");
    return 2;
  }

  RealClock clock;
  gpu::GpuBackendOptions backend_options;
  backend_options.fake_fixture = fixture;
  backend_options.node_name = node_name;
  auto backend = gpu::makeGpuBackend(backend_options, clock);
  if (!backend.ok()) {
    std::fprintf(stderr, "gpool-agent: %s\n", backend.status().toString().c_str());
    return 1;
  }
  agent::Launcher::Options launcher_options;
  launcher_options.state_root = state_dir + "/tasks";
  launcher_options.supervisor_path = supervisor;
  launcher_options.supervisor.use_cgroups = !no_cgroups;
  launcher_options.supervisor.cgroup_parent = cgroup_parent;
  launcher_options.supervisor.allow_root = allow_root_tasks;
  launcher_options.supervisor.podman = podman;
  launcher_options.supervisor.gpu_device_dir = gpu_device_dir;
  launcher_options.supervisor.image_dir = image_dir;
  launcher_options.supervisor.project_dir_mode = project_dir_mode;
  // Chosen once: a containerised task then names the runtime that works here (docs/containers.md).
  if (Result<std::string> runtime = agent::chooseContainerRuntime(container_runtime);
      runtime.ok()) {
    launcher_options.supervisor.container_runtime = *runtime;
  } else {
    launcher_options.supervisor.container_runtime = "";
    if (app.count("--container-runtime") != 0 || container_runtime != "auto") {
      std::fprintf(stderr, "gpool-agent: --container-runtime: %s\n",
                   runtime.status().message().c_str());
      return 2;
    }
    if (::access(podman.c_str(), X_OK) == 0) {
      std::fprintf(stderr, "gpool-agent: jobs with an image cannot run on this node: %s\n",
                   runtime.status().message().c_str());
    }
  }
  agent::Launcher launcher(launcher_options);

  agent::AgentOptions options;
  options.node_name = node_name;
  options.labels = labels;
  if (!cpus.empty()) {
    Result<uint64_t> millis = parseCpuMillis(cpus);
    if (!millis.ok()) {
      std::fprintf(stderr, "gpool-agent: --cpus: %s\n", millis.status().message().c_str());
      return 2;
    }
    options.cpu_millis = *millis;
  }
  if (!ram.empty()) {
    Result<uint64_t> mib = parseMemoryMiB(ram);
    if (!mib.ok()) {
      std::fprintf(stderr, "gpool-agent: --ram: %s\n", mib.status().message().c_str());
      return 2;
    }
    options.ram_mib = *mib;
  }
  options.state_dir = state_dir + "/assignments";
  // The supervisors of fenced tasks watch it (docs/agent-protocol.md, "Leases and fencing").
  options.lease_file = state_dir + "/lease";
  options.fence_all_tasks = fence_all_tasks;
  options.task_retention = Micros(task_retention_s * 1'000'000);
  options.max_retained_tasks = static_cast<size_t>(task_retention_max);
  options.vgpu_dir = vgpu_dir;
  options.interposer_path = interposer;
  options.slice_backstop = slice_backstop == "report" ? agent::AgentOptions::Backstop::kReport
                                                      : agent::AgentOptions::Backstop::kEnd;
  options.hpc_job_mapping_dir = hpc_job_mapping_dir;
  // `gpool shell` enters running tasks through this socket (docs/launcher.md).
  agent::ShellServer shell_server(launcher);
  Status shell_status = agent::makeDirs(state_dir, 0755);
  if (shell_status.isOk()) shell_status = shell_server.start(state_dir + "/shell.sock");
  if (Status s = shell_status; s.isOk()) {
    options.shell_socket = state_dir + "/shell.sock";
  } else {
    std::fprintf(stderr, "gpool-agent: gpool shell is unavailable on this node: %s\n",
                 s.toString().c_str());
  }
  agent::Agent core(options, **backend, launcher, clock);
  if (Status s = core.start(); !s.isOk()) {
    std::fprintf(stderr, "gpool-agent: %s\n", s.toString().c_str());
    return 1;
  }
  std::unique_ptr<agent::TaskDirWatcher> watcher;
  if (auto w = agent::TaskDirWatcher::create(); w.ok()) {
    watcher = std::move(*w);
  } else {
    std::fprintf(stderr, "gpool-agent: task ends are read once a second only: %s\n",
                 w.status().toString().c_str());
  }

  net::WebSocketClientOptions ws;
  // Several controllers (HA): comma-separated; the agent tries them in turn until one leads
  // (a standby refuses the upgrade with 503) and moves on when that one goes away.
  auto split = [](const std::string& list) {
    std::vector<std::string> out;
    for (size_t b = 0; b <= list.size();) {
      size_t e = std::min(list.find(',', b), list.size());
      if (e > b) out.push_back(list.substr(b, e - b));
      b = e + 1;
    }
    return out;
  };
  if (!unix_socket.empty()) {
    std::vector<std::string> sockets = split(unix_socket);
    for (size_t i = 0; i < sockets.size(); ++i) {
      (i == 0 ? ws.endpoint : ws.alternates.emplace_back()) =
          net::ClientEndpoint::unixSocket(sockets[i]);
    }
  } else {
    std::vector<std::string> hosts = split(controller);
    for (std::string& h : hosts) {
      if (h.rfind("wss://", 0) == 0) h = h.substr(6);
      while (!h.empty() && h.back() == '/')
        h.pop_back();
      if (h.rfind(':') == std::string::npos) {
        std::fprintf(stderr, "gpool-agent: --controller must be host:port (or a list of them)\n");
        return 2;
      }
    }
    std::string token;
    if (auto text = agent::readFile(token_file); text.ok()) {
      token = *text;
      while (!token.empty() && (token.back() == '\n' || token.back() == ' '))
        token.pop_back();
    }
    // A stored node credential wins: the join token was spent on the first connection.
    if (token.empty()) token = join_token;
    if (token.empty()) {
      std::fprintf(stderr,
                   "gpool-agent: no node credential in %s and no --join-token: ask an admin for "
                   "a join token (gpool join-token create)\n",
                   token_file.c_str());
      return 2;
    }
    for (size_t i = 0; i < hosts.size(); ++i) {
      size_t colon = hosts[i].rfind(':');
      (i == 0 ? ws.endpoint : ws.alternates.emplace_back()) = net::ClientEndpoint::tls(
          hosts[i].substr(0, colon), std::stoi(hosts[i].substr(colon + 1)), ca_file, token);
    }
  }
  ws.target = "/v1/agent";
  if (!ws.alternates.empty()) {
    // Several controllers: a lost leader is replaced within about a lease (6 s by default,
    // docs/ha.md), so the agent keeps looking every 2 s at most instead of backing off to 30 s
    // (20 takeovers under load: a job submitted at the SIGKILL ended after p50 12.0 s / max
    // 16.0 s with the 30 s cap). A standby's 503 costs it one small answer.
    ws.max_backoff = std::chrono::milliseconds(2000);
  }

  std::mutex mu;  // serialises every use of `core`
  net::WebSocketClient* client_ptr = nullptr;
  auto flush = [&]() {
    for (const nlohmann::json& m : core.takeOutbox())
      (void)client_ptr->send(m.dump());
  };
  ws.on_connect = [&]() {
    std::lock_guard<std::mutex> lock(mu);
    (void)core.takeOutbox();  // messages for the old connection: the hello supersedes them
    (void)client_ptr->send(core.helloMessage().dump());
  };
  ws.on_message = [&](std::string text) {
    nlohmann::json msg = nlohmann::json::parse(text, nullptr, false);
    std::lock_guard<std::mutex> lock(mu);
    if (msg.is_discarded()) msg = nlohmann::json::object();  // answered as malformed
    core.handle(msg);
    // A task this message started may have run and ended already (a short job): watch its
    // directory and tick now rather than at the next second.
    if (watcher && watcher->watchOnly(core.unfinishedTaskDirs())) watcher->wake();
    if (std::string credential = core.takeNodeCredential(); !credential.empty()) {
      // Written 0600 next to the final name, then renamed: never a half-written credential.
      std::string tmp = token_file + ".tmp";
      int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      bool ok = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
                ::write(fd, credential.data(), credential.size()) ==
                    static_cast<ssize_t>(credential.size()) &&
                ::fsync(fd) == 0;
      if (fd >= 0) ::close(fd);
      ok = ok && ::rename(tmp.c_str(), token_file.c_str()) == 0;
      if (ok) {
        std::fprintf(stderr, "gpool-agent: joined; node credential stored in %s\n",
                     token_file.c_str());
      } else {
        std::fprintf(stderr, "gpool-agent: cannot store the node credential in %s: %s\n",
                     token_file.c_str(), std::strerror(errno));
      }
      client_ptr->setBearerToken(credential);
    }
    flush();
  };
  ws.on_disconnect = [](const Status& why) {
    std::fprintf(stderr, "gpool-agent: disconnected: %s\n", why.toString().c_str());
  };
  net::WebSocketClient client(ws);
  client_ptr = &client;
  ::signal(SIGINT, onSignal);
  ::signal(SIGTERM, onSignal);
  client.start();
  // Ticks once a second, and as soon as a supervisor writes into the directory of an
  // unfinished task (its start, its end), so that a short job's end is reported in
  // milliseconds rather than at the next second (agent/task_watch.h). A task that writes its
  // own directory in a loop cannot make the agent tick more often than every kMinTickGap.
  constexpr auto kTickInterval = std::chrono::seconds(1);
  constexpr auto kMinTickGap = std::chrono::milliseconds(5);
  auto last_tick = std::chrono::steady_clock::now() - kMinTickGap;
  while (!g_stop) {
    auto since = std::chrono::steady_clock::now() - last_tick;
    if (since < kMinTickGap) std::this_thread::sleep_for(kMinTickGap - since);
    last_tick = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mu);
      core.tick();
      if (client.connected()) {
        flush();
      } else {
        (void)core.takeOutbox();  // the next hello reports the full state
      }
      if (watcher) (void)watcher->watchOnly(core.unfinishedTaskDirs());
    }
    if (watcher) {
      (void)watcher->wait(kTickInterval);
    } else {
      std::this_thread::sleep_for(kTickInterval);
    }
  }
  client.stop();
  return 0;
}
