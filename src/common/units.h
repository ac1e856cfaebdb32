#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

// Units and their text forms, shared by the CLI, the config files, the REST API and the
// scheduler. Internally every quantity is an integer in a fixed unit so that arithmetic is
// exact:
//   GPU memory and RAM  MiB          "24G", "512M", "1.5T", "40GiB"; a bare number is MiB
//   GPU compute share   thousandths  "0.25", "25%", "1"  (1000 = a whole GPU's compute)
//   GPU count           thousandths  "2" (whole GPUs), "0.25" (a slice of one GPU)
//   CPU                 millicores   "8", "0.5", "500m"
//   durations           seconds      "[days-]hh:mm:ss" (Slurm forms), "90m", "2h", "1d12h"
//
// Every parser returns InvalidArgument with a message that quotes the input, says what was
// wrong and shows a valid example. Parsers never throw.
namespace gpool {

// Memory sizes are binary: 1G = 1024M. The largest accepted value is 1 PiB.
inline constexpr uint64_t kMaxMemoryMiB = uint64_t{1} << 30;
Result<uint64_t> parseMemoryMiB(std::string_view text);
// The shortest exact form: "24G", "1536M", "2T".
std::string formatMemoryMiB(uint64_t mib);

// A compute share in thousandths of a GPU, in [1, 1000].
inline constexpr uint32_t kComputeWhole = 1000;
Result<uint32_t> parseComputeShare(std::string_view text);
// "25%", "12.5%", "100%".
std::string formatComputeShare(uint32_t thousandths);

// A GPU count in thousandths: whole GPUs (1000, 2000, ...) up to kMaxGpusPerTask, or one
// fraction of a single GPU in (0, 1). "1.5" is rejected: a task gets whole GPUs or one slice.
inline constexpr uint32_t kMaxGpusPerTask = 1024;
Result<uint32_t> parseGpuCount(std::string_view text);
// "2", "0.25".
std::string formatGpuCount(uint32_t thousandths);

// CPU in millicores, in [1, 1'000'000'000].
Result<uint64_t> parseCpuMillis(std::string_view text);
// "8", "0.5", "0.125".
std::string formatCpuMillis(uint64_t millis);

// Durations in seconds. Accepted forms:
//   Slurm: "mm", "mm:ss", "hh:mm:ss", "d-hh", "d-hh:mm", "d-hh:mm:ss" (a bare number is minutes)
//   suffixed: "30s", "90m", "2h", "7d", and sums such as "1h30m" or "1d12h"
// Durations are >= 0 and at most 365 days.
inline constexpr int64_t kMaxDurationSeconds = int64_t{365} * 24 * 3600;
Result<int64_t> parseDuration(std::string_view text);
// "[days-]hh:mm:ss", e.g. "00:05:00", "1-02:00:00". Negative values are clamped to 0.
std::string formatDuration(int64_t seconds);

// Parses a non-negative decimal such as "12", "0.25" or "3.5" into an integer scaled by
// 10^`scale_digits`, exactly. Fails when the text has more fractional digits than fit (after
// stripping trailing zeros) or the value exceeds `max_scaled`. `what` names the quantity in
// error messages. Shared by the parsers above; exposed for other fixed-point settings.
Result<uint64_t> parseScaledDecimal(std::string_view text, int scale_digits, uint64_t max_scaled,
                                    std::string_view what);

}  // namespace gpool
