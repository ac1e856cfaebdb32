#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/task_launch.h"
#include "agent/unix_user.h"

namespace gpool::agent {

// The environment a task starts with (documented in docs/launcher.md). Built from scratch, never
// inherited from the agent:
//   1. PATH, HOME, USER, LOGNAME, SHELL for `user`;
//   2. the user's submitted environment (launch.env), which may override (1);
//   3. gpool's variables, which the user cannot override: GPOOL_JOB_ID, GPOOL_TASK_INDEX,
//      GPOOL_ATTEMPT (when the launch says), GPOOL_GPUS, CUDA_VISIBLE_DEVICES (by UUID),
//      CUDA_DEVICE_ORDER=PCI_BUS_ID, the slice's GPOOL_GPU_MEMORY_MIB/GPOOL_GPU_COMPUTE plus
//      LD_PRELOAD of the interposer and GPOOL_VGPU_REGIONS (its shared-memory region holding the
//      quota), and MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK, NODE_RANK when the task
//      has a rendezvous.
// `task_dir` is exported as GPOOL_TASK_DIR.
std::map<std::string, std::string> buildTaskEnvironment(const TaskLaunch& launch,
                                                        const UnixUser& user,
                                                        const std::string& task_dir);

// "KEY=value" strings for execve.
std::vector<std::string> toEnvStrings(const std::map<std::string, std::string>& env);

}  // namespace gpool::agent
