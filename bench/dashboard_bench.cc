// dashboard_bench: the dashboard's GPU grid at 100 servers / 800 GPUs in a real headless
// Chromium, against a real pool (`gpool up --simulate --servers 100 --demo`: gpoold and 100
// agents with simulated GPUs, the demo's jobs plus an array of 1-GPU jobs, so that tiles carry
// tenants and utilisation). docs/dashboard.md, "Measured".
//
// Figures (each the median of --runs, with min and max):
//   1. time to first render: from navigation start to the first paint after the grid holds every
//      GPU (the page's own marks: performance.now() in a timer after the next animation frame),
//      against the same loads' first contentful paint (the page's shell, no GPU read yet);
//   2. applying a GPU list in which every GPU's utilisation changed (what a 5 s re-read brings):
//      the grid repaints the tiles in place, against the baseline measured in the same run, the
//      same list drawn by rebuilding the whole grid (what the dashboard did before v2); both
//      until the next paint, and their ratio;
//   3. a live update end to end: an admin drains a server over the API; from the request to the
//      page showing that server's idle tiles drained (gpoold's node event on the socket, the
//      page's GET /v1/gpus?node=, the tiles repainted), read by a MutationObserver in the page,
//      against the drain request's own answer time (same requests).
//
// Usage: dashboard_bench [--servers N] [--runs N] [--jobs N]   (defaults 100, 5, 400)
// Needs root (the demo creates users), chromium and chromedriver (scripts/install-deps.sh).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/client.h"
#include "web/webdriver.h"

namespace {

namespace fs = std::filesystem;
using gpool::web::testing::waitFor;
using gpool::web::testing::WebDriver;
using nlohmann::json;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "dashboard_bench: %s\n", what.c_str());
  std::exit(1);
}

struct Stats {
  double median = 0, min = 0, max = 0;
};

Stats stats(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

std::string show(const Stats& s) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%8.1f ms  (min %.1f, max %.1f)", s.median, s.min, s.max);
  return buf;
}

// Runs a shell command; its standard output, or die.
std::string run(const std::string& command) {
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) die("cannot run " + command);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  int rc = ::pclose(p);
  if (rc != 0) die(command + " failed (" + std::to_string(rc) + "):\n" + out);
  return out;
}

double epochMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  int servers = 100, runs = 5, jobs = 400;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (a == "--servers") {
      servers = v;
    } else if (a == "--runs") {
      runs = v;
    } else if (a == "--jobs") {
      jobs = v;
    } else {
      die("unknown option " + a + " (--servers N, --runs N, --jobs N)");
    }
  }
  if (::geteuid() != 0) die("needs root: gpool up --demo creates its users");
  const std::string chromium = "/usr/bin/chromium", chromedriver = "/usr/bin/chromedriver";
  if (::access(chromium.c_str(), X_OK) != 0 || ::access(chromedriver.c_str(), X_OK) != 0) {
    die("needs chromium and chromium-driver (scripts/install-deps.sh)");
  }
  const std::string gpool = std::string(GPOOL_BINARY_DIR) + "/src/cli/gpool";
  std::string tmpl = (fs::temp_directory_path() / "gpool-dash-bench-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) die("mkdtemp failed");
  const std::string dir = tmpl;
  ::chmod(dir.c_str(), 0711);
  fs::create_directories(dir + "/browser");
  const int gpus = servers * 8;

  std::fprintf(stderr, "starting a pool of %d simulated servers...\n", servers);
  auto started = std::chrono::steady_clock::now();
  std::string up = run(gpool + " up --dir " + dir + "/pool --simulate --demo --servers " +
                       std::to_string(servers) + " --timeout 600 2>&1");
  std::smatch m;
  if (!std::regex_search(
          up, m, std::regex(R"(\ndashboard (http://127\.0\.0\.1:[0-9]+/)#token=(\S+)\n)"))) {
    die("no dashboard link in:\n" + up);
  }
  const std::string base = m[1], token = m[2];
  std::fprintf(stderr, "pool up in %.0f s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  // More tenants: an array of 1-GPU jobs of a demo user (half the pool when there is room).
  const std::string socket = dir + "/pool/gpoold.sock";
  run("cd /tmp && runuser -u gpool-demo-alice -- env GPOOL_SOCKET=" + socket + " " + gpool +
      " submit --gpus 1 --time 1h --name bench --array 0-" + std::to_string(jobs - 1) +
      " -- sleep 3600 >/dev/null 2>&1");
  gpool::net::HttpClient api(gpool::net::ClientEndpoint::unixSocket(socket),
                             std::chrono::seconds(30));

  int failures = 0;
  {
    WebDriver browser(chromedriver, chromium, dir + "/browser");
    if (!browser.ok()) die("browser: " + browser.lastError());
    auto number = [&](const std::string& script) {
      json v = browser.execute(script);
      return v.is_number() ? v.get<double>() : -1.0;
    };
    auto tiles = [&] { return number("return document.querySelectorAll('.tile').length;"); };
    // The grid's own marks (web/pool.js marks, web/view-pool.js).
    const std::string first_paint =
        "const m = (window.gpoolDashboard ? window.gpoolDashboard.pool.marks : [])"
        ".find((x) => x.what === 'grid-painted' && x.tiles === arguments[0]);"
        "return m ? m.at : -1;";

    // 1. First render, each run a fresh load of the page; the baseline, from the same load, is
    // the page's first contentful paint (its header and shell, before any GPU was read).
    const std::string shell_paint =
        "const e = performance.getEntriesByName('first-contentful-paint')[0];"
        "return e ? e.startTime : -1;";
    std::vector<double> first, shell;
    for (int r = 0; r < runs; ++r) {
      browser.navigate("about:blank");
      browser.navigate(base + "#token=" + token);
      double at = -1;
      waitFor(
          [&] {
            json v = browser.execute(first_paint, json::array({gpus}));
            at = v.is_number() ? v.get<double>() : -1;
            return at >= 0;
          },
          std::chrono::seconds(60));
      if (at < 0)
        die("the grid never showed " + std::to_string(gpus) + " GPUs (" + std::to_string(tiles()) +
            " tiles)");
      first.push_back(at);
      shell.push_back(number(shell_paint));
    }
    // Wait for the telemetry of every GPU, so that the updates below change every tile.
    waitFor(
        [&] {
          return number(
                     "return "
                     "document.querySelectorAll('.tile[data-util]:not([data-util=\"\"])')."
                     "length;") == gpus;
        },
        std::chrono::seconds(60));
    const double with_tenants =
        number("return document.querySelectorAll('.tile:not([data-jobs=\"\"])').length;");
    browser.resize(1400, 1000);
    browser.screenshot(std::string(GPOOL_BINARY_DIR) + "/dashboard-bench-grid.png");

    // 2. Every GPU's utilisation changed: repaint in place against rebuilding the grid.
    const std::string timed =
        "const [rebuild] = arguments; const done = arguments[arguments.length - 1];"
        "const d = window.gpoolDashboard; const view = d.session.views.pool;"
        "const list = [...d.pool.data.gpus.values()].map((g) => Object.assign({}, g, {"
        "  telemetry: g.telemetry ? Object.assign({}, g.telemetry,"
        "    {utilization_pct: (g.telemetry.utilization_pct + 37) % 101}) : g.telemetry }));"
        "const t0 = performance.now();"
        // The baseline takes the list into the data as it is, without the in-place repaint
        // that applyGpus triggers, and draws the whole grid again.
        "if (rebuild) { for (const g of list) d.pool.data.gpus.set(g.uuid, g); view.rebuild(); }"
        "else { d.pool.applyGpus(list); }"
        "const js = performance.now() - t0;"
        "requestAnimationFrame(() => setTimeout(() => done([js, performance.now() - t0]), 0));";
    std::vector<double> patch_js, patch_paint, rebuild_js, rebuild_paint;
    for (int r = 0; r < runs * 2; ++r) {
      for (bool rebuild : {false, true}) {
        json v = browser.executeAsync(timed, json::array({rebuild}));
        if (!v.is_array() || v.size() != 2) die("timing script: " + browser.lastError());
        (rebuild ? rebuild_js : patch_js).push_back(v[0].get<double>());
        (rebuild ? rebuild_paint : patch_paint).push_back(v[1].get<double>());
      }
    }

    // 3. A drain over the API to the page's tiles, end to end.
    const std::string watch =
        "const node = arguments[0]; window.__seen = -1;"
        "const obs = new MutationObserver(() => {"
        "  if (document.querySelector('.tile[data-node=\"' + node + "
        "'\"][data-state=\"drained\"]')) {"
        "    window.__seen = performance.timeOrigin + performance.now(); obs.disconnect(); } });"
        "obs.observe(document.getElementById('gpu-grid'), {attributes: true, subtree: true,"
        "  childList: true, attributeFilter: ['data-state']});"
        "return true;";
    // Idle servers (no tile with a tenant): their GPUs all turn drained at once.
    json idle = browser.execute(
        "return [...document.querySelectorAll('#gpu-grid .server')]"
        ".filter((s) => ![...s.querySelectorAll('.tile')].some((t) => t.dataset.jobs))"
        ".map((s) => s.dataset.node);");
    if (!idle.is_array() || static_cast<int>(idle.size()) < runs) {
      die("fewer than " + std::to_string(runs) + " idle servers to drain: " + idle.dump());
    }
    std::vector<double> e2e, answered;
    for (int r = 0; r < runs; ++r) {
      const std::string node = idle[idle.size() - 1 - r].get<std::string>();
      browser.execute(watch, json::array({node}));
      const double t0 = epochMs();
      auto drained = api.request(gpool::net::Method::kPost, "/v1/nodes/" + node + "/drain",
                                 R"({"reason":"dashboard_bench"})");
      answered.push_back(epochMs() - t0);
      if (!drained.ok() || drained->status != 200) {
        die("drain " + node + ": " + (drained.ok() ? drained->body : drained.status().toString()));
      }
      double seen = -1;
      waitFor([&] {
        seen = number("return window.__seen;");
        return seen > 0;
      });
      if (seen <= 0) {
        ++failures;
        std::fprintf(stderr, "the page never showed %s drained\n", node.c_str());
      } else {
        e2e.push_back(seen - t0);
      }
      auto resumed = api.request(gpool::net::Method::kPost, "/v1/nodes/" + node + "/resume", "{}");
      if (!resumed.ok() || resumed->status != 200) {
        die("resume " + node + ": " + (resumed.ok() ? resumed->body : resumed.status().toString()));
      }
    }

    std::printf(
        "dashboard_bench: %d servers, %d GPUs (%.0f with tenants), Chromium headless, "
        "%d runs\n",
        servers, gpus, with_tenants, runs);
    std::printf("  first render (navigation start to the grid's first paint)  %s\n",
                show(stats(first)).c_str());
    const Stats fr = stats(first), sh = stats(shell);
    std::printf("  baseline, the page's first contentful paint (same loads)     %s\n",
                show(sh).c_str());
    std::printf("  first render / first contentful paint: %.2fx\n",
                sh.median > 0 ? fr.median / sh.median : 0);
    const Stats pj = stats(patch_js), pp = stats(patch_paint), rj = stats(rebuild_js),
                rp = stats(rebuild_paint);
    std::printf("  all %d tiles' utilisation changed, repainted in place:\n", gpus);
    std::printf("    script %s, to the next paint %s\n", show(pj).c_str(), show(pp).c_str());
    std::printf("  baseline, the same list drawn by rebuilding the grid:\n");
    std::printf("    script %s, to the next paint %s\n", show(rj).c_str(), show(rp).c_str());
    std::printf("  in place / rebuild: script %.2fx, to the next paint %.2fx\n",
                rj.median > 0 ? pj.median / rj.median : 0,
                rp.median > 0 ? pp.median / rp.median : 0);
    const Stats ee = stats(e2e), an = stats(answered);
    std::printf("  live update, drain over the API to the server's tiles drained  %s\n",
                show(ee).c_str());
    std::printf("  baseline, the drain request's own answer                      %s\n",
                show(an).c_str());
    std::printf("  tiles drained / answer: %.2fx\n", an.median > 0 ? ee.median / an.median : 0);
  }
  run(gpool + " down --dir " + dir + "/pool --timeout 60 >/dev/null 2>&1");
  std::error_code ec;
  fs::remove_all(dir, ec);
  return failures == 0 ? 0 : 1;
}
