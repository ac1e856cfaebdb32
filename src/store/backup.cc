#include "store/backup.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "store/sqlite_store.h"

namespace gpool::store {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kChunk = 1 << 20;
constexpr size_t kMaxHeaderLine = 64 * 1024;

std::string errnoText() {
  return std::strerror(errno);
}

// A sqlite3 handle closed on scope exit.
struct Db {
  sqlite3* db = nullptr;
  ~Db() {
    if (db) sqlite3_close_v2(db);
  }
};

Status sqliteStatus(sqlite3* db, int rc, const std::string& what) {
  return Status::ioError(what + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
}

Status openDb(const std::string& path, int flags, Db& out) {
  int rc = sqlite3_open_v2(path.c_str(), &out.db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) return sqliteStatus(out.db, rc, "cannot open '" + path + "'");
  sqlite3_extended_result_codes(out.db, 1);
  sqlite3_busy_timeout(out.db, 5000);
  return Status::ok();
}

// Rows of a query with no parameters, every value as text ("" for NULL).
Result<std::vector<std::vector<std::string>>> queryText(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return sqliteStatus(db, rc, "'" + sql + "'");
  std::vector<std::vector<std::string>> rows;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    auto& row = rows.emplace_back();
    for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
      const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(stmt, c));
      row.emplace_back(t ? t : "");
    }
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return sqliteStatus(db, rc, "'" + sql + "'");
  return rows;
}

Result<int64_t> queryInt(sqlite3* db, const std::string& sql) {
  GPOOL_ASSIGN_OR_RETURN(auto rows, queryText(db, sql));
  if (rows.empty() || rows[0].empty() || rows[0][0].empty()) return int64_t{0};
  return static_cast<int64_t>(std::stoll(rows[0][0]));
}

bool hasTable(sqlite3* db, const std::string& table) {
  auto n = queryInt(
      db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '" + table + "'");
  return n.ok() && *n > 0;
}

// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Status writeAll(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Status::ioError("cannot write '" + path + "': " + errnoText());
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::ok();
}

Status syncDir(const std::string& dir) {
  Fd d;
  d.fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d.fd < 0 || ::fsync(d.fd) != 0) {
    return Status::ioError("cannot sync the folder '" + dir + "': " + errnoText());
  }
  return Status::ok();
}

std::string parentOf(const std::string& path) {
  std::string p = fs::path(path).parent_path().string();
  return p.empty() ? "." : p;
}

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const char* data, size_t n) { EVP_DigestUpdate(ctx_, data, n); }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, digest, &len);
    static const char* kHex = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < len; ++i) {
      out += kHex[digest[i] >> 4];
      out += kHex[digest[i] & 15];
    }
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

// Reads `path` whole in chunks, calling `sink` for each.
Status readChunks(const std::string& path, const std::function<Status(const char*, size_t)>& sink) {
  Fd in;
  in.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in.fd < 0) return Status::ioError("cannot read '" + path + "': " + errnoText());
  std::vector<char> buf(kChunk);
  while (true) {
    ssize_t r = ::read(in.fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::ioError("cannot read '" + path + "': " + errnoText());
    if (r == 0) return Status::ok();
    GPOOL_RETURN_IF_ERROR(sink(buf.data(), static_cast<size_t>(r)));
  }
}

