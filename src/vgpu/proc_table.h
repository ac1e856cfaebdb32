#pragma once

#include <cstddef>
#include <string_view>

namespace gpool::vgpu {

// One ABI variant of a driver entry point, as declared by a PFN typedef in cudaTypedefs.h.
struct ProcEntry {
  const char* name;    // API name as the caller spells it to cuGetProcAddress, e.g. "cuMemAlloc"
  int version;         // CUDA version that introduced this ABI, e.g. 3020
  int per_thread;      // 1 for the _ptds/_ptsz (per-thread default stream) variant
  const char* symbol;  // exported symbol implementing it, e.g. "cuMemAlloc_v2"
};

enum class ProcLookup {
  kFound,
  kUnknownName,           // the name is not a driver API in the generated table
  kVersionNotSufficient,  // the name exists but only in versions newer than requested
};

struct ProcResolution {
  ProcLookup lookup = ProcLookup::kUnknownName;
  const ProcEntry* entry = nullptr;  // set when kFound
};

// Resolves (name, requested CUDA version, per-thread-stream flag) to the exported symbol the
// driver's cuGetProcAddress returns, exactly as the table generated from the CUDA headers says:
// the newest variant not newer than `cuda_version`; with `per_thread`, the newest per-thread
// variant not newer than it when one exists, else the default-stream one. Never guesses suffixes.
// Thread-safety: pure function over a constant table. No allocation, no syscalls.
ProcResolution resolveProc(std::string_view name, int cuda_version, bool per_thread);

// The generated table (sorted by name, then per_thread, then version) and the CUDA version of the
// headers it was generated from.
const ProcEntry* procTable(std::size_t* count);
int procTableCudaVersion();

}  // namespace gpool::vgpu
