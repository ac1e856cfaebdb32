#include "cli/cli.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>

#include "cli/admin_commands.h"
#include "cli/backup_commands.h"
#include "cli/client_commands.h"
#include "cli/sim_command.h"
#include "cli/token_commands.h"
#include "cli/top_command.h"
#include "cli/up_command.h"
#include "cli/watch_command.h"
#include "common/status.h"

namespace gpool::cli {

int runCli(const std::vector<std::string>& args) {
  CLI::App app{
      "gpool: a shared pool of GPUs across servers, with enforced slices and fair "
      "scheduling"};
  app.name("gpool");
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gpool ") + GPOOL_VERSION);
  // Global options may also follow the subcommand (`gpool queue --json`); subcommands inherit
  // this setting when they are created, so it comes first.
  app.fallthrough();

  auto global = std::make_shared<GlobalOptions>();
  global->socket = defaultSocketPath();
  app.add_option("--socket", global->socket,
                 "the controller's Unix socket (default: $GPOOL_SOCKET, else "
                 "/run/gpool/gpoold.sock); several controllers: a comma-separated list")
      ->type_name("PATH")
      ->each([global](const std::string&) { global->socket_given = true; });
  app.add_flag("--json", global->json, "print JSON (the server's answer) instead of tables");
  // Remote use: the controller's TLS listener with an API token instead of the Unix socket.
  if (const char* env = std::getenv("GPOOL_SERVER")) global->server = env;
  if (const char* env = std::getenv("GPOOL_CA")) global->ca_file = env;
  app.add_option("--server", global->server,
                 "the controller's TLS listener instead of the socket (default: $GPOOL_SERVER); "
                 "several controllers: a comma-separated list, gpool follows the leader")
      ->type_name("HOST:PORT")
      ->each([global](const std::string&) { global->server_given = true; });
  app.add_option("--ca", global->ca_file,
                 "PEM file of the CA that signed gpoold's certificate (default: $GPOOL_CA, else "
                 "the system's trust store)")
      ->type_name("FILE");
  app.add_option("--token-file", global->token_file,
                 "file holding your API token, mode 0600 (default: $GPOOL_TOKEN, else "
                 "~/.config/gpool/token)")
      ->type_name("FILE");

  auto* version = app.add_subcommand("version", "Print the version of this gpool build");
  version->callback([] { std::printf("gpool %s\n", GPOOL_VERSION); });
  registerClientCommands(app, global);
  registerAdminCommands(app, global);
  registerBackupCommands(app, global);
  registerTopCommand(app, global);
  registerSimCommands(app);
  registerUpCommands(app);
  registerWatchCommands(app, global);
  registerTokenCommands(app, global);

  // CLI11 reports usage errors through exceptions; they stop here and become exit codes.
  try {
    std::vector<std::string> parsed = splitSubmitArguments(args, global.get());
    std::vector<std::string> reversed(parsed.rbegin(), parsed.rend());
    app.parse(reversed);
  } catch (const CLI::RuntimeError& e) {
    // A command that failed after reporting on stderr; its code follows docs/cli-exit-codes.md.
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : exitCodeFor(StatusCode::kInvalidArgument);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpool: %s\n", e.what());
    return exitCodeFor(StatusCode::kInternal);
  }
  return 0;
}

}  // namespace gpool::cli
