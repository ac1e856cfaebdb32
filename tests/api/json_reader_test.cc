#include "api/json_reader.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "test_util.h"

namespace gpool::api::testing {
namespace {

using nlohmann::json;

struct Inner {
  int32_t level = 0;
  bool operator==(const Inner&) const = default;
};

Status fromJson(const json& j, Inner* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("level", &out->level, Presence::kRequired, -5, 5);
  return r.finish();
}

struct Sample {
  std::string name;
  uint32_t count = 7;
  bool flag = false;
  std::vector<std::string> tags;
  std::map<std::string, std::string> labels;
  uint64_t memory_mib = 0;
  uint32_t gpus_milli = 0;
  int64_t limit_seconds = 0;
  std::optional<TimePoint> when;
  std::optional<Inner> inner;
  std::vector<Inner> inners;
};

Status fromJson(const json& j, Sample* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("name", &out->name, Presence::kRequired);
  r.integer("count", &out->count, Presence::kOptional, 1u, 100u);
  r.boolean("flag", &out->flag);
  r.stringList("tags", &out->tags);
  r.stringMap("labels", &out->labels);
  r.quantity("memory", Quantity::kMemoryMiB, &out->memory_mib);
  r.quantity("gpus", Quantity::kGpuCount, &out->gpus_milli, Presence::kOptional, true);
  r.quantity("limit", Quantity::kDuration, &out->limit_seconds);
  r.optionalTime("when_us", &out->when);
  r.optionalObject("inner", &out->inner);
  r.objectList("inners", &out->inners, Presence::kOptional, 3);
  return r.finish();
}

Status parseSample(const std::string& text, Sample* out = nullptr) {
  Sample s;
  Status st = fromJson(J(text), &s, "sample");
  if (out != nullptr) *out = s;
  return st;
}

TEST(ParseJsonTextTest, RejectsSyntaxErrorsAndDuplicateKeys) {
  EXPECT_TRUE(failsWith(parseJsonText("{", "body").status(), "body is not valid JSON"));
  EXPECT_TRUE(failsWith(parseJsonText("", "body").status(), "not valid JSON"));
  EXPECT_TRUE(
      failsWith(parseJsonText("{\"a\":1,\"a\":2}", "body").status(), "has the key 'a' twice"));
  EXPECT_TRUE(failsWith(parseJsonText("{\"x\":{\"a\":1,\"b\":{\"a\":3},\"a\":2}}", "body").status(),
                        "'a' twice"));
  // The same key in sibling objects is fine.
  EXPECT_TRUE(parseJsonText("[{\"a\":1},{\"a\":2}]", "body").ok());
  // Invalid UTF-8 is a syntax error, not an exception.
  EXPECT_TRUE(failsWith(parseJsonText("\"\xff\xfe\"", "body").status(), "not valid JSON"));
}

// nlohmann stops reading at a NUL byte, so "{...}\0anything" parsed as the object (found by
// tests/fuzz json_models: isJsonObjectText and nlohmann disagreed). JSON has no NUL byte.
TEST(ParseJsonTextTest, RejectsNulBytes) {
  using namespace std::string_literals;
  for (const std::string& text : {"{\"a\":1}\0{\"junk\""s, "\0"s, "{\"a\":\"x\0y\"}"s}) {
    EXPECT_TRUE(
        failsWith(parseJsonText(text, "body").status(), "body is not valid JSON: a NUL byte"))
        << text.size();
    EXPECT_FALSE(isJsonObjectText(text)) << text.size();
  }
  EXPECT_TRUE(failsWith(parseJsonText("{\"a\":1}\0"s, "body").status(), "at offset 7"));
  EXPECT_TRUE(parseJsonText("{\"a\":\"x\\u0000y\"}", "body").ok());  // escaped: fine
}

TEST(ParseJsonTextTest, DumpNeverThrowsOnInvalidUtf8) {
  json j = std::string("bad \xff byte");
  EXPECT_NE(dumpJson(j).find("bad"), std::string::npos);
}

// appendJsonString is the job list's fast path for dumpJson(json(s)): the same bytes for every
// single byte, escapes beside plain text, valid and invalid UTF-8.
TEST(AppendJsonStringTest, WritesWhatDumpJsonWrites) {
  std::vector<std::string> cases = {"",
                                    "alice",
                                    "a\"b\\c/d",
                                    "tab\there\nline\r\b\f\x01\x1f\x7f",
                                    "caf\xc3\xa9",
                                    "bad \xff\xfe utf-8",
                                    "\xe2\x82"};
  for (int byte = 0; byte < 256; ++byte)
    cases.push_back(std::string(1, static_cast<char>(byte)) + "x");
  for (const std::string& text : cases) {
    std::string out = "prefix:";
    appendJsonString(out, text);
    EXPECT_EQ(out, "prefix:" + dumpJson(json(text))) << "text of " << text.size() << " bytes";
  }
}

TEST(ObjectReaderTest, ReadsAllFieldKinds) {
  Sample s;
  ASSERT_TRUE(parseSample(R"({"name":"a","count":5,"flag":true,"tags":["x","y"],
      "labels":{"k":"v"},"memory":"24G","gpus":0.25,"limit":"1h30m","when_us":5,
      "inner":{"level":-2},"inners":[{"level":1},{"level":2}]})",
                          &s)
                  .isOk());
  EXPECT_EQ(s.name, "a");
  EXPECT_EQ(s.count, 5u);
  EXPECT_TRUE(s.flag);
  EXPECT_EQ(s.tags, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(s.labels.at("k"), "v");
  EXPECT_EQ(s.memory_mib, 24u * 1024);
  EXPECT_EQ(s.gpus_milli, 250u);
  EXPECT_EQ(s.limit_seconds, 5400);
  ASSERT_TRUE(s.when.has_value());
  EXPECT_EQ(toUnixMicros(*s.when), 5);
  ASSERT_TRUE(s.inner.has_value());
  EXPECT_EQ(s.inner->level, -2);
  ASSERT_EQ(s.inners.size(), 2u);
  EXPECT_EQ(s.inners[1].level, 2);
}

TEST(ObjectReaderTest, MissingOptionalFieldsKeepDefaultsAndNullIsMissing) {
  Sample s;
  ASSERT_TRUE(parseSample(R"({"name":"a","count":null,"inner":null})", &s).isOk());
  EXPECT_EQ(s.count, 7u);
  EXPECT_FALSE(s.inner.has_value());
  EXPECT_TRUE(failsWith(parseSample(R"({"count":3})"), "sample.name: required field is missing"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":null})"), "sample.name: required field"));
}

