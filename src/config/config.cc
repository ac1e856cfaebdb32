#include "config/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include <toml++/toml.h>

#include "common/units.h"

namespace gpool::config {

namespace {

std::string_view typeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: return "nothing";
  }
  return "an unknown value";
}

uint32_t lineOf(const toml::node& node) {
  return static_cast<uint32_t>(node.source().begin.line);
}

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

// A number as text the units parsers accept: "0.25", "8".
std::string numberText(const toml::node& node) {
  if (node.is_integer()) return std::to_string(node.as_integer()->get());
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", node.as_floating_point()->get());
  return buf;
}

// `text` with control characters written as escapes (\n, \t, \xNN): messages quote what the
// file holds (values, keys, toml++'s "saw '...'"), and each must stay one line that a terminal
// prints as it is.
std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

struct ConfigFile::Impl {
  struct Section {
    const toml::table* table = nullptr;  // null: the section is absent from the file
    std::string path;
    uint32_t line = 0;
    std::set<std::string, std::less<>> read;
  };
  struct Error {
    uint32_t line;  // 0: no line (e.g. a missing key of a missing section)
    std::string text;
  };

  std::string source;
  toml::table root;
  std::deque<Section> sections;  // [0] is the root; a deque keeps references stable
  std::vector<Error> errors;
  std::vector<std::string> error_texts;

  std::string keyPath(const Section& s, std::string_view key) const {
    return s.path.empty() ? std::string(key) : s.path + "." + std::string(key);
  }

  void addError(uint32_t line, const std::string& key_path, std::string_view message) {
    std::string text = source;
    if (line > 0) text += ":" + std::to_string(line);
    text += ": key '" + key_path + "': " + std::string(message);
    text = printable(text);
    error_texts.push_back(text);
    errors.push_back({line, std::move(text)});
  }

  size_t addSection(const toml::table* table, std::string path, uint32_t line) {
    if (table != nullptr) {
      for (size_t i = 0; i < sections.size(); ++i) {
        if (sections[i].table == table) return i;
      }
    }
    sections.push_back({table, std::move(path), line, {}});
    return sections.size() - 1;
  }
};

ConfigFile::ConfigFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConfigFile::ConfigFile(ConfigFile&& other) noexcept = default;
ConfigFile& ConfigFile::operator=(ConfigFile&& other) noexcept = default;
ConfigFile::~ConfigFile() = default;

Result<ConfigFile> ConfigFile::parse(std::string_view text, std::string_view source_name) {
  auto impl = std::make_unique<Impl>();
  impl->source = std::string(source_name);
  try {
    impl->root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    return Status::invalidArgument(std::string(source_name) + ":" + std::to_string(where.line) +
                                   ":" + std::to_string(where.column) + ": " +
                                   printable(e.description()));
  } catch (const std::exception& e) {
    return Status::invalidArgument(std::string(source_name) + ": " + printable(e.what()));
  }
  impl->addSection(&impl->root, "", 0);
  return ConfigFile(std::move(impl));
}

Result<ConfigFile> ConfigFile::load(const std::string& path, MissingFile missing) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    if (err == ENOENT && missing == MissingFile::kUseDefaults) return parse("", path);
    return Status::ioError("cannot open config file '" + path + "': " + std::strerror(err));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::ioError("cannot read config file '" + path + "'");
  return parse(text.str(), path);
}

ConfigSection ConfigFile::root() {
  return ConfigSection(impl_.get(), 0);
}

const std::vector<std::string>& ConfigFile::errors() const {
  return impl_->error_texts;
}

const std::string& ConfigFile::sourceName() const {
  return impl_->source;
}

Status ConfigFile::finish() {
  std::vector<Impl::Error> all = impl_->errors;
  for (const Impl::Section& s : impl_->sections) {
    if (s.table == nullptr) continue;
    for (auto&& [key, node] : *s.table) {
      if (s.read.count(key.str()) != 0) continue;
      std::string text = impl_->source + ":" + std::to_string(key.source().begin.line) +
                         ": unknown key '" + impl_->keyPath(s, key.str()) + "'";
      std::string best;
      size_t best_distance = SIZE_MAX;
      for (const std::string& known : s.read) {
        size_t d = editDistance(key.str(), known);
        if (d < best_distance) {
          best_distance = d;
          best = known;
        }
      }
      if (!best.empty() && best_distance <= std::max<size_t>(2, key.str().size() / 3)) {
        text += " (did you mean '" + best + "'?)";
      }
      all.push_back({static_cast<uint32_t>(key.source().begin.line), printable(text)});
    }
  }
  if (all.empty()) return Status::ok();
  std::stable_sort(all.begin(), all.end(),
                   [](const Impl::Error& a, const Impl::Error& b) { return a.line < b.line; });
  std::string message;
  for (const Impl::Error& e : all) {
    if (!message.empty()) message += "\n";
    message += e.text;
  }
  return Status::invalidArgument(message);
}

