// controller_bench: the real gpoold daemon under load over its Unix socket, at the size the
// controller issue names (1,000 nodes of 8 GPUs, 100,000 jobs in the store):
//
//   1. submissions per second through POST /v1/jobs with 1 and with N concurrent clients, against
//      the store's own rate for the same single-job durable transactions called in-process by
//      the same number of threads (the baseline: what the disk allows);
//   2. p50/p99 latency of GET /v1/jobs (a page of 50) and GET /v1/jobs/{id} under N concurrent
//      clients, against GET /v1/health (transport only) in the same run;
//   3. the daemon's resident memory (VmRSS, and the peak VmHWM) at that size;
//   4. one scheduling pass over the pending jobs (in-process), decoding every spec against
//      reusing those the pass before decoded.
//
// The nodes are drained (there are no agents in a benchmark), so every scheduling pass evaluates
// every pending job without starting 8,000 tasks; submissions wake the scheduling loop as they
// do in production, so it runs beside the API as it would. The reads start once gpoold is idle
// after the pass it runs on start (waitUntilIdle): they measure its steady state.
//
// Usage: controller_bench [--nodes N] [--jobs N] [--clients N] [--seconds S] [--submits N]
//                         [--api-threads N]   (gpoold's api_threads; default: its own default)
//                         [--api-blocking-threads N]   (gpoold's; default: its own default)
//                         [--schedule-interval DURATION]   (gpoold's; default 10s)
//                         [--backup ROUNDS]   (only the backup comparison below, ROUNDS times)
//
// --backup (issue 27): the API's latency while `gpool admin backup` copies the store (the real
// binary, back to back) against the same load without a backup, alternating in the same run:
// list and show at 10 requests/s per client, and submissions from 16 clients in a closed loop.
// Targets (issue 4): >= 2,000 submissions/s with SQLite, p99 < 20 ms for list/show under 64
// clients, < 500 MB resident at 1,000 nodes and 100,000 jobs.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "common/clock.h"
#include "controller/controller_fixture.h"
#include "controller/node_registry.h"
#include "controller/scheduling_loop.h"
#include "net/client.h"
#include "store/sqlite_store.h"

namespace {

using gpool::bench::drive;
using gpool::bench::Figures;
using namespace gpool;

const std::string kGpoold = std::string(GPOOL_BINARY_DIR) + "/src/controller/gpoold";

struct Options {
  int nodes = 1000;
  int jobs = 100'000;
  int clients = 64;
  double seconds = 3.0;
  // Per concurrent submission run, spread over the clients. 2,000 took under a second, so
  // whether a scheduling pass (~0.9 s of a CPU at 100,000 pending jobs) fell into it swung the
  // rate between 1,961 and 2,942/s; 10,000 take ~4 s and hold the passes they cause.
  int submits = 10'000;
  int api_threads = 0;            // gpoold's api_threads; 0: its default
  int api_blocking_threads = -1;  // gpoold's api_blocking_threads; -1: its default
  // gpoold's schedule_interval: the timer's passes over every pending job run beside the read
  // phases; a long interval shows what they cost the readers.
  std::string schedule_interval = "10s";
  int backup_rounds = 0;  // --backup: rounds of the backup comparison instead of the phases
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "controller_bench: %s\n", what.c_str());
  std::exit(1);
}

std::unique_ptr<store::SqliteStore> openStore(const std::string& path, const char* synchronous) {
  store::SqliteOptions options;
  options.synchronous = synchronous;
  auto opened = store::SqliteStore::open(path, options);
  if (!opened.ok()) die(opened.status().toString());
  return std::move(opened).value();
}

store::NewJob benchJob(int i) {
  store::NewJob job;
  job.user = "user" + std::to_string(i % 50);
  job.uid = 20'000 + static_cast<uint32_t>(i % 50);
  job.spec_json = api::toJson(controller::testing::makeSpec(i % 4 == 0 ? 250 : 1000)).dump();
  job.gpu_thousandths = i % 4 == 0 ? 250 : 1000;
  return job;
}

