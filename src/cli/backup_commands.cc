#include "cli/backup_commands.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/api_client.h"
#include "cli/client_commands.h"
#include "common/clock.h"
#include "common/status.h"
#include "controller/controller_config.h"
#include "store/backup.h"
#include "store/store.h"

namespace gpool::cli {
namespace {

using nlohmann::json;

const std::string kFooter =
    "These commands work on the store's file on this machine, not through gpoold: run them on\n"
    "the controller's machine as root or the gpool user. The store is controller.store of\n"
    "--config (default /etc/gpool/gpoold.toml), or --store. A PostgreSQL store is backed up\n"
    "with pg_dump instead (docs/admin-guide.md, \"Backups\").\n"
    "Exit codes: 0 ok, 2 bad or corrupt file, 3 not found, 5 wrong state (gpoold running, newer\n"
    "schema), 1 I/O error (docs/cli-exit-codes.md)\n";

struct StoreArgs {
  std::string file;
  std::string config = "/etc/gpool/gpoold.toml";
  std::string store;
};

Result<std::string> storeOf(const StoreArgs& a) {
  if (!a.store.empty()) return a.store;
  Result<controller::ControllerSettings> s = controller::readControllerSettings(a.config);
  if (!s.ok()) {
    return Status(s.status().code(), "cannot find the store through gpoold's configuration (" +
                                         s.status().message() + "); name it with --store");
  }
  return s->store;
}

std::string utc(TimePoint t) {
  std::time_t secs = static_cast<std::time_t>(toUnixMicros(t) / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

json summaryJson(const store::BackupSummary& s) {
  json states = json::object();
  for (const auto& [state, n] : s.jobs_by_state)
    states[state] = n;
  json j{{"header", store::backupHeaderJson(s.header)},
         {"jobs", s.jobs},
         {"jobs_by_state", states},
         {"max_job_id", s.max_job_id},
         {"users", s.users},
         {"groups", s.groups},
         {"nodes", s.nodes},
         {"integrity", "ok"},
         {"checksum", "ok"}};
  if (s.last_event) j["last_event_us"] = toUnixMicros(*s.last_event);
  return j;
}

void printSummary(const store::BackupSummary& s) {
  std::string states;
  for (const auto& [state, n] : s.jobs_by_state)
    states += (states.empty() ? "" : ", ") + state + " " + std::to_string(n);
  std::cout << "  taken         " << utc(s.header.created) << " from " << s.header.source << "\n"
            << "  schema        version " << s.header.schema_version
            << " (this gpool: " << store::kSchemaVersion << ")\n"
            << "  size          " << mib(s.header.size) << ", SHA-256 " << s.header.sha256
            << " (checked)\n"
            << "  integrity     ok\n"
            << "  jobs          " << s.jobs << (states.empty() ? "" : " (" + states + ")")
            << ", highest id " << s.max_job_id << "\n"
            << "  users         " << s.users << ", groups " << s.groups << ", nodes " << s.nodes
            << "\n"
            << "  last event    " << (s.last_event ? utc(*s.last_event) : "-") << "\n";
  if (!s.header.incarnation.empty()) {
    std::cout << "  incarnation   " << s.header.incarnation << "\n";
  }
}

Status runBackup(const GlobalOptions& global, const StoreArgs& a) {
  GPOOL_ASSIGN_OR_RETURN(std::string store_path, storeOf(a));
  GPOOL_ASSIGN_OR_RETURN(store::BackupHeader h,
                         store::backupSqliteStore(store_path, a.file, realClock().now()));
  if (global.json) {
    json j = store::backupHeaderJson(h);
    j["file"] = a.file;
    printJson(j);
    return Status::ok();
  }
  std::cout << "Backup written: " << a.file << "\n"
            << "  store         " << store_path << "\n"
            << "  taken         " << utc(h.created) << "\n"
            << "  schema        version " << h.schema_version << "\n"
            << "  size          " << mib(h.size) << ", SHA-256 " << h.sha256 << "\n";
  return Status::ok();
}

std::string scratchDir() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

Status runVerify(const GlobalOptions& global, const std::string& file) {
  GPOOL_ASSIGN_OR_RETURN(store::BackupSummary s, store::verifyBackup(file, scratchDir()));
  if (global.json) {
    json j = summaryJson(s);
    j["file"] = file;
    j["ok"] = true;
    printJson(j);
    return Status::ok();
  }
  std::cout << "OK: " << file << " is a whole gpool backup\n";
  printSummary(s);
  return Status::ok();
}

Status runRestore(const GlobalOptions& global, const StoreArgs& a) {
  GPOOL_ASSIGN_OR_RETURN(std::string store_path, storeOf(a));
  GPOOL_ASSIGN_OR_RETURN(store::RestoreReport r,
                         store::restoreSqliteStore(a.file, store_path, realClock().now()));
  if (global.json) {
    json j{{"file", a.file},
           {"store", store_path},
           {"backup", summaryJson(r.backup)},
           {"schema_version", r.restored_version},
           {"kept_aside", r.kept_aside},
           {"next_job_id_above", r.next_job_id_floor}};
    if (!r.incarnation.empty()) j["incarnation"] = r.incarnation;
    printJson(j);
    return Status::ok();
  }
  std::cout << "Restored " << a.file << " into " << store_path << "\n";
  printSummary(r.backup);
  if (r.restored_version != r.backup.header.schema_version) {
    std::cout << "  migrated      schema version " << r.backup.header.schema_version << " -> "
              << r.restored_version << "\n";
  }
  std::cout << "  new job ids   above " << r.next_job_id_floor << "\n";
  if (!r.incarnation.empty()) std::cout << "  incarnation   " << r.incarnation << " (new)\n";
  std::cout << "  kept aside    "
            << (r.kept_aside.empty() ? "- (there was no store)" : r.kept_aside) << "\n"
            << "Start gpoold now; agents reconnecting report their tasks (docs/admin-guide.md, "
               "\"Backups\").\n";
  return Status::ok();
}

void addStoreOptions(CLI::App* cmd, StoreArgs& a) {
  cmd->add_option("--config", a.config,
                  "gpoold's configuration, to find its store (default /etc/gpool/gpoold.toml)");
  cmd->add_option("--store", a.store, "the SQLite store file itself (instead of --config)")
      ->type_name("PATH");
}

}  // namespace

void registerBackupCommands(CLI::App& app, std::shared_ptr<GlobalOptions> global) {
  auto* admin = app.add_subcommand(
      "admin", "The controller's store: backup, verify and restore (on the controller's machine)");
  admin->require_subcommand(1);
  admin->footer(kFooter);
  {
    auto a = std::make_shared<StoreArgs>();
    auto* backup = admin->add_subcommand(
        "backup",
        "Write a consistent copy of the store to FILE while gpoold serves (checksum, schema "
        "version; written atomically)");
    backup->add_option("FILE", a->file, "the backup file to write (replaced atomically)")
        ->required();
    addStoreOptions(backup, *a);
    backup->footer(kFooter);
    backup->callback(reporting([global, a] { return runBackup(*global, *a); }));
  }
  {
    auto file = std::make_shared<std::string>();
    auto* verify = admin->add_subcommand(
        "verify", "Check a backup (checksum, integrity, schema) and summarise what it holds");
    verify->add_option("FILE", *file, "the backup file")->required();
    verify->footer(kFooter);
    verify->callback(reporting([global, file] { return runVerify(*global, *file); }));
  }
  {
    auto a = std::make_shared<StoreArgs>();
    auto* restore = admin->add_subcommand(
        "restore",
        "Replace the store with a backup (gpoold stopped): checked first, the current store kept "
        "aside, a new incarnation");
    restore->add_option("FILE", a->file, "the backup file")->required();
    addStoreOptions(restore, *a);
    restore->footer(kFooter);
    restore->callback(reporting([global, a] { return runRestore(*global, *a); }));
  }
}

}  // namespace gpool::cli