// ---- ConfigSection ----

namespace {

// Looks `key` up in `section` and marks it read.
const toml::node* take(ConfigFile::Impl::Section& section, std::string_view key) {
  section.read.emplace(key);
  if (section.table == nullptr) return nullptr;
  return section.table->get(key);
}

}  // namespace

const std::string& ConfigSection::path() const {
  return file_->sections[index_].path;
}

bool ConfigSection::exists() const {
  return file_->sections[index_].table != nullptr;
}

bool ConfigSection::has(std::string_view key) const {
  const auto& s = file_->sections[index_];
  return s.table != nullptr && s.table->get(key) != nullptr;
}

void ConfigSection::fail(std::string_view key, std::string_view message) {
  auto& s = file_->sections[index_];
  const toml::node* node = s.table != nullptr ? s.table->get(key) : nullptr;
  file_->addError(node != nullptr ? lineOf(*node) : s.line, file_->keyPath(s, key), message);
}

std::string ConfigSection::getString(std::string_view key, std::string_view default_value) {
  const toml::node* node = take(file_->sections[index_], key);
  if (node == nullptr) return std::string(default_value);
  if (!node->is_string()) {
    fail(key, "expected a string, got " + std::string(typeName(*node)));
    return std::string(default_value);
  }
  return node->as_string()->get();
}

std::string ConfigSection::requireString(std::string_view key) {
  if (!has(key)) {
    take(file_->sections[index_], key);
    fail(key, "required key is missing");
    return "";
  }
  return getString(key);
}

int64_t ConfigSection::getInt(std::string_view key, int64_t default_value, int64_t min,
                              int64_t max) {
  const toml::node* node = take(file_->sections[index_], key);
  if (node == nullptr) return default_value;
  if (!node->is_integer()) {
    fail(key, "expected an integer, got " + std::string(typeName(*node)));
    return default_value;
  }
  int64_t v = node->as_integer()->get();
  if (v < min || v > max) {
    fail(key, "value " + std::to_string(v) + " is out of range [" + std::to_string(min) + ", " +
                  std::to_string(max) + "]");
    return default_value;
  }
  return v;
}

int64_t ConfigSection::requireInt(std::string_view key, int64_t min, int64_t max) {
  if (!has(key)) {
    take(file_->sections[index_], key);
    fail(key, "required key is missing");
    return min > 0 ? min : (max < 0 ? max : 0);
  }
  return getInt(key, min, min, max);
}

bool ConfigSection::getBool(std::string_view key, bool default_value) {
  const toml::node* node = take(file_->sections[index_], key);
  if (node == nullptr) return default_value;
  if (!node->is_boolean()) {
    fail(key, "expected a boolean (true or false), got " + std::string(typeName(*node)));
    return default_value;
  }
  return node->as_boolean()->get();
}

double ConfigSection::getDouble(std::string_view key, double default_value, double min,
                                double max) {
  const toml::node* node = take(file_->sections[index_], key);
  if (node == nullptr) return default_value;
  double v;
  if (node->is_integer()) {
    v = static_cast<double>(node->as_integer()->get());
  } else if (node->is_floating_point()) {
    v = node->as_floating_point()->get();
  } else {
    fail(key, "expected a number, got " + std::string(typeName(*node)));
    return default_value;
  }
  if (!std::isfinite(v) || v < min || v > max) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "value %g is out of range [%g, %g]", v, min, max);
    fail(key, buf);
    return default_value;
  }
  return v;
}

int64_t ConfigSection::getDuration(std::string_view key, int64_t default_seconds) {
  const toml::node* node = take(file_->sections[index_], key);
  if (node == nullptr) return default_seconds;
  if (!node->is_string()) {
    fail(key, "expected a duration string such as \"90s\", \"5m\" or \"1-00:00:00\", got " +
                  std::string(typeName(*node)));
    return default_seconds;
  }
  Result<int64_t> v = parseDuration(node->as_string()->get());
  if (!v.ok()) {
    fail(key, v.status().message());
    return default_seconds;
  }
  return *v;
}

