// Fuzz target: the JSON model decoders of src/api (docs/model.md), the text forms of
// common/units.h and the list syntaxes that JobSpec fields carry.
//
// The input is tried as JSON text against every model type and as the text of every quantity.
// Beyond "no crash, no undefined behaviour", it checks the contracts the headers state:
//  - api::isJsonObjectText agrees with nlohmann::json::parse on what is one JSON object, and
//    api::parseJsonText reads the same value when it accepts the text;
//  - whatever a decoder accepts, toJson writes back in a form the decoder reads to the same
//    value (fromJson(toJson(x)) == x), and the text of that form parses back to it;
//  - a Job's toJsonText is byte for byte dumpJson(toJson(job));
//  - appendJsonString writes what dumpJson(json(text)) writes;
//  - whatever a unit parser accepts, its format function writes a text that parses back to the
//    same value.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/allocation.h"
#include "api/job.h"
#include "api/job_spec.h"
#include "api/json_reader.h"
#include "api/node.h"
#include "api/user.h"
#include "common/units.h"
#include "fuzz/fuzz_util.h"

namespace gpool::fuzz {
namespace {

using nlohmann::json;

template <typename T>
void checkModel(const json& value, std::string_view type) {
  T decoded{};
  if (!api::fromJson(value, &decoded).isOk()) return;
  const json encoded = api::toJson(decoded);
  T again{};
  Status s = api::fromJson(encoded, &again);
  if (!s.isOk()) {
    fail(std::string(type) + ": toJson wrote what fromJson refuses: " + s.toString() + " in " +
         api::dumpJson(encoded));
  }
  if (!(again == decoded)) fail(std::string(type) + ": fromJson(toJson(x)) != x");
  Result<json> reparsed = api::parseJsonText(api::dumpJson(encoded), "encoded");
  if (!reparsed.ok() || *reparsed != encoded) {
    fail(std::string(type) + ": dumpJson(toJson(x)) does not parse back to toJson(x)");
  }
  if constexpr (std::is_same_v<T, api::Job>) {
    const std::string direct = api::toJsonText(decoded, api::dumpJson(api::toJson(decoded.spec)));
    if (direct != api::dumpJson(encoded)) fail("Job: toJsonText != dumpJson(toJson(job))");
  }
}

// parse(format(v)) == v for every v that parse accepted.
template <typename V, typename Parse, typename Format>
void checkUnit(std::string_view text, Parse parse, Format format, std::string_view what) {
  Result<V> parsed = parse(text);
  if (!parsed.ok()) return;
  const std::string written = format(*parsed);
  Result<V> again = parse(written);
  if (!again.ok() || *again != *parsed) {
    fail(std::string(what) + ": '" + written + "' (written for '" + std::string(text) +
         "') does not parse back");
  }
}

}  // namespace
}  // namespace gpool::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpool;
  using namespace gpool::fuzz;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // isJsonObjectText promises nlohmann's syntax (duplicate keys included, which parseJsonText
  // refuses on top), except that nlohmann stops at a NUL byte.
  const nlohmann::json syntax = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const bool is_object =
      !syntax.is_discarded() && syntax.is_object() && text.find('\0') == std::string_view::npos;
  if (api::isJsonObjectText(text) != is_object) {
    fail(is_object ? "isJsonObjectText refuses an object that nlohmann::json::parse reads"
                   : "isJsonObjectText accepts text that nlohmann::json::parse refuses");
  }
  Result<nlohmann::json> parsed = api::parseJsonText(text, "input");
  if (parsed.ok() && *parsed != syntax) fail("parseJsonText reads another value than nlohmann");

  std::string appended;
  api::appendJsonString(appended, text);
  if (appended != api::dumpJson(nlohmann::json(std::string(text)))) {
    fail("appendJsonString differs from dumpJson(json(text))");
  }

  if (parsed.ok()) {
    const nlohmann::json& v = *parsed;
    checkModel<api::JobSpec>(v, "JobSpec");
    checkModel<api::TaskResources>(v, "TaskResources");
    checkModel<api::Constraints>(v, "Constraints");
    checkModel<api::Dependency>(v, "Dependency");
    checkModel<api::Job>(v, "Job");
    checkModel<api::Node>(v, "Node");
    checkModel<api::Gpu>(v, "Gpu");
    checkModel<api::GpuLink>(v, "GpuLink");
    checkModel<api::Allocation>(v, "Allocation");
    checkModel<api::Slice>(v, "Slice");
    checkModel<api::User>(v, "User");
    checkModel<api::Group>(v, "Group");
    checkModel<api::Quota>(v, "Quota");
    checkModel<api::Qos>(v, "Qos");
  }

  checkUnit<uint64_t>(text, parseMemoryMiB, formatMemoryMiB, "memory");
  checkUnit<uint32_t>(text, parseComputeShare, formatComputeShare, "compute share");
  checkUnit<uint32_t>(text, parseGpuCount, formatGpuCount, "GPU count");
  checkUnit<uint64_t>(text, parseCpuMillis, formatCpuMillis, "CPU");
  checkUnit<int64_t>(text, parseDuration, formatDuration, "duration");
  checkUnit<api::ArraySpec>(text, api::parseArraySpec, api::formatArraySpec, "array spec");
  checkUnit<std::vector<api::Dependency>>(text, api::parseDependencyList, api::formatDependencyList,
                                          "dependency list");
  checkUnit<api::ComputeCapability>(text, api::parseComputeCapability, api::formatComputeCapability,
                                    "compute capability");
  (void)api::parseJobState(text);
  (void)api::parseRole(text);
  return 0;
}
