#include "api/json_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "common/units.h"

namespace gpool::api {

namespace {

using nlohmann::json;

std::string quote(std::string_view s) {
  return "'" + std::string(s) + "'";
}

// Levenshtein distance, for "did you mean" hints on misspelt keys.
size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Strips nlohmann's "[json.exception.parse_error.101] " prefix from exception texts.
std::string exceptionText(const std::exception& e) {
  std::string text = e.what();
  if (!text.empty() && text.front() == '[') {
    size_t end = text.find("] ");
    if (end != std::string::npos) text.erase(0, end + 2);
  }
  return text;
}

std::string_view unitSuffix(Quantity kind) {
  switch (kind) {
    case Quantity::kMemoryMiB: return "_mib";
    case Quantity::kGpuCount: return "_milli";
    case Quantity::kComputeShare: return "_milli";
    case Quantity::kCpuMillis: return "_milli";
    case Quantity::kDuration: return "_seconds";
    case Quantity::kGpuAmount: return "_milli";
  }
  return "";
}

// Checks a canonical integer against the rules its text parser enforces. Returns an empty
// string when valid, else the reason.
std::string checkCanonical(Quantity kind, uint64_t v) {
  switch (kind) {
    case Quantity::kMemoryMiB:
      if (v > kMaxMemoryMiB) return "is too large (at most " + std::to_string(kMaxMemoryMiB) + ")";
      return "";
    case Quantity::kGpuCount:
      if (v == 0) return "must be > 0";
      if (v > uint64_t{kMaxGpusPerTask} * 1000) {
        return "is too large (at most " + std::to_string(uint64_t{kMaxGpusPerTask} * 1000) + ")";
      }
      if (v > 1000 && v % 1000 != 0) {
        return "mixes whole GPUs and a fraction; use a multiple of 1000 (whole GPUs) or a value "
               "below 1000 (a slice of one GPU)";
      }
      return "";
    case Quantity::kComputeShare:
      if (v == 0 || v > kComputeWhole) return "is out of range [1, 1000]";
      return "";
    case Quantity::kCpuMillis:
      if (v == 0) return "must be > 0";
      if (v > 1'000'000'000) return "is too large (at most 1000000000)";
      return "";
    case Quantity::kDuration:
      if (v > static_cast<uint64_t>(kMaxDurationSeconds)) {
        return "is too long (at most " + std::to_string(kMaxDurationSeconds) + " seconds)";
      }
      return "";
    case Quantity::kGpuAmount:
      if (v == 0) return "must be > 0";
      if (v > kMaxGpuAmountMilli) {
        return "is too large (at most " + std::to_string(kMaxGpuAmountMilli) + ")";
      }
      return "";
  }
  return "";
}

Result<uint64_t> parseQuantityText(Quantity kind, std::string_view text) {
  switch (kind) {
    case Quantity::kMemoryMiB: return parseMemoryMiB(text);
    case Quantity::kGpuCount: {
      GPOOL_ASSIGN_OR_RETURN(uint32_t v, parseGpuCount(text));
      return uint64_t{v};
    }
    case Quantity::kComputeShare: {
      GPOOL_ASSIGN_OR_RETURN(uint32_t v, parseComputeShare(text));
      return uint64_t{v};
    }
    case Quantity::kCpuMillis: return parseCpuMillis(text);
    case Quantity::kDuration: {
      GPOOL_ASSIGN_OR_RETURN(int64_t v, parseDuration(text));
      return static_cast<uint64_t>(v);
    }
    case Quantity::kGpuAmount: {
      GPOOL_ASSIGN_OR_RETURN(uint64_t v,
                             parseScaledDecimal(text, 3, kMaxGpuAmountMilli, "GPU amount"));
      if (v == 0) {
        return Status::invalidArgument("GPU amount '" + std::string(text) + "' is zero");
      }
      return v;
    }
  }
  return Status::internal("unknown quantity kind");
}

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or values above U+10FFFF).
// Parsed JSON text is always valid, but values built in code may not be, and they would not
// survive a round trip (dumpJson replaces bad bytes).
bool isValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      n = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n;
  }
  return true;
}

// True when `text` is a zero in any of the forms the parsers accept ("0", "0.0", "0%", "0m").
bool isZeroText(std::string_view text) {
  while (!text.empty() && (text.back() == '%' || text.back() == 'm' || text.back() == ' '))
    text.remove_suffix(1);
  Result<uint64_t> v = parseScaledDecimal(text, 3, 1'000'000, "value");
  return v.ok() && *v == 0;
}

}  // namespace

