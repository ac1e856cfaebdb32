#pragma once

// Shared by the interposer's integration tests: a vgpu_client child process with pipes, and a
// fixture that creates regions in a temporary directory and reads the simulated GPU's busy time.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fakes/common/fake_gpu_state.h"
#include "vgpu/shm_region.h"

namespace gpool::vgpu::testing {

inline constexpr std::uint64_t kMiB = 1 << 20;
inline constexpr std::uint64_t kContext = 64 * kMiB;  // the fake's default context size
inline const char* const kMethods[] = {"direct", "dlsym", "procaddr"};

// A vgpu_client process with pipes to its stdin and from its stdout.
class Client {
 public:
  Client(const std::vector<std::string>& env, const std::vector<std::string>& args) {
    int in[2];
    int out[2];
    // Close-on-exec, so that later clients do not inherit (and keep open) this one's pipes.
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::close(in[1]);
      ::close(out[0]);
      for (const std::string& e : env)
        ::putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> argv;
      static const std::string client = std::string(GPOOL_BINARY_DIR) + "/tests/vgpu/vgpu_client";
      argv.push_back(const_cast<char*>(client.c_str()));
      for (const std::string& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(client.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    stdout_ = ::fdopen(out[0], "r");
  }
  ~Client() {
    closeStdin();
    if (pid_ > 0) wait();
    if (stdout_ != nullptr) std::fclose(stdout_);
  }
  // Reads "key value" lines until `until` has been seen (or EOF).
  void readUntil(const std::string& until) {
    char line[512];
    while (std::fgets(line, sizeof(line), stdout_) != nullptr) {
      char key[128];
      char value[256];
      if (std::sscanf(line, "%127s %255s", key, value) == 2) {
        values_[key] = value;
        if (until == key) return;
      }
    }
  }
  void send(const char* bytes) {
    if (::write(stdin_, bytes, std::strlen(bytes)) < 0) std::abort();
  }
  void closeStdin() {
    if (stdin_ >= 0) ::close(stdin_);
    stdin_ = -1;
  }
  int wait() {
    readUntil("");
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  void kill() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  long long num(const std::string& key) const {
    auto it = values_.find(key);
    return it == values_.end() ? -1 : std::atoll(it->second.c_str());
  }
  bool has(const std::string& key) const { return values_.count(key) > 0; }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  FILE* stdout_ = nullptr;
  std::map<std::string, std::string> values_;
};

class VgpuShimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* sanitized = std::getenv("GPOOL_SANITIZED");
    if (sanitized != nullptr && std::string(sanitized) == "1") {
      GTEST_SKIP() << "LD_PRELOAD tests cannot run under a sanitizer";
    }
    char tmpl[] = "/tmp/gpool-vgpu-it-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) {
      std::string cmd = "rm -rf " + dir_;
      ASSERT_EQ(std::system(cmd.c_str()), 0);
    }
  }

  std::string region(const std::string& name, std::uint64_t quota, std::uint32_t share = 1000,
                     SharePolicy policy = SharePolicy::kWorkConserving) {
    RegionConfig cfg;
    cfg.quota_bytes = quota;
    cfg.share_permille = share;
    cfg.policy = policy;
    cfg.context_bytes = kContext;
    cfg.control_period_us = 20000;
    const std::string path = dir_ + "/" + name;
    auto r = ShmRegion::create(path, cfg);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return path;
  }

  std::vector<std::string> env(const std::string& regions) const {
    const std::string bin = GPOOL_BINARY_DIR;
    return {"LD_PRELOAD=" + bin + "/src/vgpu/libgpool-vgpu.so",
            "LD_LIBRARY_PATH=" + bin + "/tests/fakes/lib",
            "GPOOL_FAKE_GPU_STATE=" + dir_ + "/fake-gpu-state", "GPOOL_FAKE_GPU_MEMORY_MIB=16384",
            "GPOOL_VGPU_REGIONS=" + regions};
  }

  // Busy microseconds of `pid` (0 = all) on the simulated GPU within [t0, t1).
  std::int64_t busy(std::int32_t pid, std::int64_t t0, std::int64_t t1) const {
    const std::string path = dir_ + "/fake-gpu-state";
    int fd = ::open(path.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0);
    void* mem = ::mmap(nullptr, sizeof(fakes::FakeState), PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    const auto* s = static_cast<const fakes::FakeState*>(mem);
    const fakes::FakeDeviceRuntime& rt = s->rt[0];
    const std::uint64_t n = std::min<std::uint64_t>(rt.kernel_seq, fakes::kFakeKernelRing);
    std::int64_t total = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      const fakes::FakeKernel& k = rt.ring[(rt.kernel_seq - 1 - i) % fakes::kFakeKernelRing];
      if (pid != 0 && k.pid != pid) continue;
      const std::int64_t a = std::max(k.start_us, t0);
      const std::int64_t b = std::min(k.end_us, t1);
      if (b > a) total += b - a;
    }
    ::munmap(mem, sizeof(fakes::FakeState));
    return total;
  }

  std::string dir_;
};

}  // namespace gpool::vgpu::testing
