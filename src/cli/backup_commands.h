#pragma once

#include <memory>

namespace CLI {
class App;
}

// `gpool admin backup FILE`, `gpool admin verify FILE` and `gpool admin restore FILE`: backups of
// the controller's SQLite store (docs/admin-guide.md, "Backups"). Unlike the other commands they
// do not talk to gpoold: they work on the store's file on this machine (found through gpoold's
// configuration, or --store), through store/backup.h. A backup is taken while gpoold serves; a
// restore needs gpoold stopped and refuses otherwise.
namespace gpool::cli {

struct GlobalOptions;

// Adds `admin` and its subcommands to `app`. A failing command prints "gpool: <message>" on
// stderr and ends through CLI::RuntimeError carrying exitCodeFor(code) (docs/cli-exit-codes.md).
void registerBackupCommands(CLI::App& app, std::shared_ptr<GlobalOptions> global);

}  // namespace gpool::cli
