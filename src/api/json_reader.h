#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"

// Strict JSON reading for the domain model and for any other component that decodes JSON
// (REST request bodies, agent messages). This header is the one place that knows how a JSON
// value becomes a checked C++ value; model headers include only <nlohmann/json_fwd.hpp>.
//
// The scheme (documented for users in docs/model.md):
//  - Unknown fields are errors, reported with their full path ("job.resources.gpu_mem").
//  - Missing optional fields keep the C++ default; `null` counts as missing.
//  - Quantities have a canonical integer key with a unit suffix (`gpu_memory_mib`,
//    `gpus_milli`, `cpus_milli`, `gpu_compute_milli`, `time_limit_seconds`) and a shorthand key
//    without the suffix that takes the text forms of common/units.h ("24G", "0.25", "25%",
//    "90m"). Giving both is an error. Output always uses the canonical key.
//  - Timestamps are integers, microseconds since the Unix epoch, in keys ending `_us`.
//  - Strings must be valid UTF-8 (parsed text always is; values built in code are checked).
//
// No function in this header throws; nlohmann exceptions are caught here.
namespace gpool::api {

// Parses JSON text. `what` names the input in errors (e.g. "request body"). Fails with
// InvalidArgument naming the byte offset of a syntax error, invalid UTF-8 and NUL bytes included.
Result<nlohmann::json> parseJsonText(std::string_view text, std::string_view what);

// Whether `text` is exactly one JSON object (whitespace around it allowed), as
// nlohmann::json::parse would accept it: RFC 8259 syntax, strings of valid UTF-8 with paired
// surrogate escapes (and no NUL byte, where nlohmann would stop reading). Builds nothing (about 10x
// faster than nlohmann::json::accept), for text that is only checked before being passed on as it
// is. Never throws. (json_scan.cc)
bool isJsonObjectText(std::string_view text);

// Serialises `value` compactly (indent < 0) or indented. Invalid UTF-8 in strings is replaced
// by U+FFFD rather than throwing.
std::string dumpJson(const nlohmann::json& value, int indent = -1);

// Appends `text` as a JSON string (quoted, escaped), byte for byte what dumpJson(json(text))
// writes, without building a json value: the hot path of the job list (GET /v1/jobs writes
// four strings per job). Non-ASCII text goes through dumpJson, which validates its UTF-8.
void appendJsonString(std::string& out, std::string_view text);

// "a string", "an integer", "an object", ... for error messages.
std::string_view jsonTypeName(const nlohmann::json& value);

// Whether a field must be present.
enum class Presence { kOptional, kRequired };

// The quantities of common/units.h that JSON fields can carry.
enum class Quantity {
  kMemoryMiB,     // canonical suffix _mib;    shorthand "24G" (a string with a unit)
  kGpuCount,      // canonical suffix _milli;  shorthand "0.25", 2 (string or number)
  kComputeShare,  // canonical suffix _milli;  shorthand "25%", "0.25", 0.25
  kCpuMillis,     // canonical suffix _milli;  shorthand "8", "500m", 0.5
  kDuration,      // canonical suffix _seconds; shorthand "90m", "1-00:00:00" (string only)
  kGpuAmount,     // canonical suffix _milli;  shorthand "1.5", 16 (a total of GPUs for quotas,
                  //   any multiple of 0.001 up to kMaxGpuAmountMilli)
};
inline constexpr uint64_t kMaxGpuAmountMilli = 1'000'000'000;

// The canonical key of a quantity field: "gpu_memory" -> "gpu_memory_mib".
std::string canonicalKey(std::string_view base_key, Quantity kind);

// Reads one JSON object field by field. Each getter consumes a key; `finish()` fails on the keys
// no getter asked for. Errors are sticky: after the first error every getter is a no-op and
// `finish()` returns that error, so decoding code reads straight through without checking each
// step:
//
//   Status fromJson(const nlohmann::json& j, Gpu* out, std::string_view path) {
//     ObjectReader r(j, path);
//     r.string("uuid", &out->uuid, Presence::kRequired);
//     r.integer("index", &out->index, Presence::kRequired, 0u, 1023u);
//     r.quantity("memory", Quantity::kMemoryMiB, &out->memory_mib, Presence::kRequired);
//     return r.finish();
//   }
//
// Errors are InvalidArgument and read "<path>.<key>: <what is wrong>". On error the output
// object may be partly written; callers discard it.
//
// Not thread-safe; `value` must outlive the reader.
class ObjectReader {
 public:
  // `path` names the object in errors ("job", "node.gpus[2]"). A non-object value fails at
  // once.
  ObjectReader(const nlohmann::json& value, std::string_view path);

