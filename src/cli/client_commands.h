#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

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
  // The controller's TLS listener (HOST:PORT) instead of the socket; empty: the socket.
  std::string server;
  std::string ca_file;     // --ca: the CA of gpoold's certificate; empty: the system's
  std::string token_file;  // --token-file; empty: $GPOOL_TOKEN, else ~/.config/gpool/token
  // Given on the command line (not from the environment): an explicit --socket beats
  // $GPOOL_SERVER; both flags at once are an error (see effectiveServer).
  bool socket_given = false;
  bool server_given = false;
  // What follows submit's options: the script and its arguments, or (after "--") the command.
  // CLI11 cannot stop at the first positional of a subcommand, so splitSubmitArguments takes
  // them off the command line before CLI11 parses the rest.
  std::vector<std::string> submit_args;
  bool submit_command = false;  // submit_args came after "--"
  std::string submit_error;     // an unknown submit flag, reported by submit
};

// When `args` (argv without the program name) runs `gpool submit`, moves what follows submit's
// options (from the first argument that is not an option, or after "--") into `global` and
// returns the arguments left for the parser; otherwise returns `args`. Like sbatch, everything
// after the script belongs to the script.
std::vector<std::string> splitSubmitArguments(const std::vector<std::string>& args,
                                              GlobalOptions* global);

// $GPOOL_SOCKET when set and non-empty, else /run/gpool/gpoold.sock.
std::string defaultSocketPath();

// The server the command talks to over TLS: --server, else $GPOOL_SERVER unless --socket was
// given; empty for the Unix socket.
std::string effectiveServer(const GlobalOptions& global);

// Whether the global option `name` (without dashes: "socket", "server") takes a value.
bool globalOptionTakesValue(const std::string& name);

// The --help footer of the commands that reach gpoold (client and admin commands): the global
// options, then "Exit codes: <exit_codes> (docs/cli-exit-codes.md)".
std::string globalOptionsFooter(std::string_view exit_codes);

// Adds the client commands to `app`. A failing command prints "gpool: <message>" on stderr and
// ends through CLI::RuntimeError carrying exitCodeFor(code) (docs/cli-exit-codes.md).
void registerClientCommands(CLI::App& app, std::shared_ptr<GlobalOptions> global);

}  // namespace gpool::cli