std::string utcStamp(TimePoint t, bool with_millis) {
  int64_t us = toUnixMicros(t);
  std::time_t secs = static_cast<std::time_t>(us / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%S", &tm);
  std::string out = buf;
  if (with_millis) {
    char ms[8];
    std::snprintf(ms, sizeof ms, ".%03d", static_cast<int>((us / 1000) % 1000));
    out += ms;
  }
  return out + "Z";
}

void removeQuietly(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
}

void removeDatabase(const std::string& path) {
  for (const char* side : {"", "-wal", "-shm", "-journal"})
    removeQuietly(path + side);
}

// Files SQLite made beside a store that a root process opened (-wal, -shm) must stay the
// store's owner's, or gpoold (user gpool) can no longer open its own store.
void keepOwner(const std::string& store_path) {
  if (::geteuid() != 0) return;
  struct stat st {};
  if (::stat(store_path.c_str(), &st) != 0) return;
  for (const char* side : {"-wal", "-shm"}) {
    std::string p = store_path + side;
    struct stat sst {};
    if (::stat(p.c_str(), &sst) == 0 && (sst.st_uid != st.st_uid || sst.st_gid != st.st_gid)) {
      if (::chown(p.c_str(), st.st_uid, st.st_gid) != 0) {
        // Best effort: the store itself is unchanged; gpoold's error would name the file.
      }
    }
  }
}

// The store's incarnation (docs/store.md), or "" for a store without one.
std::string incarnationOf(sqlite3* db) {
  if (!hasTable(db, "store_incarnation")) return "";
  auto rows = queryText(db, "SELECT incarnation FROM store_incarnation WHERE id = 1");
  if (!rows.ok() || rows->empty()) return "";
  return (*rows)[0][0];
}

// Moves the AUTOINCREMENT sequence of `table` to at least `seq`: the next id is above it.
Status raiseSequence(sqlite3* db, const std::string& table, int64_t seq) {
  for (const char* sql : {"INSERT INTO sqlite_sequence (name, seq) SELECT ?1, ?2 WHERE NOT EXISTS "
                          "(SELECT 1 FROM sqlite_sequence WHERE name = ?1)",
                          "UPDATE sqlite_sequence SET seq = max(seq, ?2) WHERE name = ?1"}) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
    if (rc != SQLITE_OK) return sqliteStatus(db, rc, "cannot move the id sequence of " + table);
    sqlite3_bind_text(stmt, 1, table.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt, 2, seq);
    rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) return sqliteStatus(db, rc, "cannot move the id sequence of " + table);
  }
  return Status::ok();
}

// Marks the restored store as a new incarnation (docs/store.md, "Incarnations"): above the
// backup's own, above the replaced store's (`floor`) and at least `now` in Unix microseconds, the
// rule gpoold applies at every start, so that no placement of the restored store is ever taken
// for one made before the restore. A store without incarnations (older than the schema that
// added them) gets one from the migration, so the table is always there after SqliteStore::open;
// nothing to do when this binary predates it.
Status markNewIncarnation(sqlite3* db, int64_t floor, TimePoint now) {
  if (!hasTable(db, "store_incarnation")) return Status::ok();
  const char* sql =
      "UPDATE store_incarnation SET incarnation = max(incarnation + 1, ?1 + 1, ?2), since = ?2 "
      "WHERE id = 1";
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return sqliteStatus(db, rc, "cannot mark a new incarnation");
  sqlite3_bind_int64(stmt, 1, floor);
  sqlite3_bind_int64(stmt, 2, toUnixMicros(now));
  rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return sqliteStatus(db, rc, "cannot mark a new incarnation");
  return Status::ok();
}

}  // namespace

json backupHeaderJson(const BackupHeader& h) {
  json j{{"format", h.format},
         {"schema_version", h.schema_version},
         {"created_us", toUnixMicros(h.created)},
         {"source", h.source},
         {"size", h.size},
         {"sha256", h.sha256}};
  if (!h.incarnation.empty()) j["incarnation"] = h.incarnation;
  return j;
}

