#include "api/job_spec.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace gpool::api::testing {
namespace {

using nlohmann::json;

JobSpec fullSpec() {
  JobSpec s;
  s.name = "train-llm";
  s.command = {"torchrun", "--nproc-per-node=2", "train.py"};
  s.env = {{"WANDB_MODE", "offline"}, {"OMP_NUM_THREADS", "8"}};
  s.working_dir = "/home/alice/llm";
  s.resources.gpus_milli = 2000;
  s.resources.gpu_memory_mib = 40 * 1024;
  s.resources.gpu_compute_milli = 500;
  s.resources.cpus_milli = 8000;
  s.resources.ram_mib = 64 * 1024;
  s.tasks = 4;
  s.nodes = 2;
  s.constraints.gpu_models = {"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"};
  s.constraints.min_compute_capability = ComputeCapability{8, 0};
  s.constraints.min_cuda = CudaVersion{12, 2};
  s.constraints.min_gpu_memory_mib = 40 * 1024;
  s.constraints.node_labels = {{"fabric", "ib"}};
  s.constraints.datasets = {"imagenet", "c4"};
  s.time_limit_seconds = 2 * 86400;
  s.qos = "high";
  s.preemptible = true;
  s.array = *parseArraySpec("0-31%4");
  s.dependencies = {{DependencyKind::kAfterOk, 12}, {DependencyKind::kAfterAny, 13}};
  s.image = "localhost/pytorch:24.05";
  s.mounts = {"/data/imagenet:/data:ro", "/scratch:/scratch"};
  return s;
}

Status decodeSpec(const std::string& text, JobSpec* out = nullptr) {
  return decode<JobSpec>(J(text), out);
}

TEST(ArraySpecTest, ParsesSlurmForms) {
  ArraySpec a = *parseArraySpec("0-31%4");
  EXPECT_EQ(a.count(), 32u);
  EXPECT_EQ(a.max_parallel, 4u);
  EXPECT_EQ(a.indices().front(), 0u);
  EXPECT_EQ(a.indices().back(), 31u);

  a = *parseArraySpec("1,3,5-7");
  EXPECT_EQ(a.indices(), (std::vector<uint32_t>{1, 3, 5, 6, 7}));
  EXPECT_EQ(a.max_parallel, 0u);

  a = *parseArraySpec("0-15:4");
  EXPECT_EQ(a.indices(), (std::vector<uint32_t>{0, 4, 8, 12}));
  a = *parseArraySpec("7");
  EXPECT_EQ(a.indices(), (std::vector<uint32_t>{7}));
  a = *parseArraySpec("0-999999:1000");
  EXPECT_EQ(a.count(), 1000u);
}

TEST(ArraySpecTest, FormatsCanonicallyAndRoundTrips) {
  for (const char* text : {"0-31%4", "1,3,5-7", "0-15:4", "7", "2-2:3", "0-9999", "5,1%1"}) {
    Result<ArraySpec> a = parseArraySpec(text);
    ASSERT_TRUE(a.ok()) << text << ": " << a.status().toString();
    EXPECT_EQ(*parseArraySpec(formatArraySpec(*a)), *a) << text;
  }
  EXPECT_EQ(formatArraySpec(*parseArraySpec("0-31%4")), "0-31%4");
  EXPECT_EQ(formatArraySpec(*parseArraySpec("1,3,5-7")), "1,3,5-7");
  EXPECT_EQ(formatArraySpec(*parseArraySpec("0-15:4")), "0-15:4");
}

TEST(ArraySpecTest, RejectsBadSpecs) {
  struct Case {
    const char* text;
    const char* needle;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"", "is empty"},
           {"0-31%0", "limits parallel elements to 0"},
           {"0-31%", "malformed limit"},
           {"0-31%x", "malformed limit"},
           {"5-1", "reversed range '5-1'"},
           {"1,,2", "empty element"},
           {"1,", "empty element"},
           {",1", "empty element"},
           {"0-10:0", "zero step"},
           {"0-10:x", "malformed step"},
           {"3:2", "step without a range"},
           {"a-b", "malformed range"},
           {"-1", "malformed range"},
           {"1-", "malformed range"},
           {"1.5", "malformed index"},
           {"0-1000000", "index above 999999"},
           {"99999999", "malformed index"},
           {"0-10000", "more than 10000 elements"},
           {"0-5000,5001-10001", "more than 10000 elements"},
           {"0-5,5", "lists index 5 twice"},
           {"0-10:2,4", "lists index 4 twice"},
       }) {
    Result<ArraySpec> r = parseArraySpec(c.text);
    EXPECT_TRUE(failsWith(r.status(), c.needle)) << "'" << c.text << "'";
  }
}