  ObjectReader(const ObjectReader&) = delete;
  ObjectReader& operator=(const ObjectReader&) = delete;

  bool ok() const { return status_.isOk(); }
  const std::string& path() const { return path_; }
  // "<path>.<key>", or "<key>" when the path is empty.
  std::string pathOf(std::string_view key) const;

  // True when `key` is present and not null. Does not consume the key.
  bool has(std::string_view key) const;

  // Records "<path>.<key>: <message>" unless an error is already recorded. Use for checks
  // across fields after reading them.
  void fail(std::string_view key, std::string_view message);
  // fail(key, message) when `condition` is false and no error was recorded before.
  void check(bool condition, std::string_view key, std::string_view message) {
    if (!condition && ok()) fail(key, message);
  }

  void string(std::string_view key, std::string* out, Presence presence = Presence::kOptional);
  void optionalString(std::string_view key, std::optional<std::string>* out);
  void boolean(std::string_view key, bool* out, Presence presence = Presence::kOptional);

  // An integer in [min, max]. Rejects numbers with a fraction, strings and out-of-range values.
  template <typename T>
  void integer(std::string_view key, T* out, Presence presence, T min, T max) {
    // Values above INT64_MAX are never accepted (ids and counts never need them).
    const int64_t high = std::cmp_greater(max, INT64_MAX) ? INT64_MAX : static_cast<int64_t>(max);
    std::optional<int64_t> v = readInteger(key, presence, static_cast<int64_t>(min), high);
    if (v) *out = static_cast<T>(*v);
  }
  template <typename T>
  void optionalInteger(std::string_view key, std::optional<T>* out, T min, T max) {
    T value{};
    bool present = has(key);
    integer(key, &value, Presence::kOptional, min, max);
    if (present && ok()) *out = value;
  }

  // A number in [min, max], whole or with a fraction (JSON integers and floats alike);
  // strings, NaN and infinities are rejected.
  void optionalNumber(std::string_view key, std::optional<double>* out, double min, double max);

  // An array of strings.
  void stringList(std::string_view key, std::vector<std::string>* out,
                  Presence presence = Presence::kOptional);
  // An object whose values are all strings.
  void stringMap(std::string_view key, std::map<std::string, std::string>* out,
                 Presence presence = Presence::kOptional);

  // A string parsed by `parse` (e.g. parseJobState, parseArraySpec). The parser's message is
  // prefixed with the field's path.
  template <typename E>
  void parsed(std::string_view key, E* out, Result<E> (*parse)(std::string_view),
              Presence presence = Presence::kOptional) {
    std::string text;
    bool present = has(key);
    string(key, &text, presence);
    if (!present || !ok()) return;
    Result<E> r = parse(text);
    if (!r.ok()) return fail(key, r.status().message());
    *out = std::move(r).value();
  }
  template <typename E>
  void optionalParsed(std::string_view key, std::optional<E>* out,
                      Result<E> (*parse)(std::string_view)) {
    E value{};
    bool present = has(key);
    parsed(key, &value, parse);
    if (present && ok()) *out = std::move(value);
  }

  // A quantity under `base_key` (shorthand) or canonicalKey(base_key, kind) (integer). Values
  // obey the parser's rules in common/units.h; `allow_zero` additionally accepts 0 where the
  // parser rejects it (GPU count, CPU, compute share), meaning "none" or "unset".
  void quantity(std::string_view base_key, Quantity kind, uint64_t* out,
                Presence presence = Presence::kOptional, bool allow_zero = false);
  void quantity(std::string_view base_key, Quantity kind, uint32_t* out,
                Presence presence = Presence::kOptional, bool allow_zero = false);
  void quantity(std::string_view base_key, Quantity kind, int64_t* out,
                Presence presence = Presence::kOptional, bool allow_zero = false);
  template <typename T>
  void optionalQuantity(std::string_view base_key, Quantity kind, std::optional<T>* out,
                        bool allow_zero = false) {
    T value{};
    bool present = has(base_key) || has(canonicalKey(base_key, kind));
    quantity(base_key, kind, &value, Presence::kOptional, allow_zero);
    if (present && ok()) *out = value;
  }

