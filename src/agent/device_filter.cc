#include "agent/device_filter.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "agent/sys_util.h"

namespace gpool::agent {
namespace {

bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xf;
  i.src_reg = src & 0xf;
  i.off = off;
  i.imm = imm;
  return i;
}

bpf_insn loadWord(uint8_t dst, uint8_t src, int16_t off) {
  return insn(BPF_LDX | BPF_MEM | BPF_W, dst, src, off, 0);
}
bpf_insn jumpIfNotEqual(uint8_t reg, int32_t imm, int16_t off) {
  return insn(BPF_JMP | BPF_JNE | BPF_K, reg, 0, off, imm);
}

uint32_t accessMask(const std::string& access) {
  uint32_t mask = 0;
  for (char c : access) {
    if (c == 'r') mask |= BPF_DEVCG_ACC_READ;
    if (c == 'w') mask |= BPF_DEVCG_ACC_WRITE;
    if (c == 'm') mask |= BPF_DEVCG_ACC_MKNOD;
  }
  return mask;
}

constexpr uint32_t kAllAccess = BPF_DEVCG_ACC_READ | BPF_DEVCG_ACC_WRITE | BPF_DEVCG_ACC_MKNOD;

long bpfCall(int cmd, bpf_attr* attr) {
  return ::syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

}  // namespace

std::string DeviceRule::toV1() const {
  auto num = [](int64_t v) { return v == kAnyDevice ? std::string("*") : std::to_string(v); };
  return std::string(1, type) + " " + num(major) + ":" + num(minor) + " " + access;
}

Result<DeviceRule> parseDeviceRule(const std::string& text) {
  auto bad = [&] {
    return Status::invalidArgument("device rule '" + text +
                                   "' is not of the form 'c 195:0 rw' (type major:minor access)");
  };
  std::vector<std::string> f = splitString(text, ' ');
  if (f.size() != 3 || f[0].size() != 1 || (f[0] != "c" && f[0] != "b" && f[0] != "a")) {
    return bad();
  }
  size_t colon = f[1].find(':');
  if (colon == std::string::npos) return bad();
  auto num = [](const std::string& s, int64_t* out) {
    if (s == "*") {
      *out = kAnyDevice;
      return true;
    }
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    *out = std::stoll(s);
    return true;
  };
  DeviceRule rule;
  rule.type = f[0][0];
  if (!num(f[1].substr(0, colon), &rule.major) || !num(f[1].substr(colon + 1), &rule.minor)) {
    return bad();
  }
  if (f[2].empty() || f[2].find_first_not_of("rwm") != std::string::npos) return bad();
  rule.access = f[2];
  return rule;
}

std::vector<DeviceRule> baseDeviceRules() {
  return {
      {'c', kAnyDevice, kAnyDevice, "m"},
      {'b', kAnyDevice, kAnyDevice, "m"},
      {'c', 1, 3, "rwm"},             // null
      {'c', 1, 5, "rwm"},             // zero
      {'c', 1, 7, "rwm"},             // full
      {'c', 1, 8, "rwm"},             // random
      {'c', 1, 9, "rwm"},             // urandom
      {'c', 5, 0, "rwm"},             // tty
      {'c', 5, 1, "rwm"},             // console
      {'c', 5, 2, "rwm"},             // ptmx
      {'c', 136, kAnyDevice, "rwm"},  // pts
  };
}

std::vector<DeviceRule> gpuDeviceRules(const std::vector<int32_t>& minors,
                                       const std::vector<int64_t>& uvm_majors) {
  std::vector<DeviceRule> rules;
  if (minors.empty()) return rules;
  rules.push_back({'c', kNvidiaMajor, kNvidiaCtlMinor, "rw"});
  rules.push_back({'c', kNvidiaMajor, kNvidiaModesetMinor, "rw"});
  for (int32_t minor : minors)
    rules.push_back({'c', kNvidiaMajor, minor, "rw"});
  for (int64_t major : uvm_majors)
    rules.push_back({'c', major, kAnyDevice, "rw"});
  return rules;
}

std::vector<int64_t> charMajorsNamed(const std::string& proc_devices, const std::string& prefix) {
  std::vector<int64_t> majors;
  std::istringstream in(proc_devices);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Block devices", 0) == 0) break;
    std::istringstream fields(line);
    int64_t major = 0;
    std::string name;
    if (fields >> major >> name && name.rfind(prefix, 0) == 0) majors.push_back(major);
  }
  return majors;
}