TEST(DependencyTest, ParsesAndFormatsSlurmSyntax) {
  auto deps = *parseDependencyList("afterok:12:13,afterany:14,afternotok:2");
  ASSERT_EQ(deps.size(), 4u);
  EXPECT_EQ(deps[0], (Dependency{DependencyKind::kAfterOk, 12}));
  EXPECT_EQ(deps[1], (Dependency{DependencyKind::kAfterOk, 13}));
  EXPECT_EQ(deps[2], (Dependency{DependencyKind::kAfterAny, 14}));
  EXPECT_EQ(deps[3], (Dependency{DependencyKind::kAfterNotOk, 2}));
  EXPECT_EQ(formatDependencyList(deps), "afterok:12,afterok:13,afterany:14,afternotok:2");
  EXPECT_EQ(*parseDependencyList(formatDependencyList(deps)), deps);
  for (const char* bad : {"", "afterok", "afterok:", "afterok:0", "afterok:x", "after:1",
                          "afterok:1,", "afterok:-3", "afterok:1:"}) {
    EXPECT_FALSE(parseDependencyList(bad).ok()) << bad;
  }
  EXPECT_TRUE(
      failsWith(parseDependencyList("before:1").status(), "unknown dependency kind 'before'"));
}

TEST(JobSpecJsonTest, RoundTrips) {
  EXPECT_TRUE(roundTrips(fullSpec()));
  JobSpec minimal;
  minimal.command = {"true"};
  EXPECT_TRUE(roundTrips(minimal));
  JobSpec interactive;
  interactive.interactive = true;
  interactive.resources.gpus_milli = 250;
  EXPECT_TRUE(roundTrips(interactive));
}

TEST(JobSpecJsonTest, WritesCanonicalForm) {
  json j = toJson(fullSpec());
  EXPECT_EQ(j.at("resources").at("gpus_milli"), 2000);
  EXPECT_EQ(j.at("resources").at("gpu_memory_mib"), 40 * 1024);
  EXPECT_EQ(j.at("resources").at("gpu_compute_milli"), 500);
  EXPECT_EQ(j.at("time_limit_seconds"), 2 * 86400);
  EXPECT_EQ(j.at("array"), "0-31%4");
  EXPECT_EQ(j.at("constraints").at("min_compute_capability"), "8.0");
  EXPECT_EQ(j.at("constraints").at("min_cuda"), "12.2");
  EXPECT_EQ(j.at("dependencies").at(0).at("kind"), "afterok");
  EXPECT_FALSE(toJson(JobSpec{}).contains("array"));
}

TEST(JobSpecJsonTest, ReadsShorthandSubmission) {
  JobSpec s;
  ASSERT_TRUE(decodeSpec(R"({"command":["python","x.py"],
      "resources":{"gpus":"0.25","gpu_memory":"10G","gpu_compute":"25%","cpus":"500m",
                   "ram":"16G"},
      "time_limit":"1-00:00:00","constraints":{"min_compute_capability":"7.5"}})",
                         &s)
                  .isOk());
  EXPECT_EQ(s.resources.gpus_milli, 250u);
  EXPECT_EQ(s.resources.gpu_memory_mib, 10u * 1024);
  EXPECT_EQ(s.resources.gpu_compute_milli, 250u);
  EXPECT_EQ(s.resources.cpus_milli, 500u);
  EXPECT_EQ(s.resources.ram_mib, 16u * 1024);
  EXPECT_EQ(s.time_limit_seconds, 86400);
  EXPECT_EQ(s.tasks, 1u);
  EXPECT_EQ(s.constraints.min_compute_capability, (ComputeCapability{7, 5}));
  // Numbers work where they read naturally.
  ASSERT_TRUE(decodeSpec(R"({"command":["x"],"resources":{"gpus":2,"cpus":0.5}})", &s).isOk());
  EXPECT_EQ(s.resources.gpus_milli, 2000u);
  EXPECT_EQ(s.resources.cpus_milli, 500u);
}

