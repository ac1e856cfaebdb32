#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/result.h"

// The configuration files `gpool up` writes for its pool (gpoold.toml and one gpool-agent.toml
// per server), with the keys a user sets on the command line (`--set KEY=VALUE`, repeatable):
// `controller.lease_duration=10s`, `log.level=debug`, `agent.cpus=8`. A key whose first part is
// `agent` goes to every agent's file, any other to gpoold's. The daemons' own readers
// (readControllerSettings, readAgentSettings) check the files before anything starts, and their
// errors are rewritten to name the `--set` that caused them. docs/gpool-up.md.
//
// Pure functions and a value type; no I/O. Thread-compatible.
namespace gpool::cli {

// One `--set KEY=VALUE`.
struct ConfigOverride {
  std::string arg;                // as given, for messages: "controller.lease_duration=10s"
  std::vector<std::string> path;  // the dotted key split: {"controller", "lease_duration"}
  std::string toml_value;         // the value as TOML text: "\"10s\"", "8", "true"
  bool forAgent() const { return path.front() == "agent"; }
  std::string key() const;  // "controller.lease_duration"
};

// Parses "KEY=VALUE". KEY is at least SECTION.NAME, every part of letters, digits, '_' or '-'.
// VALUE is written as TOML: `true`/`false` and plain integers and decimals as such, text that
// starts with a quote, '[' or '{' as the TOML the user wrote, anything else as a string (so
// `10s` and `24G` need no quotes). Keys `gpool up` sets for each pool or server itself (the
// controller's socket, an agent's name, state and connection) are refused: changing them would
// break the pool. InvalidArgument names the argument and what is wrong.
Result<ConfigOverride> parseConfigOverride(const std::string& arg);

// `v` as a TOML basic string, quoted and escaped.
std::string tomlString(const std::string& v);

// A TOML document assembled key by key, that remembers which `--set` wrote each line.
class TomlDraft {
 public:
  // Sets `path` (sections..., key) to `toml_value`, replacing an earlier value of the same key;
  // `origin` is the `--set` argument that asked for it ("" for gpool up's own keys).
  void set(const std::vector<std::string>& path, const std::string& toml_value,
           const std::string& origin = "");
  // The document: `comment` lines first (each prefixed with "# "), then the root's keys and one
  // table per section, in the order sections were first set.
  std::string text(const std::string& comment) const;
  // Rewrites a reader's error message for a file holding text(comment): every line that starts
  // with "<file>:<line>:" of a line written for a `--set` becomes "--set <arg>: <rest>".
  std::string explain(const std::string& message, const std::string& file,
                      const std::string& comment) const;

 private:
  struct Entry {
    std::string key;
    std::string value;
    std::string origin;
  };
  struct Table {
    std::vector<std::string> path;
    std::vector<Entry> entries;
  };
  // Lines of text(comment), 1-based, and the `--set` behind each (empty: none).
  std::vector<std::string> lineOrigins(const std::string& comment) const;

  std::vector<Table> tables_;  // tables_[0] is the root
};

}  // namespace gpool::cli
