#pragma once

#include <memory>

namespace CLI {
class App;
}

// The admin and account commands of `gpool` (docs/cli.md): user, group, quota, qos, drain,
// resume, usage, audit, config check, and the caller's own view (account, quota --mine, usage
// --mine). They talk to gpoold's REST API like the client commands (client_commands.h), except
// `config check`, which reads a file with the same reader as gpoold.
namespace gpool::cli {

struct GlobalOptions;

// Adds the commands to `app`. A failing command prints "gpool: <message>" on stderr and ends
// through CLI::RuntimeError carrying exitCodeFor(code) (docs/cli-exit-codes.md). A permission
// denied by gpoold names the role the command needs.
void registerAdminCommands(CLI::App& app, std::shared_ptr<GlobalOptions> global);

}  // namespace gpool::cli