TEST(ObjectReaderTest, RejectsWrongTypes) {
  EXPECT_TRUE(failsWith(parseSample(R"([])"), "sample: expected an object, got an array"));
  EXPECT_TRUE(
      failsWith(parseSample(R"({"name":5})"), "sample.name: expected a string, got an integer"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","count":"5"})"),
                        "sample.count: expected an integer, got a string"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","count":2.5})"),
                        "expected an integer, got a number with a fraction"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","flag":1})"),
                        "sample.flag: expected a boolean, got an integer"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","tags":"x"})"),
                        "sample.tags: expected an array, got a string"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","tags":["x",3]})"),
                        "sample.tags[1]: expected a string, got an integer"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","labels":{"k":1}})"),
                        "sample.labels.k: expected a string"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","inner":{"level":"x"}})"),
                        "sample.inner.level: expected an integer"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","inners":[{"level":1},{}]})"),
                        "sample.inners[1].level: required field is missing"));
}

TEST(ObjectReaderTest, RejectsOutOfRangeNegativeAndHugeNumbers) {
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","count":0})"),
                        "sample.count: is out of range [1, 100]"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","count":-1})"), "out of range"));
  EXPECT_TRUE(
      failsWith(parseSample(R"({"name":"a","count":18446744073709551615})"), "out of range"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","count":1e300})"), "out of range"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","inner":{"level":6}})"),
                        "sample.inner.level: is out of range [-5, 5]"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","when_us":-1})"), "sample.when_us"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","inners":[{"level":1},{"level":1},
      {"level":1},{"level":1}]})"),
                        "sample.inners: has 4 elements; at most 3"));
}