namespace {

Status headerError(const std::string& path, const std::string& why) {
  return Status::invalidArgument("backup '" + path + "': " + why);
}

// Reads the magic line and the header line of `path`; `fd` is left at the database's first
// byte and `file_size` holds the whole file's size.
Result<BackupHeader> readHeader(const std::string& path, int fd, uint64_t& header_bytes,
                                uint64_t& file_size) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::ioError("cannot stat '" + path + "': " + errnoText());
  file_size = static_cast<uint64_t>(st.st_size);
  std::string head(std::min<uint64_t>(file_size, kMaxHeaderLine + 64), '\0');
  ssize_t got = ::pread(fd, head.data(), head.size(), 0);
  if (got < 0) return Status::ioError("cannot read '" + path + "': " + errnoText());
  head.resize(static_cast<size_t>(got));
  if (head.empty()) return headerError(path, "the file is empty");
  size_t nl1 = head.find('\n');
  std::string magic = head.substr(0, nl1);
  if (magic != kBackupMagic) {
    if (head.rfind("SQLite format 3", 0) == 0) {
      return headerError(path,
                         "is a bare SQLite database, not a gpool backup (a copy made by sqlite3's "
                         ".backup or cp has no checksum; take backups with `gpool admin backup`)");
    }
    return headerError(
        path, "is not a gpool backup: it does not start with '" + std::string(kBackupMagic) + "'");
  }
  size_t nl2 = head.find('\n', nl1 + 1);
  if (nl2 == std::string::npos) {
    return headerError(path, "truncated inside its header (no end of the header line after " +
                                 std::to_string(head.size()) + " bytes)");
  }
  json j = json::parse(head.substr(nl1 + 1, nl2 - nl1 - 1), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return headerError(path, "its header (line 2) is not a JSON object");
  }
  BackupHeader h;
  for (const char* key : {"format", "schema_version", "created_us", "size", "sha256"}) {
    if (!j.contains(key)) return headerError(path, std::string("its header lacks '") + key + "'");
  }
  try {
    h.format = j.at("format").get<int32_t>();
    h.schema_version = j.at("schema_version").get<int32_t>();
    h.created = fromUnixMicros(j.at("created_us").get<int64_t>());
    h.source = j.value("source", "");
    h.size = j.at("size").get<uint64_t>();
    h.sha256 = j.at("sha256").get<std::string>();
    h.incarnation = j.value("incarnation", "");
  } catch (const json::exception& e) {
    return headerError(path, std::string("its header has a field of the wrong type: ") + e.what());
  }
  if (h.format != 1) {
    return headerError(
        path, "backup format " + std::to_string(h.format) + " is not one this gpool reads (1)");
  }
  header_bytes = nl2 + 1;
  if (::lseek(fd, static_cast<off_t>(header_bytes), SEEK_SET) < 0) {
    return Status::ioError("cannot seek in '" + path + "': " + errnoText());
  }
  return h;
}

