#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "sched/cluster.h"
#include "sched/placement.h"

namespace gpool::sched::testing {

// FNV-1a over everything a decision consists of. The digest tests record one value per policy
// with the reference code; any change of any decision (node, GPUs, slice, explanation text,
// pending reason) changes it.
class Digest {
 public:
  void add(uint64_t v) {
    for (int i = 0; i < 8; ++i)
      byte(static_cast<unsigned char>(v >> (8 * i)));
  }
  void add(double d) {
    uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    add(bits);
  }
  void add(std::string_view s) {
    add(uint64_t{s.size()});
    for (char c : s)
      byte(static_cast<unsigned char>(c));
  }
  void add(const TaskAllocation& a) {
    add(uint64_t{a.node});
    add(a.cpu_millis);
    add(a.ram_mib);
    add(uint64_t{a.gpus.size()});
    for (const GpuSlice& s : a.gpus) {
      add(uint64_t{s.gpu_index});
      add(s.memory_mib);
      add(uint64_t{s.compute});
    }
  }
  void add(const std::vector<TaskAllocation>& tasks) {
    add(uint64_t{tasks.size()});
    for (const auto& t : tasks)
      add(t);
  }
  void add(const PlacementResult& r) {
    add(uint64_t{r.placed});
    add(uint64_t{static_cast<uint8_t>(r.reason)});
    add(r.tasks);
    add(r.explanation);
    for (const auto& u : r.unsatisfiable)
      add(u);
  }
  uint64_t value() const { return h_; }

 private:
  void byte(unsigned char c) {
    h_ ^= c;
    h_ *= 1099511628211ULL;
  }
  uint64_t h_ = 14695981039346656037ULL;
};

}  // namespace gpool::sched::testing