TEST(ObjectReaderTest, RejectsInvalidUtf8InValuesBuiltInCode) {
  Sample s;
  json j = {{"name", "ok \xc3\xa9"}};
  EXPECT_TRUE(fromJson(j, &s, "sample").isOk());
  j["name"] = "bad \xff";
  EXPECT_TRUE(failsWith(fromJson(j, &s, "sample"), "sample.name: is not valid UTF-8"));
  j = {{"name", "a"}, {"tags", {"x", "\xed\xa0\x80"}}};
  EXPECT_TRUE(failsWith(fromJson(j, &s, "sample"), "sample.tags[1]: is not valid UTF-8"));
  j = {{"name", "a"}, {"labels", {{"k", "\xc0\xaf"}}}};
  EXPECT_TRUE(failsWith(fromJson(j, &s, "sample"), "sample.labels.k: is not valid UTF-8"));
}

TEST(ObjectReaderTest, UnknownFieldsAreNamedWithHints) {
  Status s = parseSample(R"({"name":"a","cuont":3})");
  EXPECT_TRUE(failsWith(s, "sample.cuont: unknown field (did you mean 'count'?)"));
  s = parseSample(R"({"name":"a","zzzzzzzz":3,"other":1})");
  EXPECT_TRUE(failsWith(s, "sample.other: unknown field; also unknown: 'zzzzzzzz'"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","inner":{"level":1,"x":2}})"),
                        "sample.inner.x: unknown field"));
}

TEST(ObjectReaderTest, QuantitiesAcceptShorthandOrCanonicalButNotBoth) {
  Sample s;
  ASSERT_TRUE(parseSample(R"({"name":"a","memory_mib":512,"gpus_milli":2000,
      "limit_seconds":60})",
                          &s)
                  .isOk());
  EXPECT_EQ(s.memory_mib, 512u);
  EXPECT_EQ(s.gpus_milli, 2000u);
  EXPECT_EQ(s.limit_seconds, 60);
  ASSERT_TRUE(parseSample(R"({"name":"a","gpus":"0"})", &s).isOk());
  EXPECT_EQ(s.gpus_milli, 0u);
  ASSERT_TRUE(parseSample(R"({"name":"a","gpus":2})", &s).isOk());
  EXPECT_EQ(s.gpus_milli, 2000u);
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","memory":"1G","memory_mib":1024})"),
                        "sample.memory: give either 'memory' or 'memory_mib', not both"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","memory":"24X"})"),
                        "sample.memory: memory size '24X' has unknown unit 'X'"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","memory":24})"),
                        "sample.memory: expected a string with a unit"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","memory_mib":"24G"})"),
                        "sample.memory_mib: expected an integer, got a string"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","memory_mib":-5})"), "sample.memory_mib"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","memory_mib":2000000000})"),
                        "sample.memory_mib: is too large"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","gpus":1.5})"), "mixes whole GPUs"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","gpus_milli":1500})"),
                        "sample.gpus_milli: mixes whole GPUs"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","gpus":-1})"), "sample.gpus"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","limit":90})"),
                        "sample.limit: expected a string such as \"90m\""));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","limit":"5q"})"), "unknown unit 'q'"));
  EXPECT_TRUE(failsWith(parseSample(R"({"name":"a","limit_seconds":99999999999})"),
                        "sample.limit_seconds: is too long"));
}

TEST(ObjectReaderTest, CanonicalKeyAndPutQuantityAgree) {
  EXPECT_EQ(canonicalKey("gpu_memory", Quantity::kMemoryMiB), "gpu_memory_mib");
  EXPECT_EQ(canonicalKey("cpus", Quantity::kCpuMillis), "cpus_milli");
  EXPECT_EQ(canonicalKey("time_limit", Quantity::kDuration), "time_limit_seconds");
  json j = json::object();
  putQuantity(j, "gpus", Quantity::kGpuCount, 250);
  EXPECT_EQ(j.at("gpus_milli"), 250);
}

TEST(ObjectReaderTest, EnumNamesAreCaseInsensitiveAndListChoices) {
  enum class Color { kRed, kBlue };
  constexpr std::array<std::pair<Color, std::string_view>, 2> kColors{
      {{Color::kRed, "red"}, {Color::kBlue, "blue"}}};
  EXPECT_EQ(*parseEnumName("RED", kColors, "color"), Color::kRed);
  EXPECT_EQ(enumName(Color::kBlue, kColors), "blue");
  EXPECT_TRUE(failsWith(parseEnumName("green", kColors, "color").status(),
                        "unknown color 'green' (expected one of red, blue)"));
}

}  // namespace
}  // namespace gpool::api::testing
