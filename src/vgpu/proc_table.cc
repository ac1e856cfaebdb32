#include "vgpu/proc_table.h"

#include <algorithm>
#include <iterator>

namespace gpool::vgpu {
namespace {

constexpr ProcEntry kTable[] = {
#include "vgpu/generated/proc_table.inc"
};

}  // namespace

const ProcEntry* procTable(std::size_t* count) {
  *count = std::size(kTable);
  return kTable;
}

int procTableCudaVersion() {
  return GPOOL_PROC_TABLE_CUDA_VERSION;
}

ProcResolution resolveProc(std::string_view name, int cuda_version, bool per_thread) {
  // Binary search for the first row of `name`; rows of one name are contiguous.
  const ProcEntry* begin = std::begin(kTable);
  const ProcEntry* end = std::end(kTable);
  const ProcEntry* first = std::lower_bound(
      begin, end, name, [](const ProcEntry& e, std::string_view n) { return e.name < n; });
  if (first == end || std::string_view(first->name) != name) return {};
  const ProcEntry* best_default = nullptr;
  const ProcEntry* best_per_thread = nullptr;
  for (const ProcEntry* e = first; e != end && std::string_view(e->name) == name; ++e) {
    if (e->version > cuda_version) continue;
    if (e->per_thread != 0) {
      best_per_thread = e;  // ascending versions: the last match is the newest
    } else {
      best_default = e;
    }
  }
  if (best_default == nullptr) return {ProcLookup::kVersionNotSufficient, nullptr};
  if (per_thread && best_per_thread != nullptr) return {ProcLookup::kFound, best_per_thread};
  return {ProcLookup::kFound, best_default};
}

}  // namespace gpool::vgpu
