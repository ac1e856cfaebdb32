#include "agent/cgroup.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sstream>

#include "agent/sys_util.h"

namespace gpool::agent {
namespace {

constexpr const char* kV1Controllers[] = {"cpu", "memory", "devices", "pids"};
constexpr uint64_t kCpuPeriodUs = 100'000;
constexpr uint64_t kMinCpuQuotaUs = 1'000;  // the kernel's floor for cfs_quota_us / cpu.max

bool fileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string joinPath(const std::string& a, const std::string& b) {
  if (b.empty()) return a;
  return a + "/" + b;
}

// "key value" lines (memory.events, memory.oom_control) -> value of `key`, or 0.
uint64_t keyedValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

}  // namespace

std::string_view cgroupModeName(CgroupMode mode) {
  switch (mode) {
    case CgroupMode::kNone: return "none";
    case CgroupMode::kV1: return "v1";
    case CgroupMode::kV2: return "v2";
    case CgroupMode::kHybrid: return "hybrid";
  }
  return "none";
}

CgroupLayout CgroupLayout::fromMountInfo(const std::string& mountinfo) {
  CgroupLayout layout;
  std::istringstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = splitString(line, ' ');
    auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || dash + 3 > f.end()) continue;
    const std::string& mount_point = f[4];
    const std::string& fstype = *(dash + 1);
    const std::string& super_opts = *(dash + 3);
    if (fstype == "cgroup2") {
      if (layout.unified.empty()) layout.unified = mount_point;
    } else if (fstype == "cgroup") {
      for (const std::string& opt : splitString(super_opts, ',')) {
        for (const char* c : kV1Controllers) {
          if (opt == c && !layout.v1_mounts.count(c)) layout.v1_mounts[c] = mount_point;
        }
      }
    }
  }
  if (!layout.v1_mounts.empty() && !layout.unified.empty()) {
    layout.mode = CgroupMode::kHybrid;
  } else if (!layout.v1_mounts.empty()) {
    layout.mode = CgroupMode::kV1;
  } else if (!layout.unified.empty()) {
    layout.mode = CgroupMode::kV2;
  }
  return layout;
}

Result<CgroupLayout> CgroupLayout::detect() {
  GPOOL_ASSIGN_OR_RETURN(std::string info, readFile("/proc/self/mountinfo"));
  return fromMountInfo(info);
}

bool CgroupLayout::v2HasController(const std::string& controller) const {
  if (unified.empty()) return false;
  auto text = readFile(unified + "/cgroup.controllers");
  if (!text.ok()) return false;
  for (const std::string& c : splitString(*text, ' ')) {
    if (c == controller || c == controller + "\n") return true;
  }
  return false;
}

TaskCgroup TaskCgroup::open(const CgroupLayout& layout, const std::string& parent,
                            const std::string& name) {
  TaskCgroup cg;
  std::string rel = joinPath(parent, name);
  for (const char* c : kV1Controllers) {
    auto it = layout.v1_mounts.find(c);
    if (it == layout.v1_mounts.end()) continue;
    std::string dir = it->second + "/" + rel;
    if (std::find(cg.dirs_.begin(), cg.dirs_.end(), dir) == cg.dirs_.end()) {
      cg.dirs_.push_back(dir);
    }
    if (std::string(c) == "memory") cg.memory_dir_ = dir;
  }
  if (!layout.unified.empty()) {
    cg.unified_dir_ = layout.unified + "/" + rel;
    cg.dirs_.push_back(cg.unified_dir_);
    if (cg.memory_dir_.empty()) {
      cg.memory_dir_ = cg.unified_dir_;
      cg.memory_is_v2_ = true;
    }
  }
  return cg;
}

