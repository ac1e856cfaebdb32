#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace CLI {
class App;
}

// The user commands that talk to gpoold's REST API over its Unix socket (docs/cli.md):
// submit, queue, show, cancel, nodes. Identity comes from the kernel's peer credentials, so
// these commands send no token.
namespace gpool::cli {

// Options every client command shares; filled by the parser before a command's callback runs.
struct GlobalOptions {
  std::string socket;  // the controller's Unix socket
  bool json = false;   // print the server's JSON instead of tables
  // How many arguments followed the first "--" of the command line (none: no "--"). `gpool
  // submit -- CMD` runs CMD while `gpool submit FILE -- ARGS` reads FILE as a batch script; the
  // parser drops the "--", so submit tells the two apart by counting.
  std::optional<size_t> args_after_double_dash;
};

// $GPOOL_SOCKET when set and non-empty, else /run/gpool/gpoold.sock.
std::string defaultSocketPath();

// Adds the client commands to `app`. A failing command prints "gpool: <message>" on stderr and
// ends through CLI::RuntimeError carrying exitCodeFor(code) (docs/cli-exit-codes.md).
void registerClientCommands(CLI::App& app, std::shared_ptr<GlobalOptions> global);

}  // namespace gpool::cli
