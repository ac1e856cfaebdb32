#pragma once

// Shared by the benchmarks that drive a server with concurrent clients (net_bench,
// controller_bench): run N client threads for a fixed time, or for a fixed number of calls, and
// summarise the latencies of the calls that succeeded.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"

namespace gpool::bench {

struct Figures {
  std::string name;
  uint64_t requests = 0;  // calls that succeeded
  uint64_t errors = 0;
  double seconds = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double rps() const { return seconds > 0 ? static_cast<double>(requests) / seconds : 0; }
};

// The figures of a run: `latencies_ms` per client (successful calls only), merged and ranked.
inline Figures summarise(const std::string& name,
                         const std::vector<std::vector<double>>& latencies_ms, uint64_t errors,
                         double seconds) {
  std::vector<double> all;
  for (const auto& v : latencies_ms)
    all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  Figures f;
  f.name = name;
  f.requests = all.size();
  f.errors = errors;
  f.seconds = seconds;
  if (!all.empty()) {
    f.p50_ms = all[all.size() / 2];
    f.p99_ms = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  }
  return f;
}

// Runs `clients` threads. Each gets its own call from `make_client` (one request/response,
// true on success), makes one warm-up call outside the measurement (connects), then calls it
// until `seconds` have passed or, when `calls_per_client` > 0, that many times. All threads
// start together once every one has warmed up.
//
// With `rate_per_client` > 0 each client paces itself instead (an open loop): its calls arrive
// as a Poisson process of that rate (exponential gaps, seeded per client so runs repeat), the
// client waits for each due time when it is early, and the latency counts from the due time, so
// a server that falls behind is charged for the queueing it causes (no coordinated omission).
// Independent arrivals are what many users' clients produce; a fixed k / rate schedule would
// make every client fire at the same instants, a burst of `clients` requests each period.
inline Figures drive(const std::string& name, int clients, double seconds,
                     const std::function<std::function<bool()>()>& make_client,
                     int calls_per_client = 0, bool warm_up = true, double rate_per_client = 0) {
  std::vector<std::vector<double>> lat(static_cast<size_t>(clients));
  std::atomic<uint64_t> errors{0};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  const auto budget = std::chrono::duration_cast<Micros>(std::chrono::duration<double>(seconds));
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      std::function<bool()> one = make_client();
      if (warm_up && !one()) errors.fetch_add(1);
      ready.fetch_add(1);
      while (!go.load())
        std::this_thread::yield();
      const auto start = realClock().monotonic();
      std::mt19937_64 arrivals(0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(i));
      std::exponential_distribution<double> gap(rate_per_client > 0 ? rate_per_client : 1.0);
      double due_s = 0;  // seconds after start
      for (int n = 0; calls_per_client <= 0 || n < calls_per_client; ++n) {
        auto t0 = realClock().monotonic();
        if (calls_per_client <= 0 && t0 - start >= budget) break;
        if (rate_per_client > 0) {
          due_s += gap(arrivals);
          const auto due =
              start + std::chrono::duration_cast<Micros>(std::chrono::duration<double>(due_s));
          if (due >= start + budget && calls_per_client <= 0) break;
          if (due > t0) std::this_thread::sleep_for(due - t0);
          t0 = due;
        }
        bool ok = one();
        const auto t1 = realClock().monotonic();
        if (!ok) {
          errors.fetch_add(1);
          continue;
        }
        lat[static_cast<size_t>(i)].push_back(static_cast<double>((t1 - t0).count()) / 1000.0);
      }
    });
  }
  while (ready.load() < clients)
    std::this_thread::yield();
  const auto start = realClock().monotonic();
  go.store(true);
  for (auto& t : threads)
    t.join();
  const auto end = realClock().monotonic();
  return summarise(name, lat, errors.load(), static_cast<double>((end - start).count()) / 1e6);
}

}  // namespace gpool::bench
