// launcher_bench: task start latency, from the launch call to the task's process running (the
// task writes one byte to a FIFO), through the launcher and its detached supervisor, against a
// baseline of plain fork+exec of the same program in the same run. Target: p50 < 20 ms without
// containers. Then a job with an image (docs/containers.md) against a bare task of the same
// program (busybox sh writing the byte) in the same run; target: p50 < 1 s with the image
// cached. Then the node's image cache: a task's first start, which loads its image from the
// node's image directory, against the next start of the same image (cached), in the same run.
// Needs root (cgroups, user switch, Podman); the task runs as "nobody".
//   launcher_bench [iterations=200] [container iterations=20]
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "agent/cgroup.h"
#include "agent/container.h"
#include "agent/launcher.h"
#include "agent/sys_util.h"
#include "common/clock.h"

namespace {

using gpool::Micros;
using gpool::realClock;
using gpool::agent::Launcher;
using gpool::agent::TaskLaunch;

struct Stats {
  double p50_ms = 0, p99_ms = 0, mean_ms = 0, max_ms = 0;
};

Stats summarise(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  Stats s;
  if (ms.empty()) return s;
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  s.p50_ms = at(0.50);
  s.p99_ms = at(0.99);
  s.max_ms = ms.back();
  for (double v : ms)
    s.mean_ms += v;
  s.mean_ms /= static_cast<double>(ms.size());
  return s;
}

// A fresh FIFO, opened for reading before the task starts. Returns the read fd.
int openFifo(const std::string& path) {
  ::unlink(path.c_str());
  if (::mkfifo(path.c_str(), 0666) != 0) return -1;
  ::chmod(path.c_str(), 0666);
  return ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
}

bool waitByte(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  for (;;) {
    if (::poll(&pfd, 1, 10'000) <= 0) return false;
    char c;
    if (::read(fd, &c, 1) == 1) return true;
  }
}

double elapsedMs(Micros since) {
  return static_cast<double>((realClock().monotonic() - since).count()) / 1000.0;
}

std::vector<double> runBaseline(const std::string& program, const std::string& dir, int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    std::string fifo = dir + "/fifo";
    int fd = openFifo(fifo);
    Micros t0 = realClock().monotonic();
    pid_t pid = ::fork();
    if (pid == 0) {
      ::execl(program.c_str(), program.c_str(), "ready", fifo.c_str(), nullptr);
      ::_exit(127);
    }
    if (!waitByte(fd)) std::fprintf(stderr, "baseline: no byte from the child\n");
    out.push_back(elapsedMs(t0));
    ::waitpid(pid, nullptr, 0);
    ::close(fd);
  }
  return out;
}

std::vector<double> runLauncher(Launcher& launcher, const std::string& program,
                                const std::string& dir, int n, const char* label,
                                const std::string& image = "") {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    std::string fifo = dir + "/fifo";
    int fd = openFifo(fifo);
    TaskLaunch l;
    l.job_id = std::string("bench-") + label;
    l.task_index = static_cast<uint32_t>(i);
    l.argv = {program, "ready", fifo};
    if (!image.empty()) {
      // The same start through busybox's sh: in the image, or (image "-") bare on the host.
      l.argv = {"/bin/sh", "-c", "echo > " + fifo};
      if (image != "-") l.container = gpool::agent::ContainerSpec{image, {}};
    }
    l.user = "nobody";
    l.working_dir = dir;
    l.cpu_millicores = 1000;
    l.memory_mib = 256;
    // No GPU for the busybox rows: the bench machine has no /dev/nvidia0 to pass into a
    // container.
    if (image.empty()) l.gpus = {{"GPU-bench-0", 0}};
    Micros t0 = realClock().monotonic();
    auto info = launcher.launch(l);
    if (!info.ok()) {
      std::fprintf(stderr, "launch failed: %s\n", info.status().toString().c_str());
      std::exit(1);
    }
    if (!waitByte(fd)) std::fprintf(stderr, "launcher: no byte from the task\n");
    out.push_back(elapsedMs(t0));
    (void)launcher.wait(l.taskName(), std::chrono::milliseconds(10'000));
    (void)launcher.remove(l.taskName());
    ::close(fd);
  }
  return out;
}

void print(const char* name, const Stats& s, const Stats& base) {
  std::printf(
      "%-34s p50 %7.2f ms  p99 %7.2f ms  mean %7.2f ms  max %7.2f ms  p50/baseline %6.1fx\n", name,
      s.p50_ms, s.p99_ms, s.mean_ms, s.max_ms, base.p50_ms > 0 ? s.p50_ms / base.p50_ms : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 200;
  if (::geteuid() != 0) {
    std::fprintf(stderr, "launcher_bench needs root (cgroups and the switch to user nobody)\n");
    return 1;
  }
  std::string program = GPOOL_TASK_HELPER;
  char tmpl[] = "/tmp/gpool-launcher-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return 1;
  std::string dir = tmpl;
  ::chmod(dir.c_str(), 0777);

  auto layout = gpool::agent::CgroupLayout::detect();
  // Start latency is mostly scheduling hand-offs between processes, so the load on the machine
  // is part of every figure.
  std::string load = gpool::agent::readFile("/proc/loadavg").valueOr("?\n");
  std::printf("launcher_bench: %d starts each; cgroups: %s; %ld cpus; load average %s", n,
              layout.ok() ? std::string(gpool::agent::cgroupModeName(layout->mode)).c_str() : "?",
              ::sysconf(_SC_NPROCESSORS_ONLN), load.c_str());
  std::printf("task program %s\n", program.c_str());

  Stats base = summarise(runBaseline(program, dir, n));
  print("baseline fork+exec", base, base);

  Launcher::Options o;
  o.state_root = dir + "/state";
  o.supervisor_path = GPOOL_SUPERVISOR;
  o.supervisor.cgroup_parent = "gpool-bench-" + std::to_string(::getpid());
  o.supervisor.use_cgroups = false;
  Launcher plain(o);
  print("launcher, no cgroups", summarise(runLauncher(plain, program, dir, n, "plain")), base);

  o.supervisor.use_cgroups = true;
  Launcher with_cgroups(o);
  Stats cg = summarise(runLauncher(with_cgroups, program, dir, n, "cgroup"));
  print("launcher, cgroups + device filter", cg, base);

  for (const auto& [c, mount] :
       layout.ok() ? layout->v1_mounts : std::map<std::string, std::string>{}) {
    ::rmdir((mount + "/" + o.supervisor.cgroup_parent).c_str());
  }
  if (layout.ok() && !layout->unified.empty()) {
    ::rmdir((layout->unified + "/" + o.supervisor.cgroup_parent).c_str());
  }
  std::printf("target: p50 < 20 ms with cgroups: %s\n", cg.p50_ms < 20.0 ? "met" : "MISSED");

  // Containers: a bare task and a task in the image, both running busybox sh; the image is in
  // Podman's store (cached), as on a node that ran the image before.
  int nc = argc > 2 ? std::atoi(argv[2]) : 20;
  const std::string image = "localhost/gpool-test-busybox:1";
  auto runtime = gpool::agent::chooseContainerRuntime("auto");
  std::string make = std::string(GPOOL_SOURCE_DIR) + "/scripts/make-busybox-image.sh " + image;
  if (!runtime.ok() || std::system(make.c_str()) != 0) {
    std::printf("containers: skipped (%s)\n", runtime.ok() ? "cannot build the busybox image"
                                                           : runtime.status().message().c_str());
  } else {
    o.supervisor.container_runtime = *runtime;
    Launcher containers(o);
    Stats bare = summarise(runLauncher(containers, program, dir, nc, "bare-sh", "-"));
    print("bare task (busybox sh), cgroups", bare, base);
    Stats ctr = summarise(runLauncher(containers, program, dir, nc, "ctr", image));
    print(("container (podman, " + *runtime + ")").c_str(), ctr, base);
    std::printf("container p50 / bare task p50: %.1fx; target: container p50 < 1 s: %s\n",
                bare.p50_ms > 0 ? ctr.p50_ms / bare.p50_ms : 0.0,
                ctr.p50_ms < 1000.0 ? "met" : "MISSED");

    // The node's image cache: a busybox image of its own (a marker file makes its one layer
    // unlike the test image's, so that removing it from the store removes the layer too),
    // saved as an OCI archive in the image directory and removed from the store; each round
    // starts a task that loads it (first use on the node: podman load unpacks the layer), then
    // one that finds it cached.
    const std::string cached = "localhost/gpool-bench-cache-" + std::to_string(::getpid()) + ":1";
    const std::string images = dir + "/images";
    ::mkdir(images.c_str(), 0755);
    const std::string archive =
        images + "/gpool-bench-cache-" + std::to_string(::getpid()) + "/1.tar";
    ::mkdir(archive.substr(0, archive.rfind('/')).c_str(), 0755);
    const std::string remove = "podman rmi " + cached + " >/dev/null 2>&1";
    const std::string root = dir + "/cache-rootfs";
    const std::string build =
        "set -e; mkdir -p '" + root + "/bin' '" + root + "/etc' '" + root + "/tmp'; cp \"$(" +
        "command -v busybox)\" '" + root + "/bin/busybox'; ln -s busybox '" + root +
        "/bin/sh'; echo " + cached + " > '" + root + "/etc/gpool-image'; tar -C '" + root +
        "' -cf '" + dir + "/cache-rootfs.tar' .; podman import -q '" + dir + "/cache-rootfs.tar' " +
        cached + " >/dev/null; podman save -q --format oci-archive -o '" + archive + "' " + cached +
        "; " + remove;
    if (std::system(build.c_str()) != 0) {
      std::printf("image cache: skipped (cannot build %s)\n", archive.c_str());
    } else {
      o.supervisor.image_dir = images;
      Launcher cache(o);
      std::vector<double> first, second;
      for (int i = 0; i < nc; ++i) {
        (void)!std::system(remove.c_str());
        first.push_back(runLauncher(cache, program, dir, 1, "load", cached)[0]);
        second.push_back(runLauncher(cache, program, dir, 1, "cached", cached)[0]);
      }
      (void)!std::system(remove.c_str());
      struct stat st {};
      ::stat(archive.c_str(), &st);
      Stats loaded = summarise(first), hit = summarise(second);
      std::printf("image cache: a %lld KiB OCI archive\n",
                  static_cast<long long>(st.st_size / 1024));
      print("first start on the node (loads)", loaded, base);
      print("second start (cached)", hit, base);
      std::printf("first start p50 / second start p50: %.1fx\n",
                  hit.p50_ms > 0 ? loaded.p50_ms / hit.p50_ms : 0.0);
    }
  }
  for (const auto& [c, mount] :
       layout.ok() ? layout->v1_mounts : std::map<std::string, std::string>{}) {
    ::rmdir((mount + "/" + o.supervisor.cgroup_parent).c_str());
  }
  if (layout.ok()) {
    for (const std::string& mount : layout->all_mounts)
      ::rmdir((mount + "/" + o.supervisor.cgroup_parent).c_str());
  }
  (void)gpool::agent::removeTree(dir);
  return 0;
}
