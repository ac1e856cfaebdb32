#include "cli/submit_options.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "common/units.h"

namespace gpool::cli {
namespace {

SubmitContext context() {
  SubmitContext c;
  c.cwd = "/home/alice/llm";
  c.getenv = [](const std::string& name) -> std::optional<std::string> {
    if (name == "WANDB_MODE") return "offline";
    return std::nullopt;
  };
  return c;
}

SubmitFlags commandLine(const std::vector<std::pair<std::string, std::string>>& flags) {
  SubmitFlags out;
  for (const auto& [name, value] : flags)
    out.add(name, FlagValue{value, "--" + name});
  return out;
}

TEST(SplitDirectiveWords, QuotesEscapesAndTrailingComments) {
  auto words = splitDirectiveWords(R"( --name "my job" --export 'A=b c' x\ y  # a comment)");
  ASSERT_TRUE(words.ok()) << words.status().toString();
  EXPECT_EQ(*words, (std::vector<std::string>{"--name", "my job", "--export", "A=b c", "x y"}));
  auto inner = splitDirectiveWords(R"(--name="a \"b\"" --time=1h#x)");
  ASSERT_TRUE(inner.ok());
  EXPECT_EQ(*inner, (std::vector<std::string>{"--name=a \"b\"", "--time=1h#x"}));
  EXPECT_EQ(splitDirectiveWords("--name 'open").status().message(), "unterminated ' quote");
  EXPECT_FALSE(splitDirectiveWords("--name \"open").ok());
}

TEST(ParseDirectives, ReadsDirectivesUntilTheFirstCommand) {
  const std::string script =
      "#!/bin/bash\n"
      "# a comment\n"
      "\n"
      "#GPOOL --gpus 2 --time=4h\n"
      "#GPOOL --export A=1\n"
      "#GPOOL --export B=2   # trailing comment\n"
      "#GPOOLX --gpus 8\n"
      " #GPOOL --cpus 3\n"
      "python train.py\n"
      "#GPOOL --mem 64G\n";
  auto flags = parseDirectives(script, "train.sh");
  ASSERT_TRUE(flags.ok()) << flags.status().toString();
  ASSERT_EQ(flags->values.count("gpus"), 1u);
  EXPECT_EQ(flags->values["gpus"][0].value, "2");
  EXPECT_EQ(flags->values["gpus"][0].where, "train.sh:4");
  EXPECT_EQ(flags->values["time"][0].value, "4h");
  ASSERT_EQ(flags->values["export"].size(), 2u);
  EXPECT_EQ(flags->values["export"][1].value, "B=2");
  EXPECT_EQ(flags->values["export"][1].where, "train.sh:6");
  // "#GPOOLX" and an indented "#GPOOL" are comments; a directive after the command is ignored.
  EXPECT_EQ(flags->values.count("cpus"), 0u);
  EXPECT_EQ(flags->values.count("mem"), 0u);
}

TEST(ParseDirectives, ErrorsNameTheLineAndTheFix) {
  EXPECT_EQ(parseDirectives("#!/bin/sh\n#GPOOL --gpu 2\n", "t.sh").status().message(),
            "t.sh:2: unknown flag '--gpu' (did you mean '--gpus'?)");
  EXPECT_EQ(parseDirectives("#GPOOL --frobnicate 2\n", "t.sh").status().message(),
            "t.sh:1: unknown flag '--frobnicate' (see gpool submit --help)");
  EXPECT_EQ(parseDirectives("#GPOOL --time\n", "t.sh").status().message(),
            "t.sh:1: --time needs a value (e.g. --time DURATION)");
  EXPECT_EQ(parseDirectives("#GPOOL gpus=2\n", "t.sh").status().message(),
            "t.sh:1: 'gpus=2' is not a flag (directives hold flags such as #GPOOL --gpus 2)");
  EXPECT_EQ(parseDirectives("#GPOOL --preemptible=yes\n", "t.sh").status().message(),
            "t.sh:1: --preemptible takes no value");
  EXPECT_EQ(parseDirectives("\n\n#GPOOL --name 'x\n", "t.sh").status().message(),
            "t.sh:3: unterminated ' quote");
}

TEST(BuildSubmitPlan, EveryFlagLandsInTheSpec) {
  SubmitFlags flags = commandLine({{"gpus", "2"},           {"gpu-mem", "20G"},
                                   {"gpu-compute", "30%"},  {"gpu-model", "A100,H100"},
                                   {"min-cc", "8.0"},       {"min-cuda", "12.2"},
                                   {"time", "1-00:00:00"},  {"cpus", "8"},
                                   {"mem", "64G"},          {"tasks", "4"},
                                   {"nodes", "2"},          {"qos", "high"},
                                   {"preemptible", "true"}, {"after", "12,13"},
                                   {"after-any", "14"},     {"dependency", "afternotok:15"},
                                   {"name", "train"},       {"group", "vision"},
                                   {"workdir", "data"},     {"export", "A=1"},
                                   {"export", "WANDB_MODE"}});
  auto plan = buildSubmitPlan(flags, {"python", "train.py"}, context());
  ASSERT_TRUE(plan.ok()) << plan.status().toString();
  const api::JobSpec& s = plan->spec;
  EXPECT_EQ(s.resources.gpus_milli, 2000u);
  EXPECT_EQ(s.resources.gpu_memory_mib, 20u * 1024);
  EXPECT_EQ(s.resources.gpu_compute_milli, 300u);
  EXPECT_EQ(s.resources.cpus_milli, 8000u);
  EXPECT_EQ(s.resources.ram_mib, 64u * 1024);
  EXPECT_EQ(s.constraints.gpu_models, (std::vector<std::string>{"A100", "H100"}));
  ASSERT_TRUE(s.constraints.min_compute_capability.has_value());
  EXPECT_EQ(s.constraints.min_compute_capability->major, 8u);
  EXPECT_EQ(s.constraints.min_cuda, (api::CudaVersion{12, 2}));
  EXPECT_EQ(s.time_limit_seconds, 86400);
  EXPECT_EQ(s.tasks, 4u);
  EXPECT_EQ(s.nodes, 2u);
  EXPECT_EQ(s.qos, "high");
  EXPECT_TRUE(s.preemptible);
  ASSERT_EQ(s.dependencies.size(), 4u);
  EXPECT_EQ(api::formatDependencyList(s.dependencies),
            "afterok:12,afterok:13,afterany:14,afternotok:15");
  EXPECT_EQ(s.name, "train");
  EXPECT_EQ(plan->group, "vision");
  EXPECT_EQ(s.working_dir, "/home/alice/llm/data");
  EXPECT_EQ(s.env, (std::map<std::string, std::string>{{"A", "1"}, {"WANDB_MODE", "offline"}}));
  EXPECT_EQ(s.command, (std::vector<std::string>{"python", "train.py"}));
}

TEST(BuildSubmitPlan, DefaultsAndArrays) {
  auto plan = buildSubmitPlan(commandLine({{"gpus", "0.25"}, {"array", "0-99%8"}}),
                              {"/usr/bin/env", "true"}, context());
  ASSERT_TRUE(plan.ok()) << plan.status().toString();
  EXPECT_EQ(plan->spec.resources.gpus_milli, 250u);
  EXPECT_EQ(plan->spec.name, "env");
  EXPECT_EQ(plan->spec.working_dir, "/home/alice/llm");
  ASSERT_TRUE(plan->spec.array.has_value());
  EXPECT_EQ(plan->spec.array->count(), 100u);
  EXPECT_EQ(plan->spec.array->max_parallel, 8u);
  EXPECT_FALSE(plan->spec.preemptible);
}

TEST(BuildSubmitPlan, CommandLineWinsOverDirectives) {
  auto directives = parseDirectives("#GPOOL --gpus 2 --time 4h --export A=1\n", "t.sh");
  ASSERT_TRUE(directives.ok());
  SubmitFlags flags = *directives;
  flags.overrideWith(commandLine({{"gpus", "1"}, {"export", "B=2"}}));
  SubmitContext c = context();
  c.default_name = "t.sh";
  auto plan = buildSubmitPlan(flags, {"/bin/sh", "/x/t.sh"}, c);
  ASSERT_TRUE(plan.ok()) << plan.status().toString();
  EXPECT_EQ(plan->spec.resources.gpus_milli, 1000u);
  EXPECT_EQ(plan->spec.time_limit_seconds, 4 * 3600);
  EXPECT_EQ(plan->spec.env, (std::map<std::string, std::string>{{"B", "2"}}));
  EXPECT_EQ(plan->spec.name, "t.sh");
}

TEST(BuildSubmitPlan, ErrorsNameTheFlagOrTheLine) {
  auto run = [](const SubmitFlags& flags) {
    return buildSubmitPlan(flags, {"true"}, context()).status();
  };
  Status gpus = run(commandLine({{"gpus", "1.5"}}));
  EXPECT_EQ(gpus.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(gpus.message().rfind("--gpus: ", 0), 0u) << gpus.message();
  auto directives = parseDirectives("\n#GPOOL --time soon\n", "job.sh");
  ASSERT_TRUE(directives.ok());
  Status time = run(*directives);
  EXPECT_EQ(time.message().rfind("job.sh:2: --time: duration 'soon'", 0), 0u) << time.message();
  EXPECT_EQ(run(commandLine({{"after", "12,x"}})).message(),
            "--after: 'x' is not a job id (a positive integer such as 42)");
  EXPECT_EQ(run(commandLine({{"tasks", "0"}})).message(),
            "--tasks: '0' is not a count in [1, 4096] (e.g. --tasks 2)");
  EXPECT_EQ(run(commandLine({{"export", "NOPE"}})).message(),
            "--export: NOPE is not set in your environment (give a value: --export NOPE=...)");
  EXPECT_NE(run(commandLine({{"min-cc", "eight"}})).message().find("--min-cc: "),
            std::string::npos);
  EXPECT_NE(run(commandLine({{"min-cuda", "twelve"}})).message().find("--min-cuda: "),
            std::string::npos);
  EXPECT_NE(run(commandLine({{"array", "5-1"}})).message().find("--array: "), std::string::npos);
  // Rules across fields come from api::validateJobSpec.
  Status gpu_mem = run(commandLine({{"gpu-mem", "20G"}}));
  EXPECT_NE(gpu_mem.message().find("job.resources.gpu_memory"), std::string::npos)
      << gpu_mem.message();
  EXPECT_NE(buildSubmitPlan({}, {}, context()).status().message().find("nothing to run"),
            std::string::npos);
}

TEST(ScriptCommand, UsesTheShebangInterpreter) {
  EXPECT_EQ(scriptCommand("#!/bin/bash\necho\n", "/x/a.sh", {"1"}),
            (std::vector<std::string>{"/bin/bash", "/x/a.sh", "1"}));
  EXPECT_EQ(scriptCommand("#! /usr/bin/env python3 -u\n", "/x/a.py", {}),
            (std::vector<std::string>{"/usr/bin/env", "python3 -u", "/x/a.py"}));
  EXPECT_EQ(scriptCommand("echo hi\n", "/x/a", {}), (std::vector<std::string>{"/bin/sh", "/x/a"}));
}

}  // namespace
}  // namespace gpool::cli