std::vector<bpf_insn> buildDeviceProgram(const std::vector<DeviceRule>& rules) {
  // Registers: r1 = struct bpf_cgroup_dev_ctx*, r2 = device type, r3 = requested access,
  // r4 = major, r5 = minor.
  std::vector<bpf_insn> prog = {
      loadWord(BPF_REG_2, BPF_REG_1, 0),
      insn(BPF_ALU | BPF_MOV | BPF_X, BPF_REG_3, BPF_REG_2, 0, 0),
      insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff),
      insn(BPF_ALU | BPF_RSH | BPF_K, BPF_REG_3, 0, 0, 16),
      loadWord(BPF_REG_4, BPF_REG_1, 4),
      loadWord(BPF_REG_5, BPF_REG_1, 8),
  };
  for (const DeviceRule& rule : rules) {
    // Each block falls through to its "allow" tail when every test passes; any failed test
    // jumps past the block to the next rule. Offsets are filled in once the length is known.
    std::vector<bpf_insn> block;
    std::vector<size_t> jumps;
    if (rule.type != 'a') {
      int32_t type = rule.type == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR;
      jumps.push_back(block.size());
      block.push_back(jumpIfNotEqual(BPF_REG_2, type, 0));
    }
    uint32_t mask = accessMask(rule.access);
    if (mask != kAllAccess) {
      // Allowed only when the requested access is a subset of the rule's.
      block.push_back(insn(BPF_ALU | BPF_MOV | BPF_X, BPF_REG_1, BPF_REG_3, 0, 0));
      block.push_back(insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_1, 0, 0, static_cast<int32_t>(mask)));
      jumps.push_back(block.size());
      block.push_back(insn(BPF_JMP | BPF_JNE | BPF_X, BPF_REG_1, BPF_REG_3, 0, 0));
    }
    if (rule.major != kAnyDevice) {
      jumps.push_back(block.size());
      block.push_back(jumpIfNotEqual(BPF_REG_4, static_cast<int32_t>(rule.major), 0));
    }
    if (rule.minor != kAnyDevice) {
      jumps.push_back(block.size());
      block.push_back(jumpIfNotEqual(BPF_REG_5, static_cast<int32_t>(rule.minor), 0));
    }
    block.push_back(insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1));
    block.push_back(insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
    for (size_t j : jumps)
      block[j].off = static_cast<int16_t>(block.size() - j - 1);
    prog.insert(prog.end(), block.begin(), block.end());
  }
  prog.push_back(insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0));
  prog.push_back(insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  return prog;
}

Status attachDeviceProgram(const std::string& cgroup_dir, const std::vector<DeviceRule>& rules) {
  std::vector<bpf_insn> prog = buildDeviceProgram(rules);
  static const char kLicense[] = "Dual BSD/GPL";
  std::string log(64 * 1024, '\0');

  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insns = reinterpret_cast<uint64_t>(prog.data());
  load.insn_cnt = static_cast<uint32_t>(prog.size());
  load.license = reinterpret_cast<uint64_t>(kLicense);
  load.log_buf = reinterpret_cast<uint64_t>(log.data());
  load.log_size = static_cast<uint32_t>(log.size());
  load.log_level = 1;
  int prog_fd = static_cast<int>(bpfCall(BPF_PROG_LOAD, &load));
  if (prog_fd < 0) {
    int err = errno;
    std::string msg = "cannot load the device filter for " + cgroup_dir + ": " +
                      std::strerror(err) + ": " + std::string(log.c_str());
    return err == EPERM ? Status::permissionDenied(msg) : Status::ioError(msg);
  }
  int cg_fd = ::open(cgroup_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cg_fd < 0) {
    int err = errno;
    ::close(prog_fd);
    return errnoStatus("cannot open cgroup", cgroup_dir, err);
  }
  bpf_attr attach{};
  attach.target_fd = static_cast<uint32_t>(cg_fd);
  attach.attach_bpf_fd = static_cast<uint32_t>(prog_fd);
  attach.attach_type = BPF_CGROUP_DEVICE;
  attach.attach_flags = BPF_F_ALLOW_MULTI;
  long rc = bpfCall(BPF_PROG_ATTACH, &attach);
  int err = errno;
  ::close(cg_fd);
  ::close(prog_fd);  // the attachment keeps the program alive
  if (rc != 0) return errnoStatus("cannot attach the device filter to", cgroup_dir, err);
  return Status::ok();
}

}  // namespace gpool::agent