Result<json> parseJsonText(std::string_view text, std::string_view what) {
  // nlohmann takes a NUL byte for the end of the input and would accept "{}\0anything"; JSON
  // has no NUL outside strings, and inside them it must be escaped.
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return Status::invalidArgument(std::string(what) + " is not valid JSON: a NUL byte at offset " +
                                   std::to_string(nul));
  }
  // nlohmann keeps the last of duplicate keys silently; a strict reader must reject them, so a
  // parser callback tracks the keys of every open object.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  json::parser_callback_t callback = [&](int /*depth*/, json::parse_event_t event,
                                         json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start: open_objects.emplace_back(); break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty() && parsed.is_string() &&
            !open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default: break;
    }
    return true;
  };
  try {
    json value = json::parse(text.begin(), text.end(), callback);
    if (!duplicate.empty()) {
      return Status::invalidArgument(std::string(what) + " has the key " + quote(duplicate) +
                                     " twice in one object");
    }
    return value;
  } catch (const json::parse_error& e) {
    return Status::invalidArgument(std::string(what) + " is not valid JSON: " + exceptionText(e));
  } catch (const std::exception& e) {
    return Status::invalidArgument(std::string(what) + " could not be parsed: " + exceptionText(e));
  }
}

std::string dumpJson(const json& value, int indent) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

void appendJsonString(std::string& out, std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      out += dumpJson(json(std::string(text)));
      return;
    }
  }
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out += kHex[(c >> 4) & 0xf];
          out += kHex[c & 0xf];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

std::string_view jsonTypeName(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer: return "an integer";
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number with a fraction";
    case json::value_t::binary: return "binary data";
    case json::value_t::discarded: return "a discarded value";
  }
  return "an unknown value";
}

std::string canonicalKey(std::string_view base_key, Quantity kind) {
  return std::string(base_key) + std::string(unitSuffix(kind));
}

void putQuantity(json& j, std::string_view base_key, Quantity kind, uint64_t value) {
  j[canonicalKey(base_key, kind)] = value;
}

ObjectReader::ObjectReader(const json& value, std::string_view path) : value_(value), path_(path) {
  if (!value_.is_object()) {
    std::string prefix = path_.empty() ? "" : path_ + ": ";
    status_ = Status::invalidArgument(prefix + "expected an object, got " +
                                      std::string(jsonTypeName(value_)));
  }
}

std::string ObjectReader::pathOf(std::string_view key) const {
  if (path_.empty()) return std::string(key);
  if (key.empty()) return path_;
  return path_ + "." + std::string(key);
}

bool ObjectReader::has(std::string_view key) const {
  if (!value_.is_object()) return false;
  auto it = value_.find(std::string(key));
  return it != value_.end() && !it->is_null();
}

void ObjectReader::fail(std::string_view key, std::string_view message) {
  if (!ok()) return;
  status_ = Status::invalidArgument(pathOf(key) + ": " + std::string(message));
}

const json* ObjectReader::take(std::string_view key, Presence presence) {
  known_.emplace(key);
  if (!ok()) return nullptr;
  auto it = value_.find(std::string(key));
  if (it == value_.end() || it->is_null()) {
    if (presence == Presence::kRequired) fail(key, "required field is missing");
    return nullptr;
  }
  return &*it;
}

const json* ObjectReader::takeArray(std::string_view key, Presence presence, size_t max_size) {
  const json* v = take(key, presence);
  if (v == nullptr) return nullptr;
  if (!v->is_array()) {
    fail(key, "expected an array, got " + std::string(jsonTypeName(*v)));
    return nullptr;
  }
  if (v->size() > max_size) {
    fail(key, "has " + std::to_string(v->size()) + " elements; at most " +
                  std::to_string(max_size) + " are allowed");
    return nullptr;
  }
  return v;
}

void ObjectReader::string(std::string_view key, std::string* out, Presence presence) {
  const json* v = take(key, presence);
  if (v == nullptr) return;
  if (!v->is_string()) return fail(key, "expected a string, got " + std::string(jsonTypeName(*v)));
  const std::string& text = v->get_ref<const std::string&>();
  if (!isValidUtf8(text)) return fail(key, "is not valid UTF-8");
  *out = text;
}

