#pragma once

#include <string>
#include <vector>

namespace gpool::cli {

// Runs the `gpool` command line with `args` (argv without the program name) and returns the
// process exit code (see docs/cli-exit-codes.md). Never throws; output goes to stdout, errors
// to stderr.
int runCli(const std::vector<std::string>& args);

}  // namespace gpool::cli
