#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "api/job.h"
#include "api/node.h"
#include "common/clock.h"

// The human output of the gpool commands: aligned tables, squeue/sinfo-like rows, and the
// long form of one job. Pure functions of their inputs (the current time is a parameter), so
// tests check exact text.
namespace gpool::cli {

enum class Align { kLeft, kRight };

// Untrusted text (names, reasons, commands, messages from gpoold) made safe for a terminal:
// control characters and invisible or direction-changing ones become visible escapes ("\e",
// "\n", "\u202e"), so that nothing a user stored can move another user's cursor, retitle their
// window or reorder what they read (api::escapeForTerminal). Every formatter below applies it to
// what it prints.
std::string terminalSafe(std::string_view text);

// A command line as a shell would take it back: words made of safe characters as they are,
// others in single quotes, and words with control or invisible characters in $'...' with their
// escapes (so `gpool show` prints `printf $'x\e[2J'`, never the escape itself).
std::string shellQuoted(const std::vector<std::string>& argv);

// Columns padded to their widest cell and separated by two spaces; trailing blanks removed;
// every line ends with '\n'. `align` may be shorter than the header (the rest is kLeft).
std::string formatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows,
                        const std::vector<Align>& align = {});

// How long a job has run: until `now` while it holds resources, until its end time once
// finished, 0 while pending. In [days-]hh:mm:ss ("00:00:00", "1-02:03:04").
std::string jobElapsed(const api::Job& job, TimePoint now);

// The GPUs a job asks for, all tasks together: "0", "0.25", "2", "0.5x4" (a slice per task for
// 4 tasks), "8".
std::string jobGpus(const api::JobSpec& spec);

// squeue's NODE(REASON) column: the nodes it runs on, or its reason in parentheses while
// pending ("(Resources)"), or "(None)".
std::string jobWhere(const api::Job& job);

// `gpool queue`'s table: JOBID NAME USER ST TIME GPUS NODE(REASON).
std::string formatQueue(const std::vector<api::Job>& jobs, TimePoint now);

// `gpool queue --start` (squeue --start): START_TIME instead of TIME, the expected start of a
// pending job held back by a reservation ("N/A" without one), the start of a running one.
std::string formatQueueStart(const std::vector<api::Job>& jobs, TimePoint now);

// `gpool show`'s long form: one "Key: value" line per field (scontrol show job style).
std::string formatJob(const api::Job& job, TimePoint now);

// What is allocated on one node, summed from the allocations of the jobs that hold resources.
struct NodeUsage {
  uint32_t slices = 0;             // slices allocated (a whole exclusive GPU counts one)
  uint64_t gpu_compute_milli = 0;  // compute allocated, thousandths of a GPU, all GPUs
  std::map<std::string, uint64_t> compute_by_gpu;  // the same per GPU UUID
  uint64_t cpus_milli = 0;
  uint64_t ram_mib = 0;
};
// Sums the allocations of `jobs` per node name (only jobs that hold resources count).
std::vector<std::pair<std::string, NodeUsage>> usageByNode(const std::vector<api::Job>& jobs);

// "2x A100" or "4x A100, 2x H100" for a node's GPUs; "-" without GPUs.
std::string nodeGpus(const api::Node& node);

// `gpool nodes`' table: NODE STATE GPUS SLICES(free/used) CPU(used/total) MEM(used/total).
// SLICES "free" is the GPU compute still free in GPUs ("1.75") on healthy GPUs of a server that
// takes work (an unhealthy GPU, or a DOWN or drained server, has none free: the scheduler places
// nothing there), "used" the number of slices allocated; GPUS says how many are unhealthy.
// `usage` comes from usageByNode.
std::string formatNodes(const std::vector<api::Node>& nodes,
                        const std::vector<std::pair<std::string, NodeUsage>>& usage);

// `gpool nodes --models`: MODEL GPUS NAMES, one row per GPU model of the pool with how many GPUs
// have it and the names `--gpu-model` accepts for it (api/gpu_model.h).
std::string formatGpuModels(const std::vector<api::Node>& nodes);

}  // namespace gpool::cli
