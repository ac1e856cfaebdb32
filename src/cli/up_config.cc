#include "cli/up_config.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

#include "common/status.h"

namespace gpool::cli {
namespace {

// Keys that `gpool up` sets for the pool or each server itself: the controller's socket is how
// everything reaches it, and an agent's name, connection, state and regions are per server.
struct Reserved {
  const char* key;
  const char* why;
};
constexpr Reserved kReserved[] = {
    {"controller.socket", "the pool's socket is DIR/gpoold.sock"},
    {"agent.node", "each server's name is given by gpool up"},
    {"agent.unix_socket", "the agents reach the pool's own controller"},
    {"agent.controller", "the agents reach the pool's own controller"},
    {"agent.ca", "the agents reach the pool's own controller over its socket"},
    {"agent.token_file", "the agents reach the pool's own controller over its socket"},
    {"agent.state_dir", "each server's state is DIR/agents/NODE"},
    {"agent.vgpu_dir", "each server's slice regions are DIR/vgpu/NODE"},
};

bool isKeyPart(const std::string& part) {
  return !part.empty() && std::all_of(part.begin(), part.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-';
  });
}

bool isInteger(const std::string& v) {
  size_t i = (!v.empty() && (v[0] == '+' || v[0] == '-')) ? 1 : 0;
  if (i >= v.size()) return false;
  // TOML integers have no leading zeros ("08" stays a string, as a user would mean it).
  if (v[i] == '0' && v.size() > i + 1) return false;
  return std::all_of(v.begin() + static_cast<std::ptrdiff_t>(i), v.end(),
                     [](unsigned char c) { return std::isdigit(c); });
}

bool isDecimal(const std::string& v) {
  size_t dot = v.find('.');
  if (dot == std::string::npos || dot + 1 >= v.size()) return false;
  std::string whole = v.substr(0, dot);
  std::string frac = v.substr(dot + 1);
  return isInteger(whole.empty() ? "x" : whole) &&
         std::all_of(frac.begin(), frac.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

std::string tomlString(const std::string& v) {
  std::string out = "\"";
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

namespace {

std::string joinPath(const std::vector<std::string>& path) {
  std::string out;
  for (const std::string& p : path)
    out += (out.empty() ? "" : ".") + p;
  return out;
}

}  // namespace

std::string ConfigOverride::key() const {
  return joinPath(path);
}

Result<ConfigOverride> parseConfigOverride(const std::string& arg) {
  const std::string where = "--set " + arg + ": ";
  size_t eq = arg.find('=');
  if (eq == std::string::npos) {
    return Status::invalidArgument(where +
                                   "expected KEY=VALUE (e.g. controller.lease_duration=10s)");
  }
  ConfigOverride o;
  o.arg = arg;
  std::string key = arg.substr(0, eq);
  std::string value = arg.substr(eq + 1);
  std::stringstream parts(key);
  std::string part;
  while (std::getline(parts, part, '.')) {
    if (!isKeyPart(part) || key.back() == '.') {
      return Status::invalidArgument(where + "key '" + key +
                                     "' is not SECTION.NAME (letters, digits, '_' or '-' "
                                     "between dots, e.g. controller.lease_duration)");
    }
    o.path.push_back(part);
  }
  if (o.path.empty()) {
    return Status::invalidArgument(where +
                                   "no key before '=': write SECTION.NAME=VALUE, e.g. "
                                   "controller.lease_duration=10s");
  }
  if (o.path.size() < 2) {
    return Status::invalidArgument(where + "key '" + key +
                                   "' names no section: write SECTION.NAME, e.g. "
                                   "controller.lease_duration or agent.cpus (docs/config.md)");
  }
  for (const Reserved& r : kReserved) {
    if (key == r.key) {
      return Status::invalidArgument(where + "gpool up sets " + key + " itself (" + r.why +
                                     "); it cannot be changed with --set");
    }
  }
  if (!value.empty() &&
      (value[0] == '"' || value[0] == '\'' || value[0] == '[' || value[0] == '{')) {
    o.toml_value = value;  // TOML as written; the daemon's reader checks it
  } else if (value == "true" || value == "false" || isInteger(value) || isDecimal(value)) {
    o.toml_value = value;
  } else {
    o.toml_value = tomlString(value);
  }
  return o;
}

void TomlDraft::set(const std::vector<std::string>& path, const std::string& toml_value,
                    const std::string& origin) {
  if (tables_.empty()) tables_.push_back(Table{});
  std::vector<std::string> table_path(path.begin(), path.end() - 1);
  auto table = std::find_if(tables_.begin(), tables_.end(),
                            [&](const Table& t) { return t.path == table_path; });
  if (table == tables_.end()) {
    tables_.push_back(Table{table_path, {}});
    table = tables_.end() - 1;
  }
  auto entry = std::find_if(table->entries.begin(), table->entries.end(),
                            [&](const Entry& e) { return e.key == path.back(); });
  if (entry != table->entries.end()) {
    entry->value = toml_value;
    entry->origin = origin;
  } else {
    table->entries.push_back(Entry{path.back(), toml_value, origin});
  }
}

std::string TomlDraft::text(const std::string& comment) const {
  std::string out;
  std::stringstream lines(comment);
  std::string line;
  while (std::getline(lines, line))
    out += "# " + line + "\n";
  for (const Table& t : tables_) {
    if (!t.path.empty()) {
      if (t.entries.empty()) continue;
      out += "[" + joinPath(t.path) + "]\n";
    }
    for (const Entry& e : t.entries)
      out += e.key + " = " + e.value + "\n";
  }
  return out;
}

std::vector<std::string> TomlDraft::lineOrigins(const std::string& comment) const {
  // Mirrors text(): one element per line, in order.
  std::vector<std::string> origins;
  std::stringstream lines(comment);
  std::string line;
  while (std::getline(lines, line))
    origins.emplace_back();
  for (const Table& t : tables_) {
    if (!t.path.empty()) {
      if (t.entries.empty()) continue;
      // An unknown section is reported once, on its header: blame its first --set.
      std::string first;
      for (const Entry& e : t.entries) {
        if (!e.origin.empty()) {
          first = e.origin;
          break;
        }
      }
      origins.push_back(first);
    }
    for (const Entry& e : t.entries)
      origins.push_back(e.origin);
  }
  return origins;
}

std::string TomlDraft::explain(const std::string& message, const std::string& file,
                               const std::string& comment) const {
  const std::vector<std::string> origins = lineOrigins(comment);
  const std::string prefix = file + ":";
  std::stringstream in(message);
  std::string line;
  std::string out;
  while (std::getline(in, line)) {
    std::string rewritten = line;
    if (line.rfind(prefix, 0) == 0) {
      // "<file>:<line>: rest" or "<file>:<line>:<column>: rest" (a syntax error).
      size_t at = prefix.size();
      size_t end = at;
      while (end < line.size() && std::isdigit(static_cast<unsigned char>(line[end])))
        ++end;
      if (end > at && end < line.size() && line[end] == ':') {
        size_t number = std::stoul(line.substr(at, end - at));
        size_t rest = end + 1;
        while (rest < line.size() && std::isdigit(static_cast<unsigned char>(line[rest])))
          ++rest;
        if (rest < line.size() && line[rest] == ':' && rest > end + 1) ++rest;
        while (rest < line.size() && line[rest] == ' ')
          ++rest;
        if (number >= 1 && number <= origins.size() && !origins[number - 1].empty()) {
          rewritten = "--set " + origins[number - 1] + ": " + line.substr(rest);
        }
      }
    }
    out += (out.empty() ? "" : "\n") + rewritten;
  }
  return out;
}

}  // namespace gpool::cli
