#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/job_spec.h"
#include "common/result.h"

// The pure half of `gpool submit`: the flag table, `#GPOOL` directive lines read the way sbatch
// reads `#SBATCH`, and the translation of flag text into an api::JobSpec. Nothing here talks to
// the controller, so every rule is unit-tested directly (tests/cli/submit_options_test.cc).
//
// Thread-safety: plain functions over values; re-entrant.
namespace gpool::cli {

// One submit flag. `name` is the long name without dashes ("gpus"); `takes_value` is false for
// switches such as --preemptible; a `repeatable` flag keeps every occurrence (--export, --after),
// any other keeps its last one.
struct SubmitFlagDef {
  const char* name;
  const char* value_name;  // "N", "SIZE", ... for --help; nullptr for switches
  bool repeatable;
  const char* help;
};
const std::vector<SubmitFlagDef>& submitFlagDefs();
// The definition of `name` (no dashes), or nullptr.
const SubmitFlagDef* findSubmitFlag(std::string_view name);

// "unknown flag '--gpu' (did you mean '--gpus'?)" for `flag` (without dashes).
std::string unknownSubmitFlag(std::string_view flag);

// One occurrence of a flag: its text and where it came from, for messages ("--gpus" on the
// command line, "train.sh:3" for a directive).
struct FlagValue {
  std::string value;  // "true" for a switch
  std::string where;
};

// The submit flags as text, before any parsing: flag name (no dashes) -> occurrences in order.
struct SubmitFlags {
  std::map<std::string, std::vector<FlagValue>> values;

  // Adds an occurrence; a flag that is not repeatable keeps only the latest.
  void add(const std::string& name, FlagValue value);
  // Every flag set in `overrides` replaces all of this object's occurrences of that flag (the
  // command line wins over the script's directives, also for repeatable flags, as in sbatch).
  void overrideWith(const SubmitFlags& overrides);
};

// Reads the `#GPOOL` directives of a batch script: lines that start with "#GPOOL" (in column 0)
// before the first command line; blank lines, the "#!" line and other comments may come in
// between. Each directive holds flags exactly as on the command line ("--gpus 2", "--time=4h",
// quotes allowed, a word starting with '#' begins a trailing comment). `path` names the script
// in errors: "train.sh:3: unknown flag '--gpu' (did you mean '--gpus'?)". A "#GPOOL" line after
// the first command is ignored, as sbatch does.
Result<SubmitFlags> parseDirectives(std::string_view script, std::string_view path);

// Splits one directive's text into words: whitespace separates, '...' and "..." quote, a
// backslash escapes the next character outside single quotes, and an unquoted word that starts
// with '#' ends the line. InvalidArgument on an unterminated quote.
Result<std::vector<std::string>> splitDirectiveWords(std::string_view text);

// What `gpool submit` sends: the spec and the group to charge (a query parameter of the API).
struct SubmitPlan {
  api::JobSpec spec;
  std::string group;
};

// Where buildSubmitPlan looks things up, so tests control it.
struct SubmitContext {
  std::string cwd;  // the default working directory (absolute)
  std::function<std::optional<std::string>(const std::string&)> getenv;
  // The job's name without --name (a script's file name); empty: command[0]'s file name.
  std::string default_name;
  // An interactive allocation (gpool alloc): the command may be empty (the job then only holds
  // its resources until cancelled or its time limit).
  bool interactive = false;
};

// Parses every flag with common/units.h and the api parsers and checks the result with
// api::validateJobSpec. Errors start with where the bad value came from, e.g.
// "--gpus: GPU count '1.5' ..." or "train.sh:4: --time: duration 'x' ...".
Result<SubmitPlan> buildSubmitPlan(const SubmitFlags& flags, std::vector<std::string> command,
                                   const SubmitContext& context);

// The command that runs a batch script: the interpreter of its "#!" line (or /bin/sh), the
// script's absolute path, then `args`. The script is read on the node when the job starts, so it
// must be on a file system the node shares (unlike sbatch, which copies it).
std::vector<std::string> scriptCommand(std::string_view script, const std::string& absolute_path,
                                       const std::vector<std::string>& args);

}  // namespace gpool::cli