void ObjectReader::optionalString(std::string_view key, std::optional<std::string>* out) {
  std::string value;
  bool present = has(key);
  string(key, &value, Presence::kOptional);
  if (present && ok()) *out = std::move(value);
}

void ObjectReader::boolean(std::string_view key, bool* out, Presence presence) {
  const json* v = take(key, presence);
  if (v == nullptr) return;
  if (!v->is_boolean()) {
    return fail(key, "expected a boolean, got " + std::string(jsonTypeName(*v)));
  }
  *out = v->get<bool>();
}

std::optional<int64_t> ObjectReader::readInteger(std::string_view key, Presence presence,
                                                 int64_t min, int64_t max) {
  const json* v = take(key, presence);
  if (v == nullptr) return std::nullopt;
  auto out_of_range = [&]() {
    fail(key, "is out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    return std::nullopt;
  };
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (std::cmp_greater(u, max) || std::cmp_less(u, min)) return out_of_range();
    return static_cast<int64_t>(u);
  }
  if (v->is_number_integer()) {
    int64_t i = v->get<int64_t>();
    if (i < min || i > max) return out_of_range();
    return i;
  }
  if (v->is_number_float()) {
    // Integers too large for 64 bits arrive as floats.
    double d = v->get<double>();
    if (std::isfinite(d) && std::trunc(d) == d) return out_of_range();
  }
  fail(key, "expected an integer, got " + std::string(jsonTypeName(*v)));
  return std::nullopt;
}

void ObjectReader::optionalNumber(std::string_view key, std::optional<double>* out, double min,
                                  double max) {
  const json* v = take(key, Presence::kOptional);
  if (v == nullptr) return;
  if (!v->is_number()) return fail(key, "expected a number, got " + std::string(jsonTypeName(*v)));
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    char range[96];
    std::snprintf(range, sizeof range, "is out of range [%g, %g]", min, max);
    return fail(key, range);
  }
  *out = d;
}

std::optional<uint64_t> ObjectReader::readQuantity(std::string_view base_key, Quantity kind,
                                                   Presence presence, bool allow_zero,
                                                   uint64_t max) {
  const std::string canon = canonicalKey(base_key, kind);
  const json* shorthand = take(base_key, Presence::kOptional);
  const json* canonical = take(canon, Presence::kOptional);
  if (!ok()) return std::nullopt;
  if (shorthand != nullptr && canonical != nullptr) {
    fail(base_key, "give either " + quote(base_key) + " or " + quote(canon) + ", not both");
    return std::nullopt;
  }
  if (shorthand == nullptr && canonical == nullptr) {
    if (presence == Presence::kRequired) {
      fail(base_key,
           "required field is missing (give " + quote(base_key) + " or " + quote(canon) + ")");
    }
    return std::nullopt;
  }
  uint64_t value = 0;
  if (canonical != nullptr) {
    std::optional<int64_t> v = readInteger(canon, Presence::kOptional, 0, INT64_MAX);
    if (!v) return std::nullopt;
    value = static_cast<uint64_t>(*v);
    if (!(allow_zero && value == 0)) {
      std::string why = checkCanonical(kind, value);
      if (!why.empty()) {
        fail(canon, why);
        return std::nullopt;
      }
    }
  } else {
    std::string text;
    if (shorthand->is_string()) {
      text = shorthand->get<std::string>();
    } else if (shorthand->is_number() && kind != Quantity::kMemoryMiB &&
               kind != Quantity::kDuration) {
      if (shorthand->is_number_float()) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.15g", shorthand->get<double>());
        text = buf;
      } else {
        text = shorthand->dump();
      }
    } else {
      const std::string expected = kind == Quantity::kMemoryMiB ? "a string with a unit such as "
                                                                  "\"24G\""
                                   : kind == Quantity::kDuration
                                       ? "a string such as \"90m\" or \"1-00:00:00\""
                                       : "a string or a number";
      fail(base_key, "expected " + expected + " (or an integer in " + quote(canon) + "), got " +
                         std::string(jsonTypeName(*shorthand)));
      return std::nullopt;
    }
    if (allow_zero && isZeroText(text)) {
      value = 0;
    } else {
      Result<uint64_t> from_text = parseQuantityText(kind, text);
      if (!from_text.ok()) {
        fail(base_key, from_text.status().message());
        return std::nullopt;
      }
      value = *from_text;
    }
  }
  if (value > max) {
    fail(base_key, "is too large (at most " + std::to_string(max) + ")");
    return std::nullopt;
  }
  return value;
}

