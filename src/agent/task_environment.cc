#include "agent/task_environment.h"

namespace gpool::agent {

std::map<std::string, std::string> buildTaskEnvironment(const TaskLaunch& launch,
                                                        const UnixUser& user,
                                                        const std::string& task_dir) {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/bin:/usr/bin:/bin"},
      {"HOME", user.home},
      {"USER", user.name},
      {"LOGNAME", user.name},
      {"SHELL", user.shell},
  };
  for (const auto& [key, value] : launch.env)
    env[key] = value;

  env["GPOOL_JOB_ID"] = launch.job_id;
  env["GPOOL_TASK_INDEX"] = std::to_string(launch.task_index);
  if (launch.attempt > 0) {
    env["GPOOL_ATTEMPT"] = std::to_string(launch.attempt);
  } else {
    env.erase("GPOOL_ATTEMPT");  // never the user's own: it would name a run that is not this
  }
  env["GPOOL_TASK_DIR"] = task_dir;
  if (!launch.project_dir.empty()) env["GPOOL_PROJECT_DIR"] = launch.project_dir;
  std::string uuids;
  for (const TaskGpu& gpu : launch.gpus) {
    if (!uuids.empty()) uuids += ",";
    uuids += gpu.uuid;
  }
  env["GPOOL_GPUS"] = uuids;
  // An empty CUDA_VISIBLE_DEVICES hides every GPU from CUDA, which is right for CPU-only tasks.
  env["CUDA_VISIBLE_DEVICES"] = uuids;
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  env["NVIDIA_VISIBLE_DEVICES"] = uuids.empty() ? "void" : uuids;

  if (launch.slice) {
    const SliceQuota& s = *launch.slice;
    env["GPOOL_GPU_MEMORY_MIB"] = std::to_string(s.memory_mib);
    env["GPOOL_GPU_COMPUTE"] = std::to_string(s.compute);
    // The interposer reads its quota from the region the agent prepared (src/vgpu/shm_layout.h);
    // GPOOL_VGPU_REGIONS lists one region per visible CUDA device, and a slice has one GPU.
    if (!s.shm_path.empty()) env["GPOOL_VGPU_REGIONS"] = s.shm_path;
    if (!s.interposer.empty()) {
      // The interposer goes first so it sees the driver before any other preloaded library.
      auto it = launch.env.find("LD_PRELOAD");
      std::string rest = it == launch.env.end() ? "" : it->second;
      env["LD_PRELOAD"] = rest.empty() ? s.interposer : s.interposer + ":" + rest;
    }
  } else {
    // Whole GPUs: the full compute of each; memory is the device's own.
    env.erase("GPOOL_GPU_MEMORY_MIB");
    if (launch.gpus.empty()) {
      env.erase("GPOOL_GPU_COMPUTE");
    } else {
      env["GPOOL_GPU_COMPUTE"] = "1000";
    }
    env.erase("GPOOL_VGPU_REGIONS");
  }

  const Rendezvous& r = launch.rendezvous;
  if (r.world_size > 0) {
    env["MASTER_ADDR"] = r.master_addr;
    env["MASTER_PORT"] = std::to_string(r.master_port);
    env["WORLD_SIZE"] = std::to_string(r.world_size);
    env["RANK"] = std::to_string(r.rank);
    env["LOCAL_RANK"] = std::to_string(r.local_rank);
    env["NODE_RANK"] = std::to_string(r.node_rank);
  }
  return env;
}

std::vector<std::string> toEnvStrings(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [key, value] : env)
    out.push_back(key + "=" + value);
  return out;
}

}  // namespace gpool::agent
