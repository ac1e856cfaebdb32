#include "agent/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
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

// The groups below `dir` (a container runtime's own, e.g. Podman's libpod-<id> and conmon),
// deepest first, then `dir` itself: the order in which they can be removed.
void groupsBelowFirst(const std::string& dir, std::vector<std::string>* out) {
  if (DIR* d = ::opendir(dir.c_str())) {
    std::vector<std::string> children;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (e->d_type == DT_DIR && name != "." && name != "..") children.push_back(dir + "/" + name);
    }
    ::closedir(d);
    for (const std::string& child : children)
      groupsBelowFirst(child, out);
  }
  out->push_back(dir);
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
    if (fstype == "cgroup2" || fstype == "cgroup") layout.all_mounts.push_back(mount_point);
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
  // The v2 group sees every process of the task; the v1 groups are the fallback. Groups a
  // container runtime made below the task's (Podman's libpod-<id>, conmon) count too, and on a
  // hybrid host conmon sits only in the v1 ones, so both trees are read.
  std::vector<std::string> candidates = {unified_dir_, memory_dir_};
  if (!dirs_.empty()) candidates.push_back(dirs_.front());
  std::vector<std::string> groups;
  for (const std::string& dir : candidates) {
    if (!dir.empty() && std::find(groups.begin(), groups.end(), dir) == groups.end()) {
      groupsBelowFirst(dir, &groups);
    }
  }
  for (const std::string& dir : groups) {
    auto text = readFile(dir + "/cgroup.procs");
    if (!text.ok()) continue;
    for (const std::string& p : splitString(*text, '\n')) {
      pid_t pid = std::stoi(p);
      if (std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
    }
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
  if (memory_is_v2_) {
    // memory.events of the task's group counts its descendants' kills too.
    auto text = readFile(memory_dir_ + "/memory.events");
    return text.ok() ? keyedValue(*text, "oom_kill") : 0;
  }
  // v1 counts an OOM kill in the victim's own group, which for a container is the
  // runtime's group below the task's.
  std::vector<std::string> groups;
  groupsBelowFirst(memory_dir_, &groups);
  // Newer kernels also count it in every ancestor, so the largest count is the task's,
  // without counting a kill twice.
  uint64_t kills = 0;
  for (const std::string& dir : groups) {
    auto text = readFile(dir + "/memory.oom_control");
    if (text.ok()) kills = std::max(kills, keyedValue(*text, "oom_kill"));
  }
  return kills;
}

int TaskCgroup::openOomEventFd() const {
  if (memory_dir_.empty() || memory_is_v2_) return -1;
  int oom_fd = ::open((memory_dir_ + "/memory.oom_control").c_str(), O_RDONLY | O_CLOEXEC);
  if (oom_fd < 0) return -1;
  int event_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd >= 0) {
    Status st = writeExistingFile(memory_dir_ + "/cgroup.event_control",
                                  std::to_string(event_fd) + " " + std::to_string(oom_fd));
    if (!st.isOk()) {
      ::close(event_fd);
      event_fd = -1;
    }
  }
  ::close(oom_fd);  // the kernel keeps its own reference while the event is registered
  return event_fd;
}

Status TaskCgroup::removeEverywhere(const CgroupLayout& layout, const std::string& parent,
                                    const std::string& name) {
  const std::string rel = joinPath(parent, name);
  for (const std::string& mount : layout.all_mounts) {
    std::vector<std::string> groups;
    groupsBelowFirst(mount + "/" + rel, &groups);
    for (const std::string& dir : groups) {
      // The kernel may hold a group for a moment after its last process exits.
      bool removed = false;
      for (int i = 0; i < 2000 && !removed; ++i) {
        removed = ::rmdir(dir.c_str()) == 0 || errno == ENOENT;
        if (!removed && errno != EBUSY) return errnoStatus("cannot remove cgroup", dir, errno);
        if (!removed) ::usleep(1000);
      }
      if (!removed) return Status::unavailable("cgroup still busy after 2 s: " + dir);
    }
  }
  return Status::ok();
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
      // Groups a container runtime left below the task's go first.
      std::vector<std::string> groups;
      groupsBelowFirst(*it, &groups);
      for (const std::string& dir : groups) {
        if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) busy = true;
      }
    }
    if (!busy) return Status::ok();
    ::usleep(1000);
  }
  return Status::unavailable("cgroup of task still busy after 2 s: " +
                             (dirs_.empty() ? std::string("?") : dirs_.front()));
}

}  // namespace gpool::agent