// 1,000 drained nodes and `jobs` pending jobs, written the way gpoold would write them.
void populate(const std::string& db, const Options& o) {
  auto store = openStore(db, "NORMAL");
  controller::NodeRegistry registry(*store, realClock());
  if (gpool::Status s = registry.load(); !s.isOk()) die(s.toString());
  for (int n = 0; n < o.nodes; ++n) {
    char name[32];
    std::snprintf(name, sizeof name, "node%04d", n);
    auto added = registry.registerNode(controller::testing::makeNode(name, 8));
    if (!added.ok()) die(added.status().toString());
    if (gpool::Status s = registry.drain(name, "benchmark: no agents"); !s.isOk()) {
      die(s.toString());
    }
  }
  const int batch = 1000;
  for (int done = 0; done < o.jobs; done += batch) {
    std::vector<store::NewJob> jobs;
    for (int i = done; i < std::min(o.jobs, done + batch); ++i)
      jobs.push_back(benchJob(i));
    auto ids = store->submitJobs(jobs, realClock().now());
    if (!ids.ok()) die(ids.status().toString());
    std::fprintf(stderr, "\rpopulating the store: %d/%d jobs", done + batch, o.jobs);
  }
  std::fprintf(stderr, "\n");
}

// Stands in for the agents: the nodes are drained, so nothing is assigned.
class NoAgents : public controller::AgentGateway {
 public:
  void assign(const controller::TaskAssignment&) override {}
  void cancel(const std::string&, int64_t, uint32_t, int64_t, int64_t,
              const std::string&) override {}
};

// A scheduling pass over the populated store, in-process, in milliseconds: a loop's first pass
// decodes every pending job's spec (what every pass did before the loop kept decoded specs), its
// next passes reuse them. A first loop's pass persists the pending reasons, so that the passes
// measured write nothing.
struct PassTimes {
  double uncached_ms = 0;
  double cached_ms = 0;
};
PassTimes passTimes(const std::string& db) {
  auto store = openStore(db, "NORMAL");
  controller::NodeRegistry registry(*store, realClock());
  if (gpool::Status s = registry.load(); !s.isOk()) die(s.toString());
  NoAgents agents;
  auto timed = [](controller::SchedulingLoop& loop) {
    auto start = std::chrono::steady_clock::now();
    auto report = loop.runOnce();
    if (!report.ok()) die(report.status().toString());
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  {
    controller::SchedulingLoop first(*store, registry, agents, realClock(), {});
    timed(first);
  }
  controller::SchedulingLoop loop(*store, registry, agents, realClock(), {});
  PassTimes t;
  t.uncached_ms = timed(loop);
  t.cached_ms = std::min(timed(loop), timed(loop));
  return t;
}

// The baseline for submissions: the store's own durable single-job transactions, `threads`
// threads calling it in-process (no HTTP, no JobService checks), on the same disk.
Figures storeBaseline(const std::string& db, int threads, int total) {
  auto store = openStore(db, "FULL");
  std::atomic<int> next{0};
  return drive(
      "store.submitJobs in-process (baseline)", threads, 0,
      [&] {
        return std::function<bool()>([&] {
          std::vector<store::NewJob> one{benchJob(next.fetch_add(1))};
          return store->submitJobs(one, realClock().now()).ok();
        });
      },
      std::max(1, total / threads), /*warm_up=*/false);
}

struct Daemon {
  pid_t pid = -1;
  FILE* out = nullptr;
};

Daemon startGpoold(const std::string& config) {
  int fds[2];
  if (pipe(fds) != 0) die("pipe failed");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl(kGpoold.c_str(), kGpoold.c_str(), "--config", config.c_str(), nullptr);
    _exit(127);
  }
  close(fds[1]);
  Daemon d{pid, fdopen(fds[0], "r")};
  char line[256];
  while (fgets(line, sizeof line, d.out)) {
    if (std::string(line).rfind("ready", 0) == 0) return d;
  }
  die("gpoold exited before it was ready (see its log above)");
}