// Checks the header, size and checksum of the backup at `path` and writes its database to
// `db_path` (synced). Nothing is left at `db_path` on error.
Result<BackupHeader> extractChecked(const std::string& path, const std::string& db_path) {
  Fd in;
  in.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in.fd < 0) {
    if (errno == ENOENT) return Status::notFound("backup '" + path + "' does not exist");
    return Status::ioError("cannot read backup '" + path + "': " + errnoText());
  }
  uint64_t header_bytes = 0;
  uint64_t file_size = 0;
  GPOOL_ASSIGN_OR_RETURN(BackupHeader h, readHeader(path, in.fd, header_bytes, file_size));
  const uint64_t body = file_size - header_bytes;
  if (body < h.size) {
    return headerError(path, "truncated: the header announces " + std::to_string(h.size) +
                                 " bytes of database, the file holds " + std::to_string(body) +
                                 " (" + std::to_string(h.size - body) + " missing)");
  }
  if (body > h.size) {
    return headerError(path, std::to_string(body - h.size) +
                                 " bytes follow the database the header announces (" +
                                 std::to_string(h.size) + " bytes): the file was appended to");
  }
  Fd out;
  out.fd = ::open(db_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out.fd < 0) return Status::ioError("cannot write '" + db_path + "': " + errnoText());
  auto fail = [&](Status s) -> Status {
    removeDatabase(db_path);
    return s;
  };
  Sha256 sha;
  std::vector<char> buf(kChunk);
  uint64_t left = h.size;
  while (left > 0) {
    ssize_t r = ::read(in.fd, buf.data(), static_cast<size_t>(std::min<uint64_t>(left, kChunk)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return fail(Status::ioError("cannot read backup '" + path + "': " + errnoText()));
    sha.update(buf.data(), static_cast<size_t>(r));
    if (Status s = writeAll(out.fd, buf.data(), static_cast<size_t>(r), db_path); !s.isOk()) {
      return fail(s);
    }
    left -= static_cast<uint64_t>(r);
  }
  std::string digest = sha.hex();
  if (digest != h.sha256) {
    return fail(headerError(path, "checksum mismatch: the database's SHA-256 is " + digest +
                                      ", the header says " + h.sha256 +
                                      " (the file was damaged or changed after it was written)"));
  }
  if (::fsync(out.fd) != 0) {
    return fail(Status::ioError("cannot sync '" + db_path + "': " + errnoText()));
  }
  return h;
}

// SQLite's integrity check, the schema version against the header's, and the summary.
Result<BackupSummary> inspect(const std::string& backup_path, const std::string& db_path,
                              const BackupHeader& header) {
  BackupSummary sum;
  sum.header = header;
  Db db;
  GPOOL_RETURN_IF_ERROR(openDb(db_path, SQLITE_OPEN_READWRITE, db));
  auto check = queryText(db.db, "PRAGMA integrity_check(20)");
  if (!check.ok()) {
    return headerError(backup_path, "the database inside is corrupt: " + check.status().message());
  }
  if (check->empty() || (*check)[0].empty() || (*check)[0][0] != "ok") {
    std::string problems;
    for (const auto& row : *check) {
      if (!problems.empty()) problems += "; ";
      problems += row.empty() ? "" : row[0];
    }
    return headerError(backup_path,
                       "the database inside fails SQLite's integrity check: " + problems);
  }
  if (!hasTable(db.db, "schema_version") || !hasTable(db.db, "jobs")) {
    return headerError(backup_path,
                       "the database inside is not a gpool store (no " +
                           std::string(hasTable(db.db, "jobs") ? "schema_version" : "jobs") +
                           " table)");
  }
  GPOOL_ASSIGN_OR_RETURN(int64_t version,
                         queryInt(db.db, "SELECT version FROM schema_version WHERE id = 1"));
  if (version != header.schema_version) {
    return headerError(backup_path, "the header says schema version " +
                                        std::to_string(header.schema_version) +
                                        ", the database inside is at " + std::to_string(version));
  }
  if (version > kSchemaVersion) {
    return Status::failedPrecondition(
        "backup '" + backup_path + "' has store schema version " + std::to_string(version) +
        ", newer than this gpool supports (" + std::to_string(kSchemaVersion) +
        "): verify and restore it with the gpool that wrote it, or a newer one");
  }
  GPOOL_ASSIGN_OR_RETURN(auto states, queryText(db.db,
                                                "SELECT state, count(*) FROM jobs GROUP BY state "
                                                "ORDER BY state"));
  for (const auto& row : states) {
    int64_t n = std::stoll(row[1]);
    sum.jobs_by_state.emplace_back(row[0], n);
    sum.jobs += n;
  }
  GPOOL_ASSIGN_OR_RETURN(sum.max_job_id, queryInt(db.db, "SELECT max(id) FROM jobs"));
  GPOOL_ASSIGN_OR_RETURN(sum.users, queryInt(db.db, "SELECT count(*) FROM users"));
  GPOOL_ASSIGN_OR_RETURN(sum.groups, queryInt(db.db, "SELECT count(*) FROM user_groups"));
  GPOOL_ASSIGN_OR_RETURN(sum.nodes, queryInt(db.db, "SELECT count(*) FROM nodes"));
  GPOOL_ASSIGN_OR_RETURN(auto last, queryText(db.db, "SELECT max(time) FROM job_events"));
  if (!last.empty() && !last[0][0].empty()) {
    sum.last_event = fromUnixMicros(std::stoll(last[0][0]));
  }
  return sum;
}

// Writes the backup container (header + the database at `db_path`) to `out_path`, synced.
Status writeContainer(const std::string& db_path, const std::string& out_path, BackupHeader& h) {
  Sha256 sha;
  uint64_t size = 0;
  GPOOL_RETURN_IF_ERROR(readChunks(db_path, [&](const char* data, size_t n) {
    sha.update(data, n);
    size += n;
    return Status::ok();
  }));
  h.size = size;
  h.sha256 = sha.hex();
  Fd out;
  // 0600: a backup holds token hashes and every user's jobs.
  out.fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (out.fd < 0) return Status::ioError("cannot write '" + out_path + "': " + errnoText());
  std::string head = std::string(kBackupMagic) + "\n" + backupHeaderJson(h).dump() + "\n";
  GPOOL_RETURN_IF_ERROR(writeAll(out.fd, head.data(), head.size(), out_path));
  uint64_t copied = 0;
  GPOOL_RETURN_IF_ERROR(readChunks(db_path, [&](const char* data, size_t n) {
    copied += n;
    return writeAll(out.fd, data, n, out_path);
  }));
  if (copied != size) {
    return Status::ioError("'" + db_path + "' changed while it was copied into the backup");
  }
  if (::fsync(out.fd) != 0) {
    return Status::ioError("cannot sync '" + out_path + "': " + errnoText());
  }
  return Status::ok();
}

std::string uniqueSuffix() {
  static std::atomic<uint64_t> counter{0};
  return std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
}

}  // namespace

