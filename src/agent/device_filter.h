#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

// Device access rules for a task's cgroup: the same rule list drives the cgroup v1 devices
// controller (devices.deny/devices.allow) and, on cgroup v2, an eBPF program of type
// BPF_PROG_TYPE_CGROUP_DEVICE loaded through the bpf() syscall directly (no libbpf).
namespace gpool::agent {

inline constexpr int64_t kAnyDevice = -1;
inline constexpr int64_t kNvidiaMajor = 195;
inline constexpr int64_t kNvidiaCtlMinor = 255;
inline constexpr int64_t kNvidiaModesetMinor = 254;

// One rule: the access in `access` (a subset of "rwm") to devices of `type` ('c' char, 'b'
// block, 'a' both) with `major`:`minor` (kAnyDevice for "*"). Rules are allow rules on a
// default-deny policy, which is the only policy cgroup v1 can express as a whitelist.
struct DeviceRule {
  char type = 'c';
  int64_t major = kAnyDevice;
  int64_t minor = kAnyDevice;
  std::string access = "rwm";

  // "c 195:0 rwm", the cgroup v1 devices.allow syntax.
  std::string toV1() const;
};

// Parses the devices.allow syntax, e.g. "c 195:0 rw" or "c 231:* rwm".
Result<DeviceRule> parseDeviceRule(const std::string& text);

// The devices every task may use: mknod of anything (opening is still checked), /dev/null,
// zero, full, random, urandom, tty, console, ptmx and pseudo-terminals (136:*).
std::vector<DeviceRule> baseDeviceRules();

// The NVIDIA devices a task with GPUs `minors` needs: nvidiactl, nvidia-modeset, each of its
// /dev/nvidia<minor>, and every minor of the majors in `uvm_majors` (nvidia-uvm and
// nvidia-uvm-tools, read from /proc/devices). Other GPUs' device files stay denied.
std::vector<DeviceRule> gpuDeviceRules(const std::vector<int32_t>& minors,
                                       const std::vector<int64_t>& uvm_majors);

// The majors of the character devices named `name_prefix`* in a /proc/devices text.
std::vector<int64_t> charMajorsNamed(const std::string& proc_devices, const std::string& prefix);

// Instructions of a BPF_PROG_TYPE_CGROUP_DEVICE program that allows exactly `rules` (first
// match allows; no match denies). Exposed for tests.
std::vector<bpf_insn> buildDeviceProgram(const std::vector<DeviceRule>& rules);

// Loads the program for `rules` and attaches it to the cgroup v2 directory `cgroup_dir`
// (BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI). The program stays attached until the cgroup is
// removed. Fails with the kernel's verifier log on a rejected program, PermissionDenied
// without CAP_BPF/CAP_SYS_ADMIN.
Status attachDeviceProgram(const std::string& cgroup_dir, const std::vector<DeviceRule>& rules);

}  // namespace gpool::agent
