#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "sched/cluster.h"

// Workloads for the dynamic replay: jobs that arrive, run for a known time and leave. Two
// sources: the Philly job-level trace (pollux-osdi21/traces/philly.csv: whole GPUs, 15 virtual
// clusters) and the Alibaba openb pod lists (creation/deletion times, fractional GPUs).
namespace gpool::sim {

struct DynJob {
  uint64_t id = 0;          // 1-based position in the trace file (stable across filters)
  int64_t submit_s = 0;     // seconds since the first submission of the loaded workload
  int64_t duration_s = 0;   // run time when it runs undisturbed
  uint32_t num_gpus = 0;    // whole GPUs (Philly), or GPUs of the pod (openb)
  uint32_t gpu_milli = 0;   // per GPU: 1000 for whole GPUs, 1..999 for a slice (openb)
  uint64_t cpu_millis = 0;  // 0 for Philly (not recorded)
  uint64_t ram_mib = 0;
  std::string group;  // Philly virtual cluster / openb QoS class: the fairness unit
  std::string user;   // the trace has no users; equal to group
  // Total requested GPU compute in thousandths (num_gpus x gpu_milli).
  uint64_t computeMilli() const { return uint64_t{num_gpus} * gpu_milli; }
};

// Which part of a trace to load. Times are seconds from the trace's first submission.
struct TraceFilter {
  int64_t window_start_s = 0;
  int64_t window_end_s = -1;  // < 0: to the end
  size_t max_jobs = 0;        // 0: all (the first max_jobs by submit time inside the window)
  // Keep one job in `sample_every` (1 = all), chosen by position so runs are reproducible.
  size_t sample_every = 1;
};

// Reads philly.csv (timestamp,duration,num_gpus,gpu_time,cluster). Rows are sorted by submit
// time; jobs with 0 GPUs or a non-positive duration are dropped. Fails with InvalidArgument
// naming the file and line on malformed rows, IoError when the file cannot be read.
Result<std::vector<DynJob>> readPhillyJobs(const std::string& path, const TraceFilter& filter);

// Reads an openb pod list (name,cpu_milli,memory_mib,num_gpu,gpu_milli,...,creation_time,
// deletion_time,scheduled_time). Pods without GPUs or without a positive lifetime are dropped.
Result<std::vector<DynJob>> readOpenbJobs(const std::string& path, const TraceFilter& filter);

// Parses "2017-10-09 07:01:55" as seconds since the Unix epoch (the clock is taken as UTC).
Result<int64_t> parseTimestamp(const std::string& text);

// A cluster from a spec: comma-separated groups "NxG[:MODEL[:MEM_GIB[:CORES]]]" (N servers of G
// GPUs, default model V100 with 32 GiB; each server 64 cores and 8 GiB RAM per core), e.g. "8x8"
// or "4x8:A100:80,8x4:T4:16:32"; or the path of an openb node list CSV
// (sn,cpu_milli,memory_mib,gpu, model). GPU nodes only. At most kMaxGpusPerServer GPUs per
// server and kMaxClusterGpus in all (openb_trace.h); more is InvalidArgument.
Result<sched::ClusterState> buildDynamicCluster(const std::string& spec);

}  // namespace gpool::sim