Result<BackupHeader> backupSqliteStore(const std::string& store_path,
                                       const std::string& backup_path, TimePoint now) {
  if (isPostgresStore(store_path)) {
    return Status::invalidArgument(
        "the store is a PostgreSQL database: back it up with pg_dump (docs/admin-guide.md, "
        "\"Backups\")");
  }
  struct stat st {};
  if (::stat(store_path.c_str(), &st) != 0) {
    return Status::notFound("store '" + store_path + "' does not exist");
  }
  const std::string tmp_db = backup_path + ".tmp-" + uniqueSuffix() + ".db";
  const std::string tmp_out = backup_path + ".tmp-" + uniqueSuffix();
  auto cleanup = [&] {
    removeDatabase(tmp_db);
    removeQuietly(tmp_out);
  };
  BackupHeader h;
  h.created = now;
  h.source = store_path;
  Status done = [&]() -> Status {
    {
      Db src;
      Db dst;
      GPOOL_RETURN_IF_ERROR(openDb(store_path, SQLITE_OPEN_READONLY, src));
      GPOOL_RETURN_IF_ERROR(openDb(tmp_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, dst));
      sqlite3_backup* b = sqlite3_backup_init(dst.db, "main", src.db, "main");
      if (b == nullptr) return sqliteStatus(dst.db, SQLITE_ERROR, "cannot start the backup");
      // One step copies every page inside one read transaction: a consistent snapshot that no
      // writer waits for (WAL). Copying in several steps would restart on every commit of
      // gpoold, and never end under steady submissions.
      int rc = sqlite3_backup_step(b, -1);
      int finish = sqlite3_backup_finish(b);
      if (rc != SQLITE_DONE) {
        return sqliteStatus(dst.db, rc, "cannot copy store '" + store_path + "'");
      }
      if (finish != SQLITE_OK) {
        return sqliteStatus(dst.db, finish, "cannot copy store '" + store_path + "'");
      }
      auto version = queryInt(dst.db, "SELECT version FROM schema_version WHERE id = 1");
      if (!version.ok() || !hasTable(dst.db, "jobs")) {
        return Status::invalidArgument("'" + store_path + "' is not a gpool store" +
                                       (version.ok() ? "" : ": " + version.status().message()));
      }
      h.schema_version = static_cast<int32_t>(*version);
      h.incarnation = incarnationOf(dst.db);
      // The copy keeps WAL mode in its header; make it self-contained (no -wal beside it).
      auto ckpt = queryText(dst.db, "PRAGMA wal_checkpoint(TRUNCATE)");
      (void)ckpt;
    }
    keepOwner(store_path);
    removeQuietly(tmp_db + "-wal");
    removeQuietly(tmp_db + "-shm");
    GPOOL_RETURN_IF_ERROR(writeContainer(tmp_db, tmp_out, h));
    if (::rename(tmp_out.c_str(), backup_path.c_str()) != 0) {
      return Status::ioError("cannot rename '" + tmp_out + "' to '" + backup_path +
                             "': " + errnoText());
    }
    return syncDir(parentOf(backup_path));
  }();
  cleanup();
  if (!done.isOk()) return done.withContext("backup of '" + store_path + "'");
  return h;
}

Result<BackupSummary> verifyBackup(const std::string& backup_path, const std::string& scratch_dir) {
  const std::string db_path = scratch_dir + "/gpool-verify-" + uniqueSuffix() + ".db";
  GPOOL_ASSIGN_OR_RETURN(BackupHeader h, extractChecked(backup_path, db_path));
  Result<BackupSummary> sum = inspect(backup_path, db_path, h);
  removeDatabase(db_path);
  return sum;
}