Result<TaskCgroup> TaskCgroup::create(const CgroupLayout& layout, const std::string& parent,
                                      const std::string& name, const CgroupLimits& limits) {
  if (layout.mode == CgroupMode::kNone) {
    return Status::failedPrecondition("no cgroup hierarchy is mounted on this host");
  }
  TaskCgroup cg = open(layout, parent, name);
  bool pure_v2 = layout.mode == CgroupMode::kV2;

  // Enable the v2 controllers down to the task's parent so that its limits files exist.
  if (pure_v2) {
    std::string dir = layout.unified;
    std::vector<std::string> levels = splitString(parent, '/');
    for (size_t i = 0; i <= levels.size(); ++i) {
      for (const char* c : {"cpu", "memory", "pids"}) {
        if (layout.v2HasController(c)) {
          // Fails harmlessly when already enabled; a real failure shows when the limit is set.
          (void)writeExistingFile(dir + "/cgroup.subtree_control", std::string("+") + c);
        }
      }
      if (i == levels.size()) break;
      dir += "/" + levels[i];
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        return errnoStatus("cannot create cgroup", dir, errno);
      }
    }
  }
  // In a hybrid layout the v2 group only adds membership, cgroup.kill and the optional BPF
  // filter; hosts whose v2 tree is read-only (some container runtimes) go on without it.
  bool v2_optional = layout.mode == CgroupMode::kHybrid &&
                     !(limits.filter_devices && limits.device_filter == DeviceFilterKind::kBpf);
  std::vector<std::string> created;
  for (const std::string& dir : cg.dirs_) {
    std::string up = dir.substr(0, dir.rfind('/'));
    Status st = makeDirs(up);
    if (st.isOk() && ::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      st = errnoStatus("cannot create cgroup", dir, errno);
    }
    if (st.isOk()) {
      created.push_back(dir);
    } else if (!(v2_optional && dir == cg.unified_dir_)) {
      cg.dirs_ = created;
      (void)cg.destroy();
      return st;
    }
  }
  if (created.size() != cg.dirs_.size()) {
    cg.dirs_ = created;
    if (cg.memory_dir_ == cg.unified_dir_) cg.memory_dir_.clear();
    cg.unified_dir_.clear();
  }

  auto v1 = [&](const char* controller) -> std::string {
    auto it = layout.v1_mounts.find(controller);
    return it == layout.v1_mounts.end() ? "" : it->second + "/" + joinPath(parent, name);
  };
  auto fail = [&](Status st) -> Status {
    (void)cg.destroy();
    return st.withContext("cgroup " + joinPath(parent, name));
  };

  if (limits.cpu_millicores > 0) {
    uint64_t quota = std::max(kMinCpuQuotaUs, limits.cpu_millicores * kCpuPeriodUs / 1000);
    Status st;
    if (std::string d = v1("cpu"); !d.empty()) {
      st = writeExistingFile(d + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs));
      if (st.isOk()) st = writeExistingFile(d + "/cpu.cfs_quota_us", std::to_string(quota));
    } else if (pure_v2) {
      st = writeExistingFile(cg.unified_dir_ + "/cpu.max",
                             std::to_string(quota) + " " + std::to_string(kCpuPeriodUs));
    } else {
      st = Status::failedPrecondition("no cpu controller to apply the CPU limit");
    }
    if (!st.isOk()) return fail(st);
  }
  if (limits.memory_mib > 0) {
    std::string bytes = std::to_string(limits.memory_mib * 1024 * 1024);
    Status st;
    if (std::string d = v1("memory"); !d.empty()) {
      st = writeExistingFile(d + "/memory.limit_in_bytes", bytes);
      // memsw (RAM + swap) exists only with swap accounting; without it there is no swap
      // to escape to.
      if (st.isOk() && fileExists(d + "/memory.memsw.limit_in_bytes")) {
        st = writeExistingFile(d + "/memory.memsw.limit_in_bytes", bytes);
      }
    } else if (pure_v2) {
      st = writeExistingFile(cg.unified_dir_ + "/memory.max", bytes);
      if (st.isOk() && fileExists(cg.unified_dir_ + "/memory.swap.max")) {
        st = writeExistingFile(cg.unified_dir_ + "/memory.swap.max", "0");
      }
    } else {
      st = Status::failedPrecondition("no memory controller to apply the RAM limit");
    }
    if (!st.isOk()) return fail(st);
  }
  if (limits.pids_max > 0) {
    Status st;
    if (std::string d = v1("pids"); !d.empty()) {
      st = writeExistingFile(d + "/pids.max", std::to_string(limits.pids_max));
    } else if (pure_v2) {
      st = writeExistingFile(cg.unified_dir_ + "/pids.max", std::to_string(limits.pids_max));
    } else {
      st = Status::failedPrecondition("no pids controller to apply the process limit");
    }
    if (!st.isOk()) return fail(st);
  }
  if (limits.filter_devices) {
    DeviceFilterKind kind = limits.device_filter;
    if (kind == DeviceFilterKind::kAuto) {
      kind = !v1("devices").empty() ? DeviceFilterKind::kV1Controller : DeviceFilterKind::kBpf;
    }
    Status st;
    if (kind == DeviceFilterKind::kV1Controller) {
      std::string d = v1("devices");
      if (d.empty()) {
        st = Status::failedPrecondition("no v1 devices controller is mounted");
      } else {
        st = writeExistingFile(d + "/devices.deny", "a");
        for (const DeviceRule& rule : limits.device_rules) {
          if (!st.isOk()) break;
          st = writeExistingFile(d + "/devices.allow", rule.toV1());
        }
      }
    } else if (kind == DeviceFilterKind::kBpf) {
      st = cg.unified_dir_.empty()
               ? Status::failedPrecondition("no cgroup v2 tree for the BPF device filter")
               : attachDeviceProgram(cg.unified_dir_, limits.device_rules);
    }
    if (!st.isOk()) return fail(st);
  }
  return cg;
}