TEST(JobSpecJsonTest, RejectsMalformedInput) {
  struct Case {
    const char* json;
    const char* needle;
  };
  for (const Case& c : std::initializer_list<Case>{
           {R"({"command":["x"],"resources":{"gpu_memory":"24X","gpus":1}})",
            "job.resources.gpu_memory: memory size '24X' has unknown unit 'X'"},
           {R"({"command":[]})",
            "job.command: must not be empty (only interactive jobs may omit the command)"},
           {R"({})", "job.command: must not be empty"},
           {R"({"command":[""]})", "job.command[0]: the program name is empty"},
           {R"({"command":"python x.py"})", "job.command: expected an array, got a string"},
           {R"({"command":["x",1]})", "job.command[1]: expected a string, got an integer"},
           {R"({"command":["x"],"tasks":5000})", "job.tasks: is out of range [1, 4096]"},
           {R"({"command":["x"],"tasks":0})", "job.tasks: is out of range"},
           {R"({"command":["x"],"tasks":-2})", "job.tasks: is out of range"},
           {R"({"command":["x"],"tasks":"4"})", "job.tasks: expected an integer, got a string"},
           {R"({"command":["x"],"tasks":2,"nodes":3})", "job.nodes: is larger than tasks"},
           {R"({"command":["x"],"array":"5-1"})", "job.array: array spec '5-1' has a reversed"},
           {R"({"command":["x"],"array":7})", "job.array: expected a string"},
           {R"({"interactive":true,"array":"0-3"})",
            "job.array: interactive jobs cannot be arrays"},
           {R"({"command":["x"],"resources":{"gpu_memory":"10G"}})",
            "job.resources.gpu_memory: needs GPUs (gpus > 0)"},
           {R"({"command":["x"],"resources":{"gpu_compute":"50%"}})",
            "job.resources.gpu_compute: needs GPUs"},
           {R"({"command":["x"],"resources":{"gpus":"1.5"}})",
            "job.resources.gpus: GPU count '1.5' mixes whole GPUs and a fraction"},
           {R"({"command":["x"],"resources":{"gpus":5000}})", "job.resources.gpus"},
           {R"({"command":["x"],"resources":{"gpus":1,"gpu_compute":"150%"}})",
            "job.resources.gpu_compute: compute share '150%' is out of range"},
           {R"({"command":["x"],"resources":{"cpus":"-1"}})", "job.resources.cpus"},
           {R"({"command":["x"],"resources":{"cpus_milli":0}})",
            "job.resources.cpus_milli: must be > 0"},
           {R"({"command":["x"],"resources":{"ram":"99999T"}})", "job.resources.ram"},
           {R"({"command":["x"],"resources":{"gpu_mem":"1G"}})",
            "job.resources.gpu_mem: unknown field (did you mean 'gpu_memory'?)"},
           {R"({"command":["x"],"resources":[]})",
            "job.resources: expected an object, got an array"},
           {R"({"command":["x"],"time_limit":"25:99:00"})", "job.time_limit: duration"},
           {R"({"command":["x"],"time_limit":"400d"})", "job.time_limit: duration '400d'"},
           {R"({"command":["x"],"time_limit_seconds":-5})", "job.time_limit_seconds"},
           {R"({"command":["x"],"env":{"1BAD":"v"}})", "job.env.1BAD: is not a valid variable"},
           {R"({"command":["x"],"env":{"A=B":"v"}})", "job.env.A=B: is not a valid variable"},
           {R"({"command":["x"],"env":{"A":5}})", "job.env.A: expected a string"},
           {R"({"command":["x"],"working_dir":"rel/path"})",
            "job.working_dir: must be an absolute path"},
           {R"({"command":["x"],"image":"-v"})", "job.image: image '-v' may not start with '-'"},
           {R"({"command":["x"],"image":"a b"})", "job.image: image 'a b' has a character"},
           {R"({"command":["x"],"image":"/srv/../etc"})", "job.image: image '/srv/../etc'"},
           {R"({"command":["x"],"mounts":["/a:/b"]})", "job.mounts: need an image"},
           {R"({"command":["x"],"image":"i","mounts":["/a"]})",
            "job.mounts[0]: mount '/a': has no ':' between source and target"},
           {R"({"command":["x"],"image":"i","mounts":["a:/b"]})",
            "job.mounts[0]: mount 'a:/b': source is not an absolute path"},
           {R"({"command":["x"],"image":"i","mounts":["/a:/b:rx"]})",
            "job.mounts[0]: mount '/a:/b:rx': mode 'rx' is not ro or rw"},
           {R"({"command":["x"],"image":"i","mounts":["/a:/../b"]})",
            "job.mounts[0]: mount '/a:/../b': target contains '..'"},
           {R"({"command":["x"],"image":"i","mounts":["/a:/"]})",
            "job.mounts[0]: mount '/a:/': target may not be the container's root"},
           {R"({"command":["x"],"qos":"no spaces"})", "job.qos: is not a valid QoS name"},
           {R"({"command":["x"],"preemptible":"yes"})", "job.preemptible: expected a boolean"},
           {R"({"command":["x"],"constraints":{"min_compute_capability":"8"}})",
            "job.constraints.min_compute_capability: compute capability '8'"},
           {R"({"command":["x"],"constraints":{"min_cuda":"12"}})",
            "job.constraints.min_cuda: CUDA version '12' is not of the form major.minor"},
           {R"({"command":["x"],"constraints":{"min_cuda":"12.2.1"}})",
            "job.constraints.min_cuda: CUDA version '12.2.1'"},
           {R"({"command":["x"],"constraints":{"gpu_models":[""]}})",
            "job.constraints.gpu_models[0]: must have 1 to 256 characters"},
           {R"({"command":["x"],"constraints":{"node_labels":{"":"x"}}})",
            "job.constraints.node_labels: label key is empty"},
           {R"({"command":["x"],"constraints":{"gpu_model":["A100"]}})",
            "job.constraints.gpu_model: unknown field (did you mean 'gpu_models'?)"},
           {R"({"command":["x"],"dependencies":[{"kind":"afterok","job_id":0}]})",
            "job.dependencies[0].job_id: is out of range"},
           {R"({"command":["x"],"dependencies":[{"kind":"after","job_id":1}]})",
            "job.dependencies[0].kind: unknown dependency kind 'after'"},
           {R"({"command":["x"],"dependencies":[{"kind":"afterok","job_id":1},
                {"kind":"afterok","job_id":1}]})",
            "job.dependencies[1]: repeats afterok:1"},
           {R"({"command":["x"],"name":"a\nb"})", "job.name: contains a control character"},
           {R"({"command":["x"],"nme":"a"})", "job.nme: unknown field (did you mean 'name'?)"},
           {R"("just a string")", "job: expected an object, got a string"},
       }) {
    EXPECT_TRUE(failsWith(decodeSpec(c.json), c.needle)) << c.json;
  }
}

