#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"
#include "store/store_address.h"

// Backups of the SQLite store (docs/admin-guide.md, "Backups"): `gpool admin backup`, `verify`
// and `restore`, and gpoold's backup timer, all go through these functions.
//
// A backup file is one file:
//
//   gpool-backup 1\n
//   {"format":1,"schema_version":7,"created_us":...,"size":N,"sha256":"...",...}\n
//   N bytes: a SQLite database (the store as of one committed transaction)
//
// The header says what the copy is and how to check it; the database follows it unchanged, so
// that nothing but these lines has to be stripped to get the store back. A file is written under
// a temporary name in the destination's folder, synced and renamed into place: a reader sees a
// whole backup or none.
//
// PostgreSQL stores are backed up with PostgreSQL's own tools (pg_dump / pg_restore; see the
// admin guide); these functions refuse a PostgreSQL connection string.
namespace gpool::store {

inline constexpr const char* kBackupMagic = "gpool-backup 1";

struct BackupHeader {
  int32_t format = 1;
  int32_t schema_version = 0;
  TimePoint created{};
  std::string source;  // the store file it was taken from
  uint64_t size = 0;   // bytes of the database after the header
  std::string sha256;  // hex digest of those bytes
  // The store's incarnation when it was taken (docs/store.md); empty for stores written before
  // incarnations existed.
  std::string incarnation;
};

// The header as the file holds it (line 2), for `--json` output too.
nlohmann::json backupHeaderJson(const BackupHeader& header);

// What `gpool admin verify` prints: the header, checked, and what the database holds.
struct BackupSummary {
  BackupHeader header;
  std::vector<std::pair<std::string, int64_t>> jobs_by_state;  // by state name
  int64_t jobs = 0;
  int64_t max_job_id = 0;  // 0: no job
  int64_t users = 0;
  int64_t groups = 0;
  int64_t nodes = 0;
  std::optional<TimePoint> last_event;  // the latest job event's time
};

// Copies the SQLite store at `store_path` into the backup file `backup_path` while gpoold (or
// anyone) keeps writing to it. The copy is SQLite's online backup API run in one step, i.e. one
// read transaction: in WAL mode it takes no lock that a writer or another reader waits for, so
// gpoold's API is never blocked by it (it competes for CPU and disk only; bench/controller_bench
// --backup measures the effect). The copy is of the last transaction committed when it started.
// The source is opened read-only; files SQLite creates beside it (-wal, -shm) get the store's
// owner when run as root, so gpoold can still open them.
//
// Errors: NotFound when the store does not exist, InvalidArgument for a PostgreSQL store,
// IoError when the destination cannot be written (nothing is left behind: no partial file under
// either name).
Result<BackupHeader> backupSqliteStore(const std::string& store_path,
                                       const std::string& backup_path, TimePoint now);

// Reads and checks a backup file: the header, the database's size and checksum, SQLite's
// integrity check, and that the schema version is one this binary can open (older ones are
// migrated by restore). InvalidArgument naming what is wrong (not a backup file, truncated by
// N bytes, checksum mismatch, corrupt database, schema newer than this binary) and where.
// `scratch_dir` holds the extracted database while it is checked (removed after).
Result<BackupSummary> verifyBackup(const std::string& backup_path, const std::string& scratch_dir);

// An advisory lock on a SQLite store file (flock on the file itself, independent of SQLite's
// own POSIX locks): gpoold holds it shared while it runs, restore takes it exclusively, so a
// restore never replaces the file under a running controller. Movable; released when destroyed.
class StoreFileLock {
 public:
  StoreFileLock() = default;
  StoreFileLock(StoreFileLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  StoreFileLock& operator=(StoreFileLock&& other) noexcept;
  StoreFileLock(const StoreFileLock&) = delete;
  StoreFileLock& operator=(const StoreFileLock&) = delete;
  ~StoreFileLock();

  // Takes the lock without waiting, creating the file (empty) when it does not exist.
  // FailedPrecondition when another process holds it in the other mode (exclusive: anyone),
  // IoError when the file cannot be opened.
  static Result<StoreFileLock> acquire(const std::string& store_path, bool exclusive);

 private:
  explicit StoreFileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

struct RestoreReport {
  BackupSummary backup;           // what was restored, as verifyBackup saw it
  int32_t restored_version = 0;   // the schema version after migrating
  std::string kept_aside;         // where the store that was replaced now is; empty if none
  int64_t next_job_id_floor = 0;  // new job ids start above this
  std::string incarnation;        // the restored store's new incarnation
};

// Replaces the SQLite store at `store_path` with the backup at `backup_path`. gpoold must be
// stopped (FailedPrecondition naming the store when it holds StoreFileLock). Steps, each checked
// before anything changes: verifyBackup; the database is extracted beside the store and opened
// once (migrating an older schema, each migration in its own transaction); the id sequences
// (jobs, events, usage records, tokens, alerts) are moved past the highest ids the replaced store
// had handed out, so no id is ever issued twice; the store is marked as a new incarnation. Only
// then is the current store (with its -wal/-shm) renamed aside to
// `<store>.before-restore-<UTC time>` and the restored file renamed into place. On any error
// before that last step the current store is untouched.
Result<RestoreReport> restoreSqliteStore(const std::string& backup_path,
                                         const std::string& store_path, TimePoint now);

// Backup files in `dir` that gpoold's timer wrote (gpool-YYYYMMDDTHHMMSSZ.backup), oldest
// first; and the name for one taken at `when`.
std::vector<std::string> timerBackups(const std::string& dir);
std::string timerBackupName(TimePoint when);

// Writes a new timer backup of `store_path` into `dir` and removes the oldest timer backups
// beyond `keep` (other files in `dir` are never touched). Returns the new file's path.
Result<std::string> takeTimerBackup(const std::string& store_path, const std::string& dir, int keep,
                                    TimePoint now);

}  // namespace gpool::store
