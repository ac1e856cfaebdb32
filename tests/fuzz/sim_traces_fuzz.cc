// Fuzz target: the simulator's trace readers (src/sim, docs/simulator.md): the Alibaba openb
// node and pod lists (FGD mode and dynamic replay), the Philly job trace, the cluster specs of
// `gpool sim --cluster` and the trace's timestamps. The input is written as a trace file and
// read by every reader; it is also tried as a cluster spec and as a timestamp.
//
// Beyond "no crash, no undefined behaviour, no runaway allocation": readers refuse a bad file
// with InvalidArgument, never another code (the file is readable).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "sim/dynamic_trace.h"
#include "sim/openb_trace.h"

namespace gpool::fuzz {
namespace {

template <typename T>
void expectReadOrRefused(const Result<T>& r, std::string_view reader) {
  if (!r.ok() && r.status().code() != StatusCode::kInvalidArgument) {
    fail(std::string(reader) + " refused a readable file with " + r.status().toString());
  }
}

}  // namespace
}  // namespace gpool::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpool;
  using namespace gpool::fuzz;
  const std::string text(reinterpret_cast<const char*>(data), size);
  // ".csv": buildDynamicCluster reads a spec naming a .csv file as an openb node list.
  static const std::string path = scratchDir() + "/trace.csv";
  writeFile(path, text);

  Result<std::vector<sim::OpenbNode>> nodes = sim::readOpenbNodes(path);
  expectReadOrRefused(nodes, "readOpenbNodes");
  if (nodes.ok()) (void)sim::buildCluster(*nodes);
  expectReadOrRefused(sim::readOpenbPods(path), "readOpenbPods");
  sim::TraceFilter all;
  expectReadOrRefused(sim::readPhillyJobs(path, all), "readPhillyJobs");
  expectReadOrRefused(sim::readOpenbJobs(path, all), "readOpenbJobs");
  // A window and sampling, as `gpool sim --dynamic` passes them.
  sim::TraceFilter some;
  some.window_start_s = 60;
  some.window_end_s = 7 * 24 * 3600;
  some.max_jobs = 50;
  some.sample_every = 3;
  expectReadOrRefused(sim::readPhillyJobs(path, some), "readPhillyJobs (filtered)");
  expectReadOrRefused(sim::readOpenbJobs(path, some), "readOpenbJobs (filtered)");
  expectReadOrRefused(sim::buildDynamicCluster(path), "buildDynamicCluster (file)");
  // As a spec ("4x8:A100:80,2x4"); a spec naming a .csv file would read another file.
  if (text.find(".csv") == std::string::npos) {
    expectReadOrRefused(sim::buildDynamicCluster(text), "buildDynamicCluster (spec)");
  }
  (void)sim::parseTimestamp(text);
  return 0;
}