TEST(PerGpuNeedTest, FollowsTheDocumentedDefaults) {
  const uint64_t k80G = 80 * 1024;
  TaskResources r;
  r.gpus_milli = 0;
  EXPECT_EQ(perGpuNeed(r, k80G), (PerGpuNeed{0, 0, 0, false}));
  r.gpus_milli = 250;  // a quarter: memory and compute follow the fraction
  EXPECT_EQ(perGpuNeed(r, k80G), (PerGpuNeed{1, 20 * 1024, 250, false}));
  r.gpu_memory_mib = 10 * 1024;  // explicit memory, compute still the fraction
  EXPECT_EQ(perGpuNeed(r, k80G), (PerGpuNeed{1, 10 * 1024, 250, false}));
  r.gpu_compute_milli = 500;
  EXPECT_EQ(perGpuNeed(r, k80G), (PerGpuNeed{1, 10 * 1024, 500, false}));
  r = TaskResources{};
  r.gpus_milli = 2000;  // whole GPUs: exclusive
  EXPECT_EQ(perGpuNeed(r, k80G), (PerGpuNeed{2, k80G, 1000, true}));
  r.gpu_memory_mib = 40 * 1024;  // whole GPUs with a size: a slice on each
  EXPECT_EQ(perGpuNeed(r, k80G), (PerGpuNeed{2, 40 * 1024, 1000, false}));
  r.gpus_milli = 333;  // rounds down
  r.gpu_memory_mib = 0;
  EXPECT_EQ(perGpuNeed(r, 1000).memory_mib, 333u);
}

TEST(JobSpecValidateTest, ChecksSpecsBuiltInCode) {
  JobSpec s = fullSpec();
  EXPECT_TRUE(validateJobSpec(s).isOk());
  s.tasks = kMaxTasksPerJob + 1;
  EXPECT_TRUE(failsWith(validateJobSpec(s), "job.tasks: is out of range"));
  s = fullSpec();
  s.resources.gpus_milli = 1500;
  EXPECT_TRUE(failsWith(validateJobSpec(s), "job.resources.gpus"));
  s = fullSpec();
  s.array = ArraySpec{{{5, 1, 1}}, 0};
  EXPECT_TRUE(failsWith(validateJobSpec(s), "job.array"));
  s = fullSpec();
  s.command.push_back(std::string("a\0b", 3));
  EXPECT_TRUE(failsWith(validateJobSpec(s, "spec"), "spec.command[3]: contains a NUL"));
  s = fullSpec();
  s.dependencies.push_back({DependencyKind::kAfterAny, 0});
  EXPECT_TRUE(failsWith(validateJobSpec(s), "job.dependencies[2].job_id: must be > 0"));
}

}  // namespace
}  // namespace gpool::api::testing
