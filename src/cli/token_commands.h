#pragma once

#include <memory>

namespace CLI {
class App;
}

// `gpool token` (create, list, revoke: API tokens for the controller's TLS listener) and
// `gpool join-token create` (admins: an agent's way in), over POST/GET /v1/tokens,
// DELETE /v1/tokens/{id} and POST /v1/join-tokens (docs/cli.md, docs/controller.md). Like every
// command they reach gpoold through ApiClient: over the Unix socket, or with --server over TLS.
namespace gpool::cli {

struct GlobalOptions;

// Adds the commands to `app`. A failing command prints "gpool: <message>" on stderr and ends
// through CLI::RuntimeError carrying exitCodeFor(code) (docs/cli-exit-codes.md).
void registerTokenCommands(CLI::App& app, std::shared_ptr<GlobalOptions> global);

}  // namespace gpool::cli