// CPU time `pid` has used, in clock ticks (utime + stime of /proc/PID/stat).
long cpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  // Fields after the command name, which may hold spaces, start past its ')'.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; rest >> field; ++i) {
    if (i == 14) utime = std::atol(field.c_str());
    if (i == 15) {
      stime = std::atol(field.c_str());
      break;
    }
  }
  return utime + stime;
}

// Waits until gpoold is idle (under 5% of a CPU over 200 ms), returning the seconds that took.
// A started gpoold first runs a scheduling pass over every pending job, decoding each spec
// (1.6 s of a CPU at 100,000 jobs, several seconds when readers compete with it); the read
// phases measure a controller in its steady state, whose timer passes reuse decoded specs,
// not one that has just restarted. A bench may poll; tests may not.
double waitUntilIdle(pid_t pid) {
  const auto start = std::chrono::steady_clock::now();
  const long per_window = std::max(1L, sysconf(_SC_CLK_TCK) / 100);  // 5% of 200 ms
  long before = cpuTicks(pid);
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const long now = cpuTicks(pid);
    if (now - before < per_window) break;
    before = now;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

long statusKib(pid_t pid, const char* key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  long v = -1;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) v = std::atol(line.c_str() + std::string(key).size() + 1);
  }
  return v;
}

std::function<std::function<bool()>()> getter(const std::string& sock,
                                              std::function<std::string(std::mt19937&)> target) {
  return [sock, target] {
    auto client = std::make_shared<net::HttpClient>(net::ClientEndpoint::unixSocket(sock));
    auto rng = std::make_shared<std::mt19937>(
        static_cast<unsigned>(reinterpret_cast<uintptr_t>(client.get()) & 0xffffffffu));
    return std::function<bool()>([client, rng, target] {
      auto r = client->get(target(*rng));
      return r.ok() && r->status == 200;
    });
  };
}

std::function<std::function<bool()>()> submitter(const std::string& sock) {
  const std::string body = api::toJson(controller::testing::makeSpec(250, "bench")).dump();
  return [sock, body] {
    auto client = std::make_shared<net::HttpClient>(net::ClientEndpoint::unixSocket(sock));
    return std::function<bool()>([client, body] {
      auto r = client->post("/v1/jobs", body);
      return r.ok() && r->status == 201;
    });
  };
}

