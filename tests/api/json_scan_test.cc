// isJsonObjectText against nlohmann::json::accept, the parser whose verdict it stands in for:
// on hand-written edge cases and on many random mutations of real documents, the two must agree
// (for text whose first token is an object).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/job_spec.h"
#include "api/json_reader.h"
#include "common/random.h"

namespace gpool::api::testing {
namespace {

// What isJsonObjectText must say: nlohmann accepts it and it is an object.
bool reference(const std::string& text) {
  if (!nlohmann::json::accept(text)) return false;
  auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_object();
}

TEST(JsonScanTest, AgreesWithNlohmannOnEdgeCases) {
  const std::vector<std::string> cases = {
      "{}", " {} ", "\t{\n}\r\n", "{", "}", "", " ", "[]", "[{}]", "1", "\"x\"", "null", "{} {}",
      "{}x", "{,}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{\"a\":1 \"b\":2}",
      "{\"a\":1,\"b\":[1,2,{\"c\":null}],\"d\":{\"e\":[[],{}]}}", "{a:1}", "{'a':1}",
      "{\"a\":[1,]}", "{\"a\":[,1]}", "{\"a\":[1 2]}", "{\"a\":]}", "{\"a\":[}", "{\"a\":[1}",
      // numbers
      "{\"n\":0}", "{\"n\":-0}", "{\"n\":01}", "{\"n\":-}", "{\"n\":1.}", "{\"n\":.5}",
      "{\"n\":1.5e10}", "{\"n\":1E+2}", "{\"n\":1e-2}", "{\"n\":1e}", "{\"n\":1e+}", "{\"n\":+1}",
      "{\"n\":123456789012345678901234567890}", "{\"n\":-12.5E-3}", "{\"n\":0x10}", "{\"n\":NaN}",
      "{\"n\":Infinity}", "{\"n\":1e400}", "{\"n\":-1E+400}", "{\"n\":1e-400}", "{\"n\":1.7e308}",
      "{\"n\":" + std::string(400, '9') + "}", "{\"n\":0." + std::string(400, '9') + "}",
      // literals
      "{\"t\":true,\"f\":false,\"z\":null}", "{\"t\":tru}", "{\"t\":True}", "{\"z\":nul}",
      "{\"t\":truex}",
      // strings and escapes
      "{\"s\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"}", "{\"s\":\"\\x\"}", "{\"s\":\"\\u00e9\"}",
      "{\"s\":\"\\u00G9\"}", "{\"s\":\"\\u00e\"}", "{\"s\":\"\\ud83d\\ude80\"}",
      "{\"s\":\"\\ud83d\"}", "{\"s\":\"\\ude80\"}", "{\"s\":\"\\ud83d\\u0041\"}",
      "{\"s\":\"\\ud83dx\"}", "{\"s\":\"tab\there\"}", std::string("{\"s\":\"nul\0\"}", 11),
      "{\"s\":\"unterminated}", "{\"s\":\"\\\"}",
      // UTF-8
      "{\"s\":\"\xC3\xA9t\xC3\xA9\"}", "{\"s\":\"\xF0\x9F\x9A\x80\"}", "{\"s\":\"\xC3\"}",
      "{\"s\":\"\xC0\xAF\"}", "{\"s\":\"\xE0\x80\xAF\"}", "{\"s\":\"\xED\xA0\x80\"}",
      "{\"s\":\"\xF4\x90\x80\x80\"}", "{\"s\":\"\xF5\x80\x80\x80\"}", "{\"s\":\"\xFF\"}",
      "{\"s\":\"\xE2\x82\"}", "{\"s\":\"\xEF\xBF\xBF\"}", "{\"s\":\"\xF4\x8F\xBF\xBF\"}",
      "\xEF\xBB\xBF{}", "\xEF\xBB{}", "{\"\xC3\xA9\":1}",
      // nesting
      std::string(200, '[') + std::string(200, ']'),
      "{\"a\":" + std::string(500, '[') + std::string(500, ']') + "}",
      "{\"a\":" + std::string(500, '[') + std::string(499, ']') + "}"};
  for (const std::string& text : cases) {
    EXPECT_EQ(isJsonObjectText(text), reference(text)) << "text: " << text;
  }
}

// Random byte-level damage to real documents (a job spec as the store keeps it, and a nested
// document with every kind of value): deletions, insertions of JSON-significant bytes,
// replacements with any byte, truncations. Most mutants are invalid; every verdict must match.
TEST(JsonScanTest, AgreesWithNlohmannOnMutatedDocuments) {
  JobSpec spec;
  spec.name = "train \"resnet\" \xC3\xA9t\xC3\xA9 \xF0\x9F\x9A\x80";
  spec.command = {"python", "train.py", "--lr", "0.001"};
  spec.env = {{"PATH", "/usr/bin"}, {"ODD", "{\"spec\":null}\\"}};
  spec.resources.gpus_milli = 250;
  spec.resources.gpu_memory_mib = 20 * 1024;
  const std::vector<std::string> seeds = {
      dumpJson(toJson(spec)),
      R"({"a":[1,-2.5e3,true,false,null,"x\u00e9\ud83d\ude80\n"],"b":{"c":{},"d":[]},"e":0})"};
  const std::string significant = "{}[]:,\"\\-+.eE0123456789tfnlu \t\n";
  SeededRandom rng(20261204);
  int agreed_valid = 0, agreed_invalid = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text = seeds[rng.uniform(seeds.size())];
    int edits = 1 + static_cast<int>(rng.uniform(3));
    for (int e = 0; e < edits && !text.empty(); ++e) {
      size_t at = rng.uniform(text.size());
      switch (rng.uniform(5)) {
        case 0: text.erase(at, 1); break;
        case 1: text.insert(at, 1, significant[rng.uniform(significant.size())]); break;
        case 2: text[at] = static_cast<char>(rng.uniform(256)); break;
        case 3: text[at] = significant[rng.uniform(significant.size())]; break;
        default: text.resize(at); break;
      }
    }
    bool expected = reference(text);
    ASSERT_EQ(isJsonObjectText(text), expected) << "round " << round << ", text: " << text;
    ++(expected ? agreed_valid : agreed_invalid);
  }
  // Both verdicts were exercised, so agreement means something.
  EXPECT_GT(agreed_valid, 500);
  EXPECT_GT(agreed_invalid, 5000);
}

}  // namespace
}  // namespace gpool::api::testing
