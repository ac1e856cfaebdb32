#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/status.h"

// Configuration files in TOML, read the same way by every gpool process (gpoold, gpool-agent,
// the CLI). Every key is validated: a key of the wrong type, out of range or with a bad unit is
// an error naming the file, the line and the key; a key that no code asked for is an error too
// (with a "did you mean" hint), so a misspelt setting never silently does nothing.
//
//   GPOOL_ASSIGN_OR_RETURN(config::ConfigFile file, config::ConfigFile::load(path));
//   config::ConfigSection ctl = file.root().section("controller");
//   int64_t port = ctl.getInt("listen_port", 6817, 1, 65535);
//   int64_t heartbeat = ctl.getDuration("heartbeat_interval", 5);
//   for (config::ConfigSection n : file.root().sectionArray("node")) { ... }
//   GPOOL_RETURN_IF_ERROR(file.finish());  // every error and unknown key, one per line
//
// Errors read "gpoold.toml:12: key 'controller.listen_port': expected an integer, got a
// string". Getters never fail: on a bad or missing value they record the error and return the
// default, so a process reads its whole configuration and reports every problem at once.
//
// toml++ stays inside config.cc; this header does not include it.
//
// Thread-safety: a ConfigFile and its sections are used by one thread (at start-up).
namespace gpool::config {

class ConfigSection;

// What `load` does when the file does not exist.
enum class MissingFile {
  kError,        // IoError naming the path
  kUseDefaults,  // behave as an empty file, so every getter returns its default
};

// A parsed TOML document. Sections are views into it and must not outlive it.
class ConfigFile {
 public:
  // Reads and parses `path`. Syntax errors are InvalidArgument "<path>:<line>:<column>: <why>";
  // an unreadable file is IoError.
  static Result<ConfigFile> load(const std::string& path,
                                 MissingFile missing = MissingFile::kError);
  // Parses `text`; `source_name` stands for the file name in messages.
  static Result<ConfigFile> parse(std::string_view text, std::string_view source_name);

  ConfigFile(ConfigFile&& other) noexcept;
  ConfigFile& operator=(ConfigFile&& other) noexcept;
  ~ConfigFile();

  // The top-level table.
  ConfigSection root();

  // OK when no getter recorded an error and every key of the file was read; otherwise
  // InvalidArgument whose message lists every problem, one per line, in file order.
  // Call after reading everything.
  Status finish();

  // Errors recorded so far (without the unknown-key check of `finish`).
  const std::vector<std::string>& errors() const;
  const std::string& sourceName() const;

  struct Impl;

 private:
  explicit ConfigFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A table of the file: the root, a [section], or one element of an [[array]] of tables. A
// missing section reads as empty. Keys are bare TOML keys ("listen_port"); dotted keys are
// sections.
class ConfigSection {
 public:
  // "controller", "node[2]", or "" for the root.
  const std::string& path() const;
  // True when the section exists in the file.
  bool exists() const;
  // True when `key` is present. Does not count as reading it.
  bool has(std::string_view key) const;

  std::string getString(std::string_view key, std::string_view default_value = "");
  // Records "required key is missing" if absent.
  std::string requireString(std::string_view key);
  // An integer in [min, max].
  int64_t getInt(std::string_view key, int64_t default_value, int64_t min = INT64_MIN,
                 int64_t max = INT64_MAX);
  int64_t requireInt(std::string_view key, int64_t min = INT64_MIN, int64_t max = INT64_MAX);
  bool getBool(std::string_view key, bool default_value);
  // A float in [min, max]; integers are accepted too.
  double getDouble(std::string_view key, double default_value, double min, double max);

  // Quantities (common/units.h). Durations and memory sizes are strings with units ("90s",
  // "2h", "1-00:00:00"; "24G", "512M"); compute shares are "25%" strings or floats (0.25);
  // CPU counts are integers, floats or strings ("8", 0.5, "500m").
  int64_t getDuration(std::string_view key, int64_t default_seconds);
  uint64_t getMemoryMiB(std::string_view key, uint64_t default_mib);
  uint32_t getComputeShare(std::string_view key, uint32_t default_thousandths);
  uint64_t getCpuMillis(std::string_view key, uint64_t default_millis);

  // An array of strings.
  std::vector<std::string> getStringList(std::string_view key,
                                         std::vector<std::string> default_value = {});
  // A sub-table whose values are all strings (e.g. [agent.labels]); its keys are free-form.
  std::map<std::string, std::string> getStringMap(std::string_view key);

  // A sub-table. Absent: an empty section. Present but not a table: an error, and an empty
  // section.
  ConfigSection section(std::string_view key);
  // An array of tables ([[key]]). Absent: empty. Elements have paths "key[i]".
  std::vector<ConfigSection> sectionArray(std::string_view key);

  // Records an error for `key` from the caller's own check, with the key's line when present:
  // "<file>:<line>: key '<path>.<key>': <message>".
  void fail(std::string_view key, std::string_view message);

 private:
  friend class ConfigFile;
  ConfigSection(ConfigFile::Impl* file, size_t index) : file_(file), index_(index) {}

  ConfigFile::Impl* file_;
  size_t index_;  // into the file's list of sections
};

}  // namespace gpool::config