// One connection of driveConnections: requests until `deadline`, each sent when the answer to
// the one before came back. A coroutine function, not a lambda: its arguments live in its frame,
// where a lambda's captures would die with the closure.
boost::asio::awaitable<void> closedLoop(boost::asio::local::stream_protocol::socket& s,
                                        unsigned seed,
                                        std::chrono::steady_clock::time_point deadline,
                                        const std::function<std::string(std::mt19937&)>& target,
                                        std::vector<double>& lat, uint64_t& errors) {
  namespace asio = boost::asio;
  namespace http = boost::beast::http;
  boost::beast::flat_buffer buffer;
  buffer.reserve(64 * 1024);
  std::mt19937 rng(seed);
  boost::system::error_code ec;
  while (std::chrono::steady_clock::now() < deadline) {
    http::request<http::empty_body> req{http::verb::get, target(rng), 11};
    req.set(http::field::host, "gpool");
    req.keep_alive(true);
    const auto t0 = std::chrono::steady_clock::now();
    co_await http::async_write(s, req, asio::redirect_error(asio::use_awaitable, ec));
    http::response_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    if (!ec) {
      co_await http::async_read(s, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    }
    if (ec || parser.get().result_int() != 200) {
      ++errors;
      co_return;  // a broken connection stops this client; the errors column shows it
    }
    lat.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
}

// Closed loop over `connections` keep-alive connections driven by ONE client thread (an event
// loop, each connection sending its next request as soon as its answer came back): the same 64
// requests always in flight as with 64 client threads, without 64 runnable client threads
// competing with gpoold for this machine's CPUs. What the thread-per-client rows add to the
// latency beyond this is the client threads waiting for a CPU, not gpoold: the clients of a
// real controller are other processes, mostly on other machines.
Figures driveConnections(const std::string& name, const std::string& sock, int connections,
                         double seconds, const std::function<std::string(std::mt19937&)>& target) {
  namespace asio = boost::asio;
  using Socket = asio::local::stream_protocol::socket;
  asio::io_context ioc(1);
  std::vector<std::vector<double>> lat(static_cast<size_t>(connections));
  uint64_t errors = 0;
  std::vector<std::unique_ptr<Socket>> sockets;
  for (int i = 0; i < connections; ++i) {
    sockets.push_back(std::make_unique<Socket>(ioc));
    boost::system::error_code ec;
    sockets.back()->connect(asio::local::stream_protocol::endpoint(sock), ec);
    if (ec) die("connect " + sock + ": " + ec.message());
  }
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(seconds));
  for (int i = 0; i < connections; ++i) {
    asio::co_spawn(ioc,
                   closedLoop(*sockets[static_cast<size_t>(i)], static_cast<unsigned>(i) + 1,
                              deadline, target, lat[static_cast<size_t>(i)], errors),
                   [&errors](std::exception_ptr e) {
                     if (e) ++errors;
                   });
  }
  ioc.run();
  return gpool::bench::summarise(
      name, lat, errors,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// `base` is the row to compare with: by throughput (closed loop: how fast against the
// baseline), or with `by_p99` by tail latency (paced rows all run at the same rate).
void printRow(const Figures& f, const Figures* base, bool by_p99 = false) {
  std::printf("%-40s %8lu %7lu %10.0f %9.3f %9.3f", f.name.c_str(),
              static_cast<unsigned long>(f.requests), static_cast<unsigned long>(f.errors), f.rps(),
              f.p50_ms, f.p99_ms);
  if (by_p99 && base && base->p99_ms > 0) {
    std::printf(" %6.2fx p99", f.p99_ms / base->p99_ms);
  } else if (!by_p99 && base && base->rps() > 0) {
    std::printf(" %10.2fx", f.rps() / base->rps());
  }
  std::printf("\n");
}

const std::string kGpool = std::string(GPOOL_BINARY_DIR) + "/src/cli/gpool";

// The API under load without and with `gpool admin backup` running back to back (the real
// binary, as an admin or a cron job runs it), alternating for o.backup_rounds rounds: each row
// pair is measured in the same run, the one without a backup being the baseline.
int backupComparison(const Options& o, const std::string& dir, const std::string& config,
                     const std::string& sock) {
  const std::string backup = dir + "/bench.backup";
  auto list = getter(sock, [&o](std::mt19937& rng) {
    int after = static_cast<int>(rng() % static_cast<unsigned>(o.jobs));
    return "/v1/jobs?limit=50&after=" + std::to_string(after);
  });
  auto show = getter(sock, [&o](std::mt19937& rng) {
    int id = 1 + static_cast<int>(rng() % static_cast<unsigned>(o.jobs));
    return "/v1/jobs/" + std::to_string(id);
  });
  const double paced_rate = 10.0;
  const int writers = std::min(16, o.clients);
  struct Row {
    Figures without;
    Figures with;
  };
  std::vector<Row> rows(3);
  std::vector<double> backup_s;
  uint64_t backup_bytes = 0;
  for (int round = 0; round < o.backup_rounds; ++round) {
    for (bool during : {false, true}) {
      std::atomic<bool> stop{false};
      std::thread copier;
      if (during) {
        copier = std::thread([&] {
          while (!stop.load()) {
            const auto t0 = std::chrono::steady_clock::now();
            const std::string cmd =
                kGpool + " admin backup " + backup + " --store " + dir + "/gpool.db > /dev/null";
            if (std::system(cmd.c_str()) != 0) die("gpool admin backup failed");
            backup_s.push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          }
        });
      }
      Figures l = drive("GET /v1/jobs?limit=50, 10/s per client", o.clients, o.seconds, list, 0,
                        true, paced_rate);
      Figures g = drive("GET /v1/jobs/{id}, 10/s per client", o.clients, o.seconds, show, 0, true,
                        paced_rate);
      Figures w = drive("POST /v1/jobs, " + std::to_string(writers) + " clients", writers,
                        o.seconds, submitter(sock));
      stop = true;
      if (copier.joinable()) copier.join();
      for (auto [i, f] : {std::pair{0, &l}, std::pair{1, &g}, std::pair{2, &w}}) {
        Figures& acc =
            during ? rows[static_cast<size_t>(i)].with : rows[static_cast<size_t>(i)].without;
        // Rounds are pooled by their worst p99 and summed counts.
        acc.name = f->name;
        acc.requests += f->requests;
        acc.errors += f->errors;
        acc.seconds += f->seconds;
        acc.p50_ms = std::max(acc.p50_ms, f->p50_ms);
        acc.p99_ms = std::max(acc.p99_ms, f->p99_ms);
      }
    }
  }
  std::error_code ec;
  backup_bytes = std::filesystem::file_size(backup, ec);
  (void)config;
  std::sort(backup_s.begin(), backup_s.end());
  std::printf("\n%-40s %8s %7s %10s %9s %9s %11s\n", "API during backups (worst of rounds)",
              "requests", "errors", "req/s", "p50 ms", "p99 ms", "vs none");
  for (Row& r : rows) {
    r.with.name += " + backup";
    printRow(r.without, nullptr);
    printRow(r.with, &r.without, true);
  }
  if (!backup_s.empty()) {
    std::printf(
        "backups: %zu taken back to back, %.1f MB each, %.2f s median, %.2f s longest (%d jobs "
        "in the store)\n",
        backup_s.size(), static_cast<double>(backup_bytes) / 1e6, backup_s[backup_s.size() / 2],
        backup_s.back(), o.jobs);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--nodes")
      o.nodes = std::atoi(argv[i + 1]);
    else if (a == "--jobs")
      o.jobs = std::atoi(argv[i + 1]);
    else if (a == "--clients")
      o.clients = std::atoi(argv[i + 1]);
    else if (a == "--seconds")
      o.seconds = std::atof(argv[i + 1]);
    else if (a == "--submits")
      o.submits = std::atoi(argv[i + 1]);
    else if (a == "--api-threads")
      o.api_threads = std::atoi(argv[i + 1]);
    else if (a == "--api-blocking-threads")
      o.api_blocking_threads = std::atoi(argv[i + 1]);
    else if (a == "--schedule-interval")
      o.schedule_interval = argv[i + 1];
    else if (a == "--backup")
      o.backup_rounds = std::atoi(argv[i + 1]);
    else
      die("unknown option '" + a + "' (see the comment at the top of bench/controller_bench.cc)");
  }
  if (o.nodes < 1 || o.jobs < 1 || o.clients < 1 || o.submits < o.clients || o.api_threads < 0) {
    die("--nodes, --jobs and --clients must be positive, --submits at least --clients and "
        "--api-threads not negative");
  }
  ::signal(SIGPIPE, SIG_IGN);
  controller::testing::TempDir dir;
  const std::string db = dir.path() + "/gpool.db";
  const std::string sock = dir.path() + "/gpoold.sock";
  populate(db, o);
  const PassTimes passes = passTimes(db);

  const std::string config = dir.path() + "/gpoold.toml";
  std::ofstream(config)
      << "[controller]\nstore = \"" << db << "\"\nsocket = \"" << sock
      << "\"\nnode_down_after = \"1d\"\nschedule_interval = \"" << o.schedule_interval
      << "\"\n"
      // The bench submits as root, its own user (controller.allow_root_jobs, docs/config.md).
      << "allow_root_jobs = true\n"
      << (o.api_threads > 0 ? "api_threads = " + std::to_string(o.api_threads) + "\n"
                            : std::string())
      << (o.api_blocking_threads >= 0
              ? "api_blocking_threads = " + std::to_string(o.api_blocking_threads) + "\n"
              : std::string())
      << "[log]\nlevel = \"warn\"\n";
  Daemon daemon = startGpoold(config);
  const long rss_start = statusKib(daemon.pid, "VmRSS:");
  const double settle_s = waitUntilIdle(daemon.pid);
  std::printf(
      "controller_bench: gpoold with %d nodes x 8 GPUs (drained) and %d jobs in SQLite, "
      "%d clients, %u CPUs; idle %.1f s after it was ready (its first scheduling pass)\n",
      o.nodes, o.jobs, o.clients, std::thread::hardware_concurrency(), settle_s);
  if (o.backup_rounds > 0) {
    const int rc = backupComparison(o, dir.path(), config, sock);
    kill(daemon.pid, SIGTERM);
    int status = 0;
    waitpid(daemon.pid, &status, 0);
    fclose(daemon.out);
    return rc;
  }

  std::vector<Figures> reads;
  reads.push_back(drive("GET /v1/health (transport baseline)", o.clients, o.seconds,
                        getter(sock, [](std::mt19937&) { return std::string("/v1/health"); })));
  reads.push_back(drive("GET /v1/jobs?limit=50 (list)", o.clients, o.seconds,
                        getter(sock, [&o](std::mt19937& rng) {
                          int after = static_cast<int>(rng() % static_cast<unsigned>(o.jobs));
                          return "/v1/jobs?limit=50&after=" + std::to_string(after);
                        })));
  reads.push_back(
      drive("GET /v1/jobs/{id} (show)", o.clients, o.seconds, getter(sock, [&o](std::mt19937& rng) {
              int id = 1 + static_cast<int>(rng() % static_cast<unsigned>(o.jobs));
              return "/v1/jobs/" + std::to_string(id);
            })));

  // The same closed loops from one event-driven client thread (driveConnections).
  const std::string n = std::to_string(o.clients);
  reads.push_back(driveConnections("GET /v1/health, " + n + " conns/1 thread", sock, o.clients,
                                   o.seconds, [](std::mt19937&) { return "/v1/health"; }));
  reads.push_back(driveConnections("GET /v1/jobs?limit=50, " + n + " conns/1 thread", sock,
                                   o.clients, o.seconds, [&o](std::mt19937& rng) {
                                     int after =
                                         static_cast<int>(rng() % static_cast<unsigned>(o.jobs));
                                     return "/v1/jobs?limit=50&after=" + std::to_string(after);
                                   }));
  reads.push_back(driveConnections("GET /v1/jobs/{id}, " + n + " conns/1 thread", sock, o.clients,
                                   o.seconds, [&o](std::mt19937& rng) {
                                     int id = 1 + static_cast<int>(rng() %
                                                                   static_cast<unsigned>(o.jobs));
                                     return "/v1/jobs/" + std::to_string(id);
                                   }));

  // 64 users running `gpool queue` or `gpool show` are not a closed loop at full speed: the
  // same clients, each sending 10 requests/s as independent (Poisson) arrivals, show the latency
  // a user would see; health at that rate is the transport's baseline.
  const double paced_rate = 10.0;
  reads.push_back(drive("GET /v1/health, 10/s per client", o.clients, o.seconds,
                        getter(sock, [](std::mt19937&) { return std::string("/v1/health"); }), 0,
                        true, paced_rate));
  reads.push_back(drive("GET /v1/jobs?limit=50, 10/s per client", o.clients, o.seconds,
                        getter(sock,
                               [&o](std::mt19937& rng) {
                                 int after =
                                     static_cast<int>(rng() % static_cast<unsigned>(o.jobs));
                                 return "/v1/jobs?limit=50&after=" + std::to_string(after);
                               }),
                        0, true, paced_rate));
  reads.push_back(drive("GET /v1/jobs/{id}, 10/s per client", o.clients, o.seconds,
                        getter(sock,
                               [&o](std::mt19937& rng) {
                                 int id =
                                     1 + static_cast<int>(rng() % static_cast<unsigned>(o.jobs));
                                 return "/v1/jobs/" + std::to_string(id);
                               }),
                        0, true, paced_rate));

  std::vector<Figures> writes;
  const int single = std::max(1, o.submits / 10);
  writes.push_back(storeBaseline(dir.path() + "/baseline-1.db", 1, single));
  writes.back().name = "store in-process, 1 thread (baseline)";
  writes.push_back(drive("POST /v1/jobs, 1 client", 1, 0, submitter(sock), single));
  writes.push_back(storeBaseline(dir.path() + "/baseline-n.db", o.clients, o.submits));
  writes.back().name = "store in-process, " + std::to_string(o.clients) + " threads (baseline)";
  writes.push_back(drive("POST /v1/jobs, " + std::to_string(o.clients) + " clients", o.clients, 0,
                         submitter(sock), o.submits / o.clients));
  const long rss_end = statusKib(daemon.pid, "VmRSS:");
  const long hwm = statusKib(daemon.pid, "VmHWM:");

  kill(daemon.pid, SIGTERM);
  int status = 0;
  waitpid(daemon.pid, &status, 0);
  fclose(daemon.out);

  std::printf("\n%-40s %8s %7s %10s %9s %9s %11s\n", "reads", "requests", "errors", "req/s",
              "p50 ms", "p99 ms", "vs health");
  // Closed loop (threads, then one event-driven thread), then paced.
  for (size_t i = 0; i < reads.size(); ++i)
    printRow(reads[i], i < 3 ? &reads[0] : i < 6 ? &reads[3] : &reads[6], i >= 6);
  std::printf("\n%-40s %8s %7s %10s %9s %9s %11s\n", "submissions", "jobs", "errors", "jobs/s",
              "p50 ms", "p99 ms", "vs store");
  printRow(writes[0], nullptr);
  printRow(writes[1], &writes[0]);
  printRow(writes[2], nullptr);
  printRow(writes[3], &writes[2]);
  std::printf(
      "\nscheduling pass over %d pending jobs (in-process): %.0f ms decoding every spec "
      "(baseline), %.0f ms with the specs kept from the pass before: %.2fx\n",
      o.jobs, passes.uncached_ms, passes.cached_ms, passes.cached_ms / passes.uncached_ms);
  std::printf("gpoold resident memory: %.1f MB after start, %.1f MB at the end, peak %.1f MB\n",
              rss_start / 1024.0, rss_end / 1024.0, hwm / 1024.0);

  const double p99 = std::max(reads[1].p99_ms, reads[2].p99_ms);
  const double conns_p99 = std::max(reads[4].p99_ms, reads[5].p99_ms);
  const double paced_p99 = std::max(reads[7].p99_ms, reads[8].p99_ms);
  std::printf("target >= 2,000 submissions/s: %s (%.0f/s with %d clients)\n",
              writes[3].rps() >= 2000 ? "met" : "NOT met", writes[3].rps(), o.clients);
  std::printf(
      "target p99 < 20 ms for list/show under %d clients: closed loop from %d threads %s "
      "(%.3f ms), closed loop on %d connections from 1 thread %s (%.3f ms), "
      "%.0f requests/s per client %s (%.3f ms)\n",
      o.clients, o.clients, p99 < 20.0 ? "met" : "NOT met", p99, o.clients,
      conns_p99 < 20.0 ? "met" : "NOT met", conns_p99, paced_rate,
      paced_p99 < 20.0 ? "met" : "NOT met", paced_p99);
  std::printf("target < 500 MB resident: %s (peak %.1f MB)\n", hwm < 500 * 1024 ? "met" : "NOT met",
              hwm / 1024.0);
  const bool exited_cleanly = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!exited_cleanly) std::printf("gpoold did not stop cleanly (status %d)\n", status);
  return exited_cleanly ? 0 : 1;
}