uint64_t ConfigSection::getMemoryMiB(std::string_view key, uint64_t default_mib) {
  const toml::node* node = take(file_->sections[index_], key);
  if (node == nullptr) return default_mib;
  if (!node->is_string()) {
    fail(key, "expected a memory size string such as \"24G\" or \"512M\", got " +
                  std::string(typeName(*node)));
    return default_mib;
  }
  Result<uint64_t> v = parseMemoryMiB(node->as_string()->get());
  if (!v.ok()) {
    fail(key, v.status().message());
    return default_mib;
  }
  return *v;
}

uint32_t ConfigSection::getComputeShare(std::string_view key, uint32_t default_thousandths) {
  const toml::node* node = take(file_->sections[index_], key);
  if (node == nullptr) return default_thousandths;
  std::string text;
  if (node->is_string()) {
    text = node->as_string()->get();
  } else if (node->is_integer() || node->is_floating_point()) {
    text = numberText(*node);
  } else {
    fail(key,
         "expected a compute share such as \"25%\" or 0.25, got " + std::string(typeName(*node)));
    return default_thousandths;
  }
  Result<uint32_t> v = parseComputeShare(text);
  if (!v.ok()) {
    fail(key, v.status().message());
    return default_thousandths;
  }
  return *v;
}

uint64_t ConfigSection::getCpuMillis(std::string_view key, uint64_t default_millis) {
  const toml::node* node = take(file_->sections[index_], key);
  if (node == nullptr) return default_millis;
  std::string text;
  if (node->is_string()) {
    text = node->as_string()->get();
  } else if (node->is_integer() || node->is_floating_point()) {
    text = numberText(*node);
  } else {
    fail(key,
         "expected a CPU count such as 8, 0.5 or \"500m\", got " + std::string(typeName(*node)));
    return default_millis;
  }
  Result<uint64_t> v = parseCpuMillis(text);
  if (!v.ok()) {
    fail(key, v.status().message());
    return default_millis;
  }
  return *v;
}

std::vector<std::string> ConfigSection::getStringList(std::string_view key,
                                                      std::vector<std::string> default_value) {
  const toml::node* node = take(file_->sections[index_], key);
  if (node == nullptr) return default_value;
  const toml::array* array = node->as_array();
  if (array == nullptr) {
    fail(key, "expected an array of strings, got " + std::string(typeName(*node)));
    return default_value;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& e = *array->get(i);
    if (!e.is_string()) {
      file_->addError(lineOf(e),
                      file_->keyPath(file_->sections[index_], key) + "[" + std::to_string(i) + "]",
                      "expected a string, got " + std::string(typeName(e)));
      return default_value;
    }
    out.push_back(e.as_string()->get());
  }
  return out;
}

std::map<std::string, std::string> ConfigSection::getStringMap(std::string_view key) {
  const toml::node* node = take(file_->sections[index_], key);
  if (node == nullptr) return {};
  const toml::table* table = node->as_table();
  if (table == nullptr) {
    fail(key, "expected a table of strings, got " + std::string(typeName(*node)));
    return {};
  }
  std::map<std::string, std::string> out;
  for (auto&& [k, v] : *table) {
    if (!v.is_string()) {
      file_->addError(lineOf(v),
                      file_->keyPath(file_->sections[index_], key) + "." + std::string(k.str()),
                      "expected a string, got " + std::string(typeName(v)));
      return {};
    }
    out.emplace(std::string(k.str()), v.as_string()->get());
  }
  return out;
}

ConfigSection ConfigSection::section(std::string_view key) {
  auto& s = file_->sections[index_];
  const std::string path = file_->keyPath(s, key);
  const toml::node* node = take(s, key);
  if (node == nullptr) return ConfigSection(file_, file_->addSection(nullptr, path, s.line));
  const toml::table* table = node->as_table();
  if (table == nullptr) {
    fail(key, "expected a table ([" + path + "]), got " + std::string(typeName(*node)));
    return ConfigSection(file_, file_->addSection(nullptr, path, lineOf(*node)));
  }
  return ConfigSection(file_, file_->addSection(table, path, lineOf(*table)));
}

std::vector<ConfigSection> ConfigSection::sectionArray(std::string_view key) {
  auto& s = file_->sections[index_];
  const std::string path = file_->keyPath(s, key);
  const toml::node* node = take(s, key);
  if (node == nullptr) return {};
  const toml::array* array = node->as_array();
  if (array == nullptr || !array->is_array_of_tables()) {
    fail(key,
         "expected an array of tables ([[" + path + "]]), got " + std::string(typeName(*node)));
    return {};
  }
  std::vector<ConfigSection> out;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::table* table = array->get(i)->as_table();
    out.push_back(ConfigSection(
        file_, file_->addSection(table, path + "[" + std::to_string(i) + "]", lineOf(*table))));
  }
  return out;
}

}  // namespace gpool::config
