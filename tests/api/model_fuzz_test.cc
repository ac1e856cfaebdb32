// Seeded property tests: random valid values round-trip exactly, random walks through the job
// state table keep jobs consistent, and random mutations of valid JSON never crash the
// decoders (under ASan/UBSan this also checks for undefined behaviour).

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "api/allocation.h"
#include "api/job.h"
#include "api/node.h"
#include "api/user.h"
#include "common/random.h"
#include "common/units.h"
#include "test_util.h"

namespace gpool::api::testing {
namespace {

using nlohmann::json;

// Fewer iterations in sanitizer builds (Debug + ASan is ~20x slower), where ctest sets
// GPOOL_SANITIZED=1; the release run keeps the full count.
const int kIterations = [] {
  const char* sanitized = std::getenv("GPOOL_SANITIZED");
  return sanitized != nullptr && std::string(sanitized) == "1" ? 50 : 300;
}();

std::string randomName(Random& rng, size_t min_len = 1, size_t max_len = 12) {
  static constexpr std::string_view kChars = "abcdefghijklmnopqrstuvwxyz0123456789-_.";
  size_t len = min_len + rng.uniform(max_len - min_len + 1);
  std::string s;
  // Letters first, so names never start with '-'.
  s += static_cast<char>('a' + rng.uniform(26));
  while (s.size() < len)
    s += kChars[rng.uniform(kChars.size())];
  return s;
}

// Any bytes, including quotes, control characters and non-ASCII UTF-8.
std::string randomText(Random& rng) {
  static const std::vector<std::string> kPieces = {"a", "Z",    " ", "\"", "\\", "\t",
                                                   "é", "日本", "/", "%",  "{",  "\x01"};
  std::string s;
  size_t n = rng.uniform(6);
  for (size_t i = 0; i < n; ++i)
    s += kPieces[rng.uniform(kPieces.size())];
  return s;
}

bool coin(Random& rng) {
  return rng.uniform(2) == 0;
}

JobSpec randomSpec(Random& rng) {
  JobSpec s;
  s.name = coin(rng) ? randomName(rng) : "";
  s.interactive = rng.uniform(5) == 0;
  if (!s.interactive || coin(rng)) {
    size_t n = 1 + rng.uniform(4);
    for (size_t i = 0; i < n; ++i)
      s.command.push_back(i == 0 ? randomName(rng) : randomText(rng));
  }
  for (size_t i = rng.uniform(3); i > 0; --i)
    s.env["V" + std::to_string(rng.uniform(100))] = randomText(rng);
  if (coin(rng)) s.working_dir = "/home/" + randomName(rng);
  switch (rng.uniform(3)) {
    case 0: s.resources.gpus_milli = 0; break;
    case 1: s.resources.gpus_milli = static_cast<uint32_t>(1 + rng.uniform(999)); break;
    default: s.resources.gpus_milli = static_cast<uint32_t>(1000 * (1 + rng.uniform(8)));
  }
  if (s.resources.gpus_milli > 0 && coin(rng))
    s.resources.gpu_memory_mib = 1 + rng.uniform(1 << 17);
  if (s.resources.gpus_milli > 0 && coin(rng)) {
    s.resources.gpu_compute_milli = static_cast<uint32_t>(1 + rng.uniform(1000));
  }
  s.resources.cpus_milli = 1 + rng.uniform(256'000);
  s.resources.ram_mib = rng.uniform(1 << 20);
  s.tasks = static_cast<uint32_t>(1 + rng.uniform(64));
  s.nodes = static_cast<uint32_t>(rng.uniform(s.tasks + 1));
  if (coin(rng)) s.constraints.gpu_models = {randomName(rng), randomText(rng) + "x"};
  if (coin(rng)) {
    s.constraints.min_compute_capability = ComputeCapability{
        static_cast<uint32_t>(1 + rng.uniform(12)), static_cast<uint32_t>(rng.uniform(10))};
  }
  s.constraints.min_gpu_memory_mib = rng.uniform(1 << 17);
  if (coin(rng)) s.constraints.node_labels[randomName(rng)] = randomText(rng);
  if (coin(rng)) s.constraints.datasets = {randomName(rng)};
  s.time_limit_seconds =
      static_cast<int64_t>(rng.uniform(static_cast<uint64_t>(kMaxDurationSeconds) + 1));
  s.qos = coin(rng) ? randomName(rng) : "";
  s.preemptible = coin(rng);
  if (!s.interactive && coin(rng)) {
    uint32_t first = static_cast<uint32_t>(rng.uniform(1000));
    uint32_t last = first + static_cast<uint32_t>(rng.uniform(500));
    uint32_t step = static_cast<uint32_t>(1 + rng.uniform(3));
    s.array = ArraySpec{{{first, last, step}}, static_cast<uint32_t>(rng.uniform(5))};
  }
  for (size_t i = rng.uniform(3); i > 0; --i) {
    Dependency d{static_cast<DependencyKind>(rng.uniform(3)), 1 + rng.uniform(1000)};
    if (std::find(s.dependencies.begin(), s.dependencies.end(), d) == s.dependencies.end()) {
      s.dependencies.push_back(d);
    }
  }
  return s;
}

Node randomNode(Random& rng) {
  Node n;
  n.name = randomName(rng);
  n.cpus_milli = 1 + rng.uniform(512'000);
  n.ram_mib = rng.uniform(1 << 22);
  n.state = static_cast<NodeState>(rng.uniform(6));
  n.state_reason = randomText(rng);
  size_t gpus = rng.uniform(9);
  for (size_t i = 0; i < gpus; ++i) {
    Gpu g;
    g.uuid = "GPU-" + std::to_string(i) + "-" + randomName(rng);
    g.index = static_cast<uint32_t>(i);
    g.model = "NVIDIA " + randomName(rng);
    g.memory_mib = 1 + rng.uniform(1 << 18);
    g.compute_capability = {static_cast<uint32_t>(1 + rng.uniform(12)),
                            static_cast<uint32_t>(rng.uniform(10))};
    g.mig_mode = static_cast<MigMode>(rng.uniform(3));
    g.health = static_cast<GpuHealth>(rng.uniform(3));
    g.simulated = coin(rng);
    n.gpus.push_back(g);
  }
  for (size_t i = 0; i < gpus; ++i) {
    for (size_t k = 0; k < gpus; ++k) {
      if (i != k && coin(rng)) {
        n.gpus[i].links.push_back({n.gpus[k].uuid, static_cast<uint32_t>(rng.uniform(19)),
                                   static_cast<PcieLevel>(rng.uniform(5))});
      }
    }
  }
  if (coin(rng)) n.last_seen = fromUnixMicros(static_cast<int64_t>(rng.uniform(1ull << 52)));
  return n;
}

// A job driven through the transition table by random legal steps.
Job randomJob(Random& rng) {
  Job j;
  j.id = 1 + rng.uniform(1'000'000);
  j.spec = randomSpec(rng);
  j.user = randomName(rng);
  j.uid = static_cast<uint32_t>(1000 + rng.uniform(60000));
  j.submit_time = fromUnixSeconds(1'700'000'000);
  TimePoint now = j.submit_time;
  const size_t steps = rng.uniform(6);
  for (size_t i = 0; i < steps; ++i) {
    std::vector<JobState> next;
    for (int to = 0; to < 10; ++to) {
      if (checkJobTransition(j.state, static_cast<JobState>(to)).isOk()) {
        next.push_back(static_cast<JobState>(to));
      }
    }
    if (next.empty()) break;
    now += Micros(rng.uniform(10'000'000));
    JobState to = next[rng.uniform(next.size())];
    EXPECT_TRUE(applyJobTransition(&j, to, now, randomText(rng)).isOk());
    if (to == JobState::kRunning) {
      for (uint32_t t = 0; t < j.spec.tasks && t < 4; ++t) {
        j.allocations.push_back({t,
                                 randomName(rng),
                                 {{"GPU-" + std::to_string(t), 1024, 500, false}},
                                 1000,
                                 1024,
                                 {},
                                 {},
                                 {}});
      }
    }
    if (isFinished(to) && coin(rng)) j.exit_code = static_cast<int32_t>(rng.uniform(256)) - 128;
  }
  if (coin(rng)) {
    j.array_job_id = j.id;
    j.array_index = static_cast<uint32_t>(rng.uniform(kMaxArrayIndex + 1));
  }
  j.group = coin(rng) ? randomName(rng) : "";
  return j;
}

TEST(ModelPropertyTest, RandomValidValuesRoundTrip) {
  SeededRandom rng(20261202);
  for (int i = 0; i < kIterations; ++i) {
    JobSpec spec = randomSpec(rng);
    ASSERT_TRUE(validateJobSpec(spec).isOk()) << validateJobSpec(spec).toString();
    ASSERT_TRUE(roundTrips(spec)) << "iteration " << i;
    ASSERT_TRUE(roundTrips(randomNode(rng))) << "iteration " << i;
    ASSERT_TRUE(roundTrips(randomJob(rng))) << "iteration " << i;
  }
}

// Replaces one value somewhere in `j` (chosen by `rng`) by a hostile one, deletes it, or adds
// an unknown key.
void mutate(json& j, Random& rng) {
  std::vector<json*> nodes;
  std::vector<json*> stack = {&j};
  while (!stack.empty()) {
    json* n = stack.back();
    stack.pop_back();
    nodes.push_back(n);
    if (n->is_object() || n->is_array()) {
      for (auto& child : *n)
        stack.push_back(&child);
    }
  }
  json* target = nodes[rng.uniform(nodes.size())];
  static const std::vector<json> kHostile = {json(nullptr),
                                             json(-1),
                                             json(0),
                                             json(int64_t{9'223'372'036'854'775'807}),
                                             json(18'446'744'073'709'551'615ull),
                                             json(1e300),
                                             json(-0.5),
                                             json("24X"),
                                             json(""),
                                             json("-5"),
                                             json("0-31%0"),
                                             json(true),
                                             json::array(),
                                             json::object(),
                                             json::array({1, "x"}),
                                             json("\xff")};
  switch (rng.uniform(3)) {
    case 0: *target = kHostile[rng.uniform(kHostile.size())]; break;
    case 1:
      if (target->is_object() && !target->empty()) {
        auto it = target->begin();
        std::advance(it, static_cast<long>(rng.uniform(target->size())));
        target->erase(it.key());
      }
      break;
    default:
      if (target->is_object()) (*target)["unexpected_" + std::to_string(rng.uniform(9))] = 1;
  }
}

template <typename T>
void checkMutations(const json& valid, Random& rng, int* accepted, int* rejected) {
  json j = valid;
  const size_t mutations = 1 + rng.uniform(3);
  for (size_t m = 0; m < mutations; ++m)
    mutate(j, rng);
  T value{};
  Status s = fromJson(j, &value);
  if (s.isOk()) {
    ++*accepted;
    // Whatever is accepted must be representable and stable.
    EXPECT_TRUE(roundTrips(value)) << dumpJson(j);
  } else {
    ++*rejected;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_FALSE(s.message().empty());
  }
}

TEST(ModelPropertyTest, MutatedJsonIsRejectedCleanlyOrRoundTrips) {
  SeededRandom rng(7);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < kIterations; ++i) {
    checkMutations<JobSpec>(toJson(randomSpec(rng)), rng, &accepted, &rejected);
    checkMutations<Node>(toJson(randomNode(rng)), rng, &accepted, &rejected);
    checkMutations<Job>(toJson(randomJob(rng)), rng, &accepted, &rejected);
  }
  // Both outcomes occur, so the mutations reach the validators and the happy path alike.
  EXPECT_GT(rejected, kIterations);
  EXPECT_GT(accepted, 0);
}

TEST(ModelPropertyTest, RandomTextNeverCrashesTheParser) {
  SeededRandom rng(99);
  static constexpr std::string_view kAlphabet = "{}[]\":,0123456789.-eE truefalsnul\\u\xff";
  for (int i = 0; i < kIterations * 3; ++i) {
    std::string text;
    size_t len = rng.uniform(40);
    for (size_t k = 0; k < len; ++k)
      text += kAlphabet[rng.uniform(kAlphabet.size())];
    Result<json> parsed = parseJsonText(text, "input");
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
      continue;
    }
    JobSpec spec;
    Status s = fromJson(*parsed, &spec);
    if (s.isOk()) {
      EXPECT_TRUE(roundTrips(spec));
    }
  }
}

}  // namespace
}  // namespace gpool::api::testing