StoreFileLock& StoreFileLock::operator=(StoreFileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

StoreFileLock::~StoreFileLock() {
  if (fd_ >= 0) ::close(fd_);
}

Result<StoreFileLock> StoreFileLock::acquire(const std::string& store_path, bool exclusive) {
  int fd = ::open(store_path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return Status::ioError("cannot open store '" + store_path + "': " + errnoText());
  StoreFileLock lock(fd);
  if (::flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return Status::failedPrecondition(
          exclusive ? "gpoold is running on store '" + store_path +
                          "' (it holds the store's lock): stop it first (systemctl stop gpoold)"
                    : "store '" + store_path + "' is being restored (gpool admin restore)");
    }
    return Status::ioError("cannot lock store '" + store_path + "': " + errnoText());
  }
  return lock;
}

Result<RestoreReport> restoreSqliteStore(const std::string& backup_path,
                                         const std::string& store_path, TimePoint now) {
  if (isPostgresStore(store_path)) {
    return Status::invalidArgument(
        "the store is a PostgreSQL database: restore it with pg_restore (docs/admin-guide.md, "
        "\"Backups\")");
  }
  const std::string dir = parentOf(store_path);
  const bool existed = fs::exists(store_path);
  StoreFileLock lock;
  if (existed) {
    GPOOL_ASSIGN_OR_RETURN(lock, StoreFileLock::acquire(store_path, /*exclusive=*/true));
  } else if (!fs::is_directory(dir)) {
    return Status::notFound("the store's folder '" + dir + "' does not exist");
  }
  const std::string tmp_db =
      dir + "/." + fs::path(store_path).filename().string() + ".restore-" + uniqueSuffix();
  RestoreReport report;
  Status done = [&]() -> Status {
    GPOOL_ASSIGN_OR_RETURN(BackupHeader h, extractChecked(backup_path, tmp_db));
    GPOOL_ASSIGN_OR_RETURN(report.backup, inspect(backup_path, tmp_db, h));
    // The ids the replaced store handed out: the restored one continues above them, so a job
    // submitted after the backup never shares its id with a new one (issue 19, defect 3).
    std::map<std::string, int64_t> handed_out;
    int64_t replaced_incarnation = 0;
    if (existed && fs::file_size(store_path) > 0) {
      Db cur;
      Status opened = openDb(store_path, SQLITE_OPEN_READONLY, cur);
      auto rows = opened.isOk() ? queryText(cur.db, "SELECT name, seq FROM sqlite_sequence")
                                : Result<std::vector<std::vector<std::string>>>(opened);
      if (!rows.ok()) {
        return Status::failedPrecondition(
            "cannot read the ids the current store '" + store_path + "' handed out (" +
            rows.status().message() +
            "); without them the restored store could reuse job ids. Move the damaged store "
            "away yourself (keep it) and restore again");
      }
      for (const auto& row : *rows)
        handed_out[row[0]] = std::stoll(row[1]);
      const std::string inc = incarnationOf(cur.db);
      if (!inc.empty()) replaced_incarnation = std::stoll(inc);
    }
    keepOwner(store_path);
    {
      // Opening it migrates an older schema (each migration in its own transaction).
      GPOOL_ASSIGN_OR_RETURN(auto restored, SqliteStore::open(tmp_db));
      GPOOL_ASSIGN_OR_RETURN(report.restored_version, restored->schemaVersion());
    }
    {
      Db db;
      GPOOL_RETURN_IF_ERROR(openDb(tmp_db, SQLITE_OPEN_READWRITE, db));
      GPOOL_RETURN_IF_ERROR(queryText(db.db, "BEGIN IMMEDIATE").status());
      Status marked = [&]() -> Status {
        for (const auto& [table, seq] : handed_out) {
          GPOOL_RETURN_IF_ERROR(raiseSequence(db.db, table, seq));
        }
        return markNewIncarnation(db.db, replaced_incarnation, now);
      }();
      if (!marked.isOk()) {
        (void)queryText(db.db, "ROLLBACK");
        return marked;
      }
      GPOOL_RETURN_IF_ERROR(queryText(db.db, "COMMIT").status());
      GPOOL_ASSIGN_OR_RETURN(report.next_job_id_floor,
                             queryInt(db.db,
                                      "SELECT max(coalesce((SELECT seq FROM sqlite_sequence "
                                      "WHERE name = 'jobs'), 0), coalesce((SELECT max(id) "
                                      "FROM jobs), 0))"));
      report.incarnation = incarnationOf(db.db);
      // Self-contained before it is renamed: nothing of it may stay in a -wal under the
      // temporary name.
      GPOOL_RETURN_IF_ERROR(queryText(db.db, "PRAGMA wal_checkpoint(TRUNCATE)").status());
    }
    removeQuietly(tmp_db + "-wal");
    removeQuietly(tmp_db + "-shm");
    struct stat st {};
    if (existed && ::stat(store_path.c_str(), &st) == 0) {
      if (::geteuid() == 0 && ::chown(tmp_db.c_str(), st.st_uid, st.st_gid) != 0) {
        return Status::ioError("cannot give '" + tmp_db + "' the store's owner: " + errnoText());
      }
      if (::chmod(tmp_db.c_str(), st.st_mode & 07777) != 0) {
        return Status::ioError("cannot give '" + tmp_db + "' the store's mode: " + errnoText());
      }
    }
    if (existed) {
      std::string aside = store_path + ".before-restore-" + utcStamp(now, false);
      for (int i = 1; fs::exists(aside); ++i)
        aside = store_path + ".before-restore-" + utcStamp(now, false) + "." + std::to_string(i);
      for (const char* side : {"-wal", "-shm", ""}) {
        std::string from = store_path + side;
        if (!fs::exists(from)) continue;
        if (::rename(from.c_str(), (aside + side).c_str()) != 0) {
          Status s = Status::ioError("cannot move '" + from + "' aside: " + errnoText());
          for (const char* back : {"-wal", "-shm"})
            if (fs::exists(aside + back))
              ::rename((aside + back).c_str(), (store_path + back).c_str());
          return s;
        }
      }
      report.kept_aside = aside;
    }
    if (::rename(tmp_db.c_str(), store_path.c_str()) != 0) {
      Status s = Status::ioError("cannot move the restored store into place: " + errnoText());
      if (!report.kept_aside.empty()) {
        for (const char* side : {"", "-wal", "-shm"}) {
          std::string from = report.kept_aside + side;
          if (fs::exists(from)) ::rename(from.c_str(), (store_path + side).c_str());
        }
        report.kept_aside.clear();
      }
      return s;
    }
    return syncDir(dir);
  }();
  removeDatabase(tmp_db);
  if (!done.isOk()) return done;
  return report;
}

std::string timerBackupName(TimePoint when) {
  return "gpool-" + utcStamp(when, true) + ".backup";
}

std::vector<std::string> timerBackups(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    // gpool-YYYYMMDDTHHMMSS.mmmZ.backup
    if (name.size() == timerBackupName(TimePoint{}).size() && name.rfind("gpool-", 0) == 0 &&
        name.compare(name.size() - 7, 7, ".backup") == 0 && entry.is_regular_file()) {
      out.push_back(entry.path().string());
    }
  }
  std::sort(out.begin(), out.end());  // the names sort by time
  return out;
}

Result<std::string> takeTimerBackup(const std::string& store_path, const std::string& dir, int keep,
                                    TimePoint now) {
  std::string path = dir + "/" + timerBackupName(now);
  GPOOL_RETURN_IF_ERROR(backupSqliteStore(store_path, path, now).status());
  std::vector<std::string> all = timerBackups(dir);
  if (keep > 0 && static_cast<int>(all.size()) > keep) {
    for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i) {
      if (all[i] == path) continue;
      std::error_code ec;
      fs::remove(all[i], ec);
      if (ec) {
        return Status::ioError("backup written to '" + path + "', but the old backup '" + all[i] +
                               "' cannot be removed: " + ec.message());
      }
    }
  }
  return path;
}

}  // namespace gpool::store