void ObjectReader::quantity(std::string_view base_key, Quantity kind, uint64_t* out,
                            Presence presence, bool allow_zero) {
  std::optional<uint64_t> v = readQuantity(base_key, kind, presence, allow_zero, UINT64_MAX);
  if (v) *out = *v;
}

void ObjectReader::quantity(std::string_view base_key, Quantity kind, uint32_t* out,
                            Presence presence, bool allow_zero) {
  std::optional<uint64_t> v = readQuantity(base_key, kind, presence, allow_zero, UINT32_MAX);
  if (v) *out = static_cast<uint32_t>(*v);
}

void ObjectReader::quantity(std::string_view base_key, Quantity kind, int64_t* out,
                            Presence presence, bool allow_zero) {
  std::optional<uint64_t> v = readQuantity(base_key, kind, presence, allow_zero, INT64_MAX);
  if (v) *out = static_cast<int64_t>(*v);
}

void ObjectReader::time(std::string_view key, TimePoint* out, Presence presence) {
  // Up to the year 9999, so that every accepted value formats as a calendar date.
  constexpr int64_t kMaxMicros = int64_t{253402300799} * 1'000'000;
  std::optional<int64_t> v = readInteger(key, presence, 0, kMaxMicros);
  if (v) *out = fromUnixMicros(*v);
}

void ObjectReader::optionalTime(std::string_view key, std::optional<TimePoint>* out) {
  TimePoint value{};
  bool present = has(key);
  time(key, &value, Presence::kOptional);
  if (present && ok()) *out = value;
}

void ObjectReader::stringList(std::string_view key, std::vector<std::string>* out,
                              Presence presence) {
  const json* v = takeArray(key, presence, 100000);
  if (v == nullptr) return;
  std::vector<std::string> items;
  items.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_string()) {
      return fail(std::string(key) + "[" + std::to_string(i) + "]",
                  "expected a string, got " + std::string(jsonTypeName(e)));
    }
    const std::string& text = e.get_ref<const std::string&>();
    if (!isValidUtf8(text)) {
      return fail(std::string(key) + "[" + std::to_string(i) + "]", "is not valid UTF-8");
    }
    items.push_back(text);
  }
  *out = std::move(items);
}

void ObjectReader::stringMap(std::string_view key, std::map<std::string, std::string>* out,
                             Presence presence) {
  const json* v = take(key, presence);
  if (v == nullptr) return;
  if (!v->is_object()) {
    return fail(key, "expected an object of strings, got " + std::string(jsonTypeName(*v)));
  }
  std::map<std::string, std::string> items;
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it.value().is_string()) {
      return fail(std::string(key) + "." + it.key(),
                  "expected a string, got " + std::string(jsonTypeName(it.value())));
    }
    const std::string& text = it.value().get_ref<const std::string&>();
    if (!isValidUtf8(it.key()) || !isValidUtf8(text)) {
      return fail(std::string(key) + "." + it.key(), "is not valid UTF-8");
    }
    items.emplace(it.key(), text);
  }
  *out = std::move(items);
}

Status ObjectReader::finish() {
  if (!ok()) return status_;
  std::vector<std::string> unknown;
  for (auto it = value_.begin(); it != value_.end(); ++it) {
    if (known_.find(it.key()) == known_.end()) unknown.push_back(it.key());
  }
  if (unknown.empty()) return Status::ok();
  std::string message = pathOf(unknown.front()) + ": unknown field";
  // The closest known key within two edits (or a third of the length) is most likely what was
  // meant.
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& k : known_) {
    size_t d = editDistance(unknown.front(), k);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  // A prefix ("gpu_mem" for "gpu_memory") is also a near-miss.
  if (best_distance > 2) {
    for (const std::string& k : known_) {
      if (unknown.front().size() >= 3 && k.rfind(unknown.front(), 0) == 0) {
        best = k;
        best_distance = 0;
        break;
      }
    }
  }
  if (!best.empty() && best_distance <= std::max<size_t>(2, unknown.front().size() / 3)) {
    message += " (did you mean " + quote(best) + "?)";
  }
  if (unknown.size() > 1) {
    message += "; also unknown:";
    for (size_t i = 1; i < unknown.size(); ++i)
      message += " " + quote(unknown[i]);
  }
  return Status::invalidArgument(message);
}

}  // namespace gpool::api