Status TaskCgroup::addProcess(pid_t pid, bool skip_unified) const {
  for (const std::string& dir : dirs_) {
    if (skip_unified && dir == unified_dir_) continue;
    // A hybrid task may run without its optional v2 group (see create()).
    if (dir == unified_dir_ && dirs_.size() > 1 && !fileExists(dir)) continue;
    GPOOL_RETURN_IF_ERROR(writeExistingFile(dir + "/cgroup.procs", std::to_string(pid)));
  }
  return Status::ok();
}

std::vector<pid_t> TaskCgroup::processes() const {
  std::vector<pid_t> pids;
  // The v2 group sees every process of the task; the v1 groups are the fallback.
  std::vector<std::string> candidates = {unified_dir_, memory_dir_};
  if (!dirs_.empty()) candidates.push_back(dirs_.front());
  for (const std::string& dir : candidates) {
    if (dir.empty()) continue;
    auto text = readFile(dir + "/cgroup.procs");
    if (!text.ok()) continue;
    for (const std::string& p : splitString(*text, '\n'))
      pids.push_back(std::stoi(p));
    return pids;
  }
  return pids;
}

void TaskCgroup::signalAll(int sig) const {
  if (sig == SIGKILL && !unified_dir_.empty() && fileExists(unified_dir_ + "/cgroup.kill")) {
    (void)writeExistingFile(unified_dir_ + "/cgroup.kill", "1");
  }
  for (pid_t pid : processes())
    ::kill(pid, sig);
}

uint64_t TaskCgroup::oomKills() const {
  if (memory_dir_.empty()) return 0;
  auto text = readFile(memory_dir_ + (memory_is_v2_ ? "/memory.events" : "/memory.oom_control"));
  return text.ok() ? keyedValue(*text, "oom_kill") : 0;
}

Status TaskCgroup::destroy() const {
  // New processes may be forked while we kill; keep killing until the group stays empty.
  for (int i = 0; i < 2000; ++i) {
    bool any = false;
    for (const std::string& dir : dirs_) {
      if (fileExists(dir)) any = true;
    }
    if (!any) return Status::ok();
    if (!empty()) {
      signalAll(SIGKILL);
      ::usleep(1000);
      continue;
    }
    bool busy = false;
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
      if (::rmdir(it->c_str()) != 0 && errno != ENOENT) busy = true;
    }
    if (!busy) return Status::ok();
    ::usleep(1000);
  }
  return Status::unavailable("cgroup of task still busy after 2 s: " +
                             (dirs_.empty() ? std::string("?") : dirs_.front()));
}

}  // namespace gpool::agent
