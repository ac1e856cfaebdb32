#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/result.h"

// gpool-agent's configuration file (`gpool-agent --config /etc/gpool/gpool-agent.toml`): every
// key it reads, with its default and checks. One reader serves gpool-agent at start-up and
// `gpool config check --kind agent`, so the check knows exactly the keys the agent accepts.
// Command-line flags override the file key by key. deploy/config/gpool-agent.toml documents
// each key; docs/config.md lists them.
//
// Thread-safety: plain values; readAgentSettings is re-entrant.
namespace gpool::agent {

struct AgentSettings {
  std::string node;  // [agent] node; empty: the --node flag (the unit passes the host name)
  // Exactly one of these, here or as a flag: the controller's TLS listener (host:port), or its
  // Unix socket (an agent on the controller's machine).
  std::string controller;
  std::string unix_socket;
  std::string ca;  // PEM file of the CA for the controller's certificate; empty: system store
  std::string token_file = "/var/lib/gpool/agent/credential";
  std::string state_dir = "/var/lib/gpool/agent";
  std::string supervisor;  // empty: gpool-supervisor beside gpool-agent
  std::string fake_fixture;
  std::string vgpu_dir = "/run/gpool/vgpu";
  std::string interposer;
  // DCGM's HPC job mapping (dcgm-exporter --hpc-job-mapping-dir): one file per GPU index,
  // listing the gpool jobs on it; empty: none written.
  std::string hpc_job_mapping_dir;
  std::string cgroup_parent = "gpool";
  bool cgroups = true;
  // Whether tasks may run as root (gpoold refuses root's jobs unless its allow_root_jobs too).
  bool allow_root_tasks = false;
  uint64_t cpu_millis = 0;                    // 0: the online CPUs
  uint64_t ram_mib = 0;                       // 0: the physical memory
  std::map<std::string, std::string> labels;  // [agent.labels], shown and matched by jobs
  // fence_tasks: which tasks stop when the node's lease ends without renewal: "requeueable"
  // (false: the others keep running, NODE_FAIL) or "all" (true).
  bool fence_all_tasks = false;
  // task_retention: how long an ended task's directory (its logs) is kept after the controller
  // acknowledged its end; task_retention_max: at most this many such directories.
  int64_t task_retention_s = 24 * 3600;
  int64_t task_retention_max = 10'000;
  // Containerised tasks (docs/containers.md): Podman, the OCI runtime ("auto": runc where the
  // host has v1 cgroup controllers, which crun refuses, else crun), and where the GPUs'
  // device nodes are.
  std::string podman = "/usr/bin/podman";
  std::string container_runtime = "auto";
  std::string gpu_device_dir = "/dev";
  // The node's image directory: archives of images loaded into Podman on a task's first use
  // ("" for none; docs/containers.md, "The node's image cache").
  std::string image_dir;
  // Mode of the group project directories the supervisors create ("2770": setgid, group rwx).
  uint32_t project_dir_mode = 02770;
};

// Reads `path`. A missing or unreadable file is IoError; every bad value and unknown key is
// reported at once in one InvalidArgument, one "<file>:<line>: key '<key>': <why>" per line
// (the format of readControllerSettings).
Result<AgentSettings> readAgentSettings(const std::string& path);

}  // namespace gpool::agent
