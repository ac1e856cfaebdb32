// Job submissions per second through the store, with the raw database drivers as baselines
// measured in the same run:
//   sqlite raw     one job row + one event row per transaction, prepared statements, WAL,
//                  synchronous=FULL: the floor of a durable single submission
//   sqlite store   SqliteStore::submitJobs with one job (a durable, acknowledged commit each),
//                  from 1 client thread and from 4/16/64 (group commit shares fsyncs)
//   sqlite batch   SqliteStore::submitJobs with 100 jobs per call (one commit per batch)
//   postgres ...   the same against a PostgreSQL server started on disk with fsync=on
// Figures are printed, never asserted. Usage: store_bench [seconds per measurement, default 2]
#include <libpq-fe.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "store/pg_server.h"
#include "store/postgres_store.h"
#include "store/sqlite_store.h"

namespace {

using gpool::store::NewJob;
using gpool::store::Store;
using Clock = std::chrono::steady_clock;

double g_seconds = 2.0;

struct Figure {
  std::string name;
  double per_second = 0;
};

// Runs `op` (which submits `jobs_per_op` jobs) from `threads` threads until the time budget is
// spent; returns jobs per second.
double measure(int threads, int jobs_per_op, const std::function<bool()>& op) {
  std::atomic<int64_t> ops{0};
  std::atomic<bool> failed{false};
  auto start = Clock::now();
  auto deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(g_seconds));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      while (Clock::now() < deadline && !failed) {
        if (!op()) {
          failed = true;
          return;
        }
        ++ops;
      }
    });
  }
  for (auto& th : pool)
    th.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  if (failed) std::fprintf(stderr, "store_bench: an operation failed\n");
  return static_cast<double>(ops.load()) * jobs_per_op / elapsed;
}

NewJob benchJob(int i) {
  NewJob j;
  j.user = "user" + std::to_string(i % 10);
  j.group = "group" + std::to_string(i % 3);
  j.gpu_thousandths = 1000;
  j.spec_json = R"({"name":"train","command":["python","train.py","--epochs","10"],"gpus":1,)"
                R"("gpu_memory":"24G","cpus":8,"memory":"64G","time_limit":"1-00:00:00"})";
  return j;
}

const char* kRawSchema =
    "CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, user_name TEXT, group_name TEXT, "
    "state TEXT, spec_json TEXT, submit_time BIGINT);"
    "CREATE INDEX jobs_user ON jobs (user_name, id); CREATE INDEX jobs_state ON jobs (state, id);"
    "CREATE TABLE job_events (seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id BIGINT, time BIGINT, "
    "from_state TEXT, to_state TEXT, reason TEXT);"
    "CREATE INDEX job_events_job ON job_events (job_id, seq);";

