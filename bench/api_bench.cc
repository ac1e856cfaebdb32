// api-bench: the cost of strict decoding. Each decoder is measured next to its baseline in the
// same run: nlohmann-json parsing the same text into a json value, with no checks. The ratio
// (decode / parse) is the price of the ObjectReader's validation and of building the C++ value.

#include <benchmark/benchmark.h>

#include <string>

#include "api/job.h"
#include "api/job_spec.h"
#include "api/json_reader.h"
#include "api/node.h"

namespace gpool::api {
namespace {

JobSpec sampleSpec() {
  JobSpec s;
  s.name = "train-llm";
  s.command = {"torchrun", "--nproc-per-node=2", "train.py", "--epochs", "10"};
  s.env = {{"WANDB_MODE", "offline"}, {"OMP_NUM_THREADS", "8"}, {"NCCL_DEBUG", "WARN"}};
  s.working_dir = "/home/alice/llm";
  s.resources.gpus_milli = 2000;
  s.resources.gpu_memory_mib = 40 * 1024;
  s.resources.cpus_milli = 8000;
  s.resources.ram_mib = 64 * 1024;
  s.tasks = 4;
  s.nodes = 2;
  s.constraints.gpu_models = {"NVIDIA A100-SXM4-80GB"};
  s.constraints.min_compute_capability = ComputeCapability{8, 0};
  s.constraints.node_labels = {{"fabric", "ib"}};
  s.time_limit_seconds = 86400;
  s.qos = "normal";
  s.array = *parseArraySpec("0-31%4");
  s.dependencies = {{DependencyKind::kAfterOk, 12}};
  return s;
}

Node sampleNode() {
  Node n;
  n.name = "gpu-01";
  n.labels = {{"rack", "r1"}};
  n.cpus_milli = 128'000;
  n.ram_mib = 1024 * 1024;
  for (uint32_t i = 0; i < 8; ++i) {
    Gpu g;
    g.uuid = "GPU-0000000" + std::to_string(i);
    g.index = i;
    g.pci_bus_id = "00000000:1" + std::to_string(i) + ":00.0";
    g.model = "NVIDIA H100 80GB HBM3";
    g.memory_mib = 80 * 1024;
    g.compute_capability = {9, 0};
    g.driver_version = "535.104.05";
    g.cuda_version = "12.2";
    n.gpus.push_back(g);
  }
  for (auto& g : n.gpus) {
    for (const auto& peer : n.gpus) {
      if (peer.uuid != g.uuid) g.links.push_back({peer.uuid, 18, PcieLevel::kSys});
    }
  }
  return n;
}

template <typename T>
void decodeText(benchmark::State& state, const T& sample) {
  const std::string text = dumpJson(toJson(sample));
  for (auto _ : state) {
    Result<nlohmann::json> j = parseJsonText(text, "body");
    T value{};
    Status s = fromJson(*j, &value);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(value);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

template <typename T>
void parseOnlyBaseline(benchmark::State& state, const T& sample) {
  const std::string text = dumpJson(toJson(sample));
  for (auto _ : state) {
    nlohmann::json j = nlohmann::json::parse(text);
    benchmark::DoNotOptimize(j);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

template <typename T>
void encodeText(benchmark::State& state, const T& sample) {
  for (auto _ : state) {
    std::string text = dumpJson(toJson(sample));
    benchmark::DoNotOptimize(text);
  }
}

void BM_JobSpecParseBaseline(benchmark::State& s) {
  parseOnlyBaseline(s, sampleSpec());
}
void BM_JobSpecDecode(benchmark::State& s) {
  decodeText(s, sampleSpec());
}
void BM_JobSpecEncode(benchmark::State& s) {
  encodeText(s, sampleSpec());
}
void BM_Node8GpuParseBaseline(benchmark::State& s) {
  parseOnlyBaseline(s, sampleNode());
}
void BM_Node8GpuDecode(benchmark::State& s) {
  decodeText(s, sampleNode());
}
void BM_Node8GpuEncode(benchmark::State& s) {
  encodeText(s, sampleNode());
}

void BM_JobTransition(benchmark::State& state) {
  Job job;
  job.id = 1;
  job.spec = sampleSpec();
  job.user = "alice";
  TimePoint now = fromUnixSeconds(1'700'000'000);
  for (auto _ : state) {
    // A full preempt-and-requeue cycle: three checked transitions.
    Status a = applyJobTransition(&job, JobState::kRunning, now);
    Status b = applyJobTransition(&job, JobState::kPreempted, now);
    Status c = applyJobTransition(&job, JobState::kPending, now, "Requeued");
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
    benchmark::DoNotOptimize(c);
  }
}

BENCHMARK(BM_JobSpecParseBaseline);
BENCHMARK(BM_JobSpecDecode);
BENCHMARK(BM_JobSpecEncode);
BENCHMARK(BM_Node8GpuParseBaseline);
BENCHMARK(BM_Node8GpuDecode);
BENCHMARK(BM_Node8GpuEncode);
BENCHMARK(BM_JobTransition);

}  // namespace
}  // namespace gpool::api

BENCHMARK_MAIN();