  // A timestamp: an integer number of microseconds since the epoch, >= 0.
  void time(std::string_view key, TimePoint* out, Presence presence = Presence::kOptional);
  void optionalTime(std::string_view key, std::optional<TimePoint>* out);

  // A nested object decoded by `Status fromJson(const nlohmann::json&, T*, std::string_view)`
  // (found by argument-dependent lookup), with the path extended by the key.
  template <typename T>
  void object(std::string_view key, T* out, Presence presence = Presence::kOptional) {
    const nlohmann::json* v = take(key, presence);
    if (v == nullptr) return;
    Status s = fromJson(*v, out, pathOf(key));
    if (!s.isOk() && ok()) status_ = std::move(s);
  }
  template <typename T>
  void optionalObject(std::string_view key, std::optional<T>* out) {
    const nlohmann::json* v = take(key, Presence::kOptional);
    if (v == nullptr) return;
    T value{};
    Status s = fromJson(*v, &value, pathOf(key));
    if (!s.isOk()) {
      if (ok()) status_ = std::move(s);
      return;
    }
    *out = std::move(value);
  }
  // An array of objects; elements have paths "<path>.<key>[i]". At most `max_size` elements.
  template <typename T>
  void objectList(std::string_view key, std::vector<T>* out,
                  Presence presence = Presence::kOptional, size_t max_size = 100000) {
    const nlohmann::json* v = takeArray(key, presence, max_size);
    if (v == nullptr) return;
    std::vector<T> items;
    items.reserve(v->size());
    for (size_t i = 0; i < v->size(); ++i) {
      T item{};
      Status s = fromJson((*v)[i], &item, pathOf(key) + "[" + std::to_string(i) + "]");
      if (!s.isOk()) {
        status_ = std::move(s);
        return;
      }
      items.push_back(std::move(item));
    }
    *out = std::move(items);
  }

  // The first error; otherwise an error listing every key that no getter consumed, with a
  // "did you mean" hint for near-misses; otherwise OK.
  Status finish();

 private:
  // Marks `key` consumed. Returns the value when present and not null and no error is
  // recorded; records "required field is missing" for absent required keys.
  const nlohmann::json* take(std::string_view key, Presence presence);
  const nlohmann::json* takeArray(std::string_view key, Presence presence, size_t max_size);
  std::optional<int64_t> readInteger(std::string_view key, Presence presence, int64_t min,
                                     int64_t max);
  std::optional<uint64_t> readQuantity(std::string_view base_key, Quantity kind, Presence presence,
                                       bool allow_zero, uint64_t max);

  const nlohmann::json& value_;
  std::string path_;
  Status status_;
  std::set<std::string, std::less<>> known_;
};

// Looks `text` up case-insensitively in a table of (value, name) pairs, for enums' parse
// functions. The error lists the accepted names: "unknown job state 'RUN' (expected one of
// PENDING, RUNNING, ...)"; `what` is "job state".
template <typename E, size_t N>
Result<E> parseEnumName(std::string_view text,
                        const std::array<std::pair<E, std::string_view>, N>& table,
                        std::string_view what) {
  auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
  for (const auto& [value, name] : table) {
    if (name.size() != text.size()) continue;
    bool equal = true;
    for (size_t i = 0; i < name.size() && equal; ++i)
      equal = lower(name[i]) == lower(text[i]);
    if (equal) return value;
  }
  std::string names;
  for (const auto& entry : table) {
    if (!names.empty()) names += ", ";
    names += entry.second;
  }
  return Status::invalidArgument("unknown " + std::string(what) + " '" + std::string(text) +
                                 "' (expected one of " + names + ")");
}
// The name of `value` in the table; "?" if absent (a bug).
template <typename E, size_t N>
std::string_view enumName(E value, const std::array<std::pair<E, std::string_view>, N>& table) {
  for (const auto& entry : table) {
    if (entry.first == value) return entry.second;
  }
  return "?";
}

// Writes `value` under the quantity's canonical key.
void putQuantity(nlohmann::json& j, std::string_view base_key, Quantity kind, uint64_t value);

}  // namespace gpool::api