double rawSqlite(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", nullptr, nullptr, nullptr);
  sqlite3_exec(db, kRawSchema, nullptr, nullptr, nullptr);
  sqlite3_stmt* ins = nullptr;
  sqlite3_stmt* ev = nullptr;
  sqlite3_prepare_v2(db,
                     "INSERT INTO jobs (user_name, group_name, state, spec_json, submit_time) "
                     "VALUES (?1, ?2, 'PENDING', ?3, ?4) RETURNING id",
                     -1, &ins, nullptr);
  sqlite3_prepare_v2(db,
                     "INSERT INTO job_events (job_id, time, from_state, to_state, reason) "
                     "VALUES (?1, ?2, '', 'PENDING', 'submitted')",
                     -1, &ev, nullptr);
  NewJob j = benchJob(0);
  int64_t now = 1'700'000'000'000'000;
  double rate = measure(1, 1, [&] {
    sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    sqlite3_bind_text(ins, 1, j.user.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 2, j.group.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 3, j.spec_json.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_int64(ins, 4, now);
    if (sqlite3_step(ins) != SQLITE_ROW) return false;
    int64_t id = sqlite3_column_int64(ins, 0);
    sqlite3_reset(ins);
    sqlite3_bind_int64(ev, 1, id);
    sqlite3_bind_int64(ev, 2, now);
    if (sqlite3_step(ev) != SQLITE_DONE) return false;
    sqlite3_reset(ev);
    return sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK;
  });
  sqlite3_finalize(ins);
  sqlite3_finalize(ev);
  sqlite3_close(db);
  return rate;
}

double rawPostgres(const std::string& conninfo, int threads) {
  {
    PGconn* c = PQconnectdb(conninfo.c_str());
    std::string schema = kRawSchema;
    for (size_t p = schema.find("INTEGER PRIMARY KEY AUTOINCREMENT"); p != std::string::npos;
         p = schema.find("INTEGER PRIMARY KEY AUTOINCREMENT")) {
      schema.replace(p, 33, "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY");
    }
    PQclear(PQexec(c, ("DROP TABLE IF EXISTS jobs, job_events; " + schema).c_str()));
    PQfinish(c);
  }
  std::vector<PGconn*> conns;
  for (int t = 0; t < threads; ++t) {
    PGconn* c = PQconnectdb(conninfo.c_str());
    PQclear(PQprepare(c, "ins",
                      "INSERT INTO jobs (user_name, group_name, state, spec_json, submit_time) "
                      "VALUES ($1, $2, 'PENDING', $3, $4) RETURNING id",
                      0, nullptr));
    PQclear(PQprepare(c, "ev",
                      "INSERT INTO job_events (job_id, time, from_state, to_state, reason) VALUES "
                      "($1, $2, '', 'PENDING', 'submitted')",
                      0, nullptr));
    conns.push_back(c);
  }
  std::atomic<int> next{0};
  thread_local int my_conn = -1;
  NewJob j = benchJob(0);
  const std::string now = "1700000000000000";
  double rate = measure(threads, 1, [&] {
    if (my_conn < 0) my_conn = next++;
    PGconn* c = conns[static_cast<size_t>(my_conn)];
    PQclear(PQexec(c, "BEGIN"));
    const char* v[4] = {j.user.c_str(), j.group.c_str(), j.spec_json.c_str(), now.c_str()};
    PGresult* r = PQexecPrepared(c, "ins", 4, v, nullptr, nullptr, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      PQclear(r);
      return false;
    }
    std::string id = PQgetvalue(r, 0, 0);
    PQclear(r);
    const char* e[2] = {id.c_str(), now.c_str()};
    PQclear(PQexecPrepared(c, "ev", 2, e, nullptr, nullptr, 0));
    r = PQexec(c, "COMMIT");
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok;
  });
  for (PGconn* c : conns)
    PQfinish(c);
  return rate;
}

double storeSingle(Store& store, int threads) {
  std::atomic<int> i{0};
  return measure(threads, 1, [&] {
    auto r = store.submitJobs({benchJob(i++)}, gpool::fromUnixSeconds(1'700'000'000));
    return r.ok();
  });
}

double storeBatch(Store& store, int batch) {
  std::vector<NewJob> jobs;
  for (int k = 0; k < batch; ++k)
    jobs.push_back(benchJob(k));
  return measure(1, batch, [&] {
    auto r = store.submitJobs(jobs, gpool::fromUnixSeconds(1'700'000'000));
    return r.ok();
  });
}

void print(const std::vector<Figure>& figures, double baseline) {
  for (const auto& f : figures) {
    std::printf("  %-44s %10.0f jobs/s   %5.2fx baseline\n", f.name.c_str(), f.per_second,
                f.per_second / baseline);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_seconds = std::atof(argv[1]);
  namespace fs = std::filesystem;
  // On disk (not tmpfs): the point is the cost of durable commits.
  char tmpl[] = "/tmp/gpool-store-bench-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  const std::string dir = tmpl;

  std::printf("store_bench: %.1f s per figure, jobs submitted with one event row each\n",
              g_seconds);
  std::printf("SQLite (WAL, file in %s)\n", dir.c_str());
  double raw = rawSqlite(dir + "/raw.db");
  std::vector<Figure> figs;
  figs.push_back({"raw sqlite3, 1 job/commit, FULL [baseline]", raw});
  {
    auto store = gpool::store::SqliteStore::open(dir + "/full.db");
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().toString().c_str());
      return 1;
    }
    figs.push_back({"SqliteStore, 1 job/call, FULL", storeSingle(**store, 1)});
    for (int threads : {4, 16, 64}) {
      figs.push_back({"SqliteStore, 1 job/call, FULL, " + std::to_string(threads) + " threads",
                      storeSingle(**store, threads)});
    }
    figs.push_back({"SqliteStore, 100 jobs/call, FULL", storeBatch(**store, 100)});
  }
  {
    gpool::store::SqliteOptions normal;
    normal.synchronous = "NORMAL";
    auto store = gpool::store::SqliteStore::open(dir + "/normal.db", normal);
    if (store.ok()) {
      figs.push_back({"SqliteStore, 1 job/call, NORMAL", storeSingle(**store, 1)});
    }
  }
  print(figs, raw);

  gpool::store::testing::PgServerOptions pg_options;
  pg_options.fsync = true;
  pg_options.prefer_memory = false;
  auto server = gpool::store::testing::PgServer::start(pg_options);
  if (!server.ok()) {
    std::printf("PostgreSQL: skipped (%s)\n", server.status().toString().c_str());
  } else {
    std::printf("PostgreSQL (local server, Unix socket, fsync=on, synchronous_commit=on)\n");
    std::string conninfo = (*server)->conninfo();
    double pg_raw = rawPostgres(conninfo, 1);
    double pg_raw4 = rawPostgres(conninfo, 4);
    std::vector<Figure> pg;
    pg.push_back({"raw libpq, 1 job/commit [baseline]", pg_raw});
    pg.push_back({"raw libpq, 1 job/commit, 4 connections", pg_raw4});
    {
      auto c = PQconnectdb(conninfo.c_str());
      PQclear(PQexec(c, "DROP TABLE IF EXISTS jobs, job_events"));
      PQfinish(c);
    }
    auto store = gpool::store::PostgresStore::open({conninfo, 4});
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().toString().c_str());
      return 1;
    }
    pg.push_back({"PostgresStore, 1 job/call", storeSingle(**store, 1)});
    for (int threads : {4, 16}) {
      pg.push_back({"PostgresStore, 1 job/call, " + std::to_string(threads) + " threads",
                    storeSingle(**store, threads)});
    }
    pg.push_back({"PostgresStore, 100 jobs/call", storeBatch(**store, 100)});
    print(pg, pg_raw);
    store->reset();
    server->reset();
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
