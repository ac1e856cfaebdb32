// Telemetry history: GET /v1/gpus/{uuid}/telemetry, GET /v1/jobs/{id}/telemetry and the pool's
// allocated/used history GET /v1/pool/history.
#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/units.h"
#include "controller/route_helpers.h"
#include "controller/telemetry_history.h"

namespace gpool::controller::routes {

namespace {

using nlohmann::json;

// The resolutions a client may ask for; 1s and 1m come from memory (1m falls back to the store
// for minutes before the controller's start), 5m and 1h from the store.
enum class Resolution { k1s, k1m, k5m, k1h };

struct Query {
  Resolution resolution = Resolution::k1m;
  std::string name = "1m";
  TimePoint since{};
};

Result<Query> parseQuery(const net::Request& req, TimePoint now) {
  Query q;
  if (auto r = req.queryParam("resolution")) {
    if (*r == "1s") {
      q.resolution = Resolution::k1s;
    } else if (*r == "1m") {
      q.resolution = Resolution::k1m;
    } else if (*r == "5m") {
      q.resolution = Resolution::k5m;
    } else if (*r == "1h") {
      q.resolution = Resolution::k1h;
    } else {
      return Status::invalidArgument("resolution: '" + *r + "' is not one of 1s, 1m, 5m, 1h");
    }
    q.name = *r;
  }
  // Defaults: what each resolution keeps (10 min, 1 h of minutes, a day, a week).
  int64_t back_s = q.resolution == Resolution::k1s   ? 600
                   : q.resolution == Resolution::k1m ? 3600
                   : q.resolution == Resolution::k5m ? 24 * 3600
                                                     : 7 * 24 * 3600;
  q.since = now - std::chrono::seconds(back_s);
  if (auto s = req.queryParam("since")) {
    if (!s->empty() && s->find_first_not_of("0123456789") == std::string::npos) {
      GPOOL_ASSIGN_OR_RETURN(int64_t secs, parseId(*s, "since"));
      if (secs > 253'402'300'799) return Status::invalidArgument("since: out of range");
      q.since = fromUnixSeconds(secs);
    } else {
      Result<int64_t> ago = parseDuration(*s);
      if (!ago.ok()) {
        return Status::invalidArgument("since: '" + *s +
                                       "' is neither Unix seconds nor a duration ago such as "
                                       "10m or 2h");
      }
      q.since = now - std::chrono::seconds(*ago);
    }
  }
  return q;
}

json pointJson(const TelemetryPoint& p) {
  return json{{"time_us", int64_t{p.at_s} * 1'000'000},
              {"utilization_pct", p.utilization_pct},
              {"memory_used_mib", p.memory_used_mib},
              {"temperature_c", p.temperature_c},
              {"power_w", p.power_w},
              {"samples", p.samples}};
}

json storedJson(const store::TelemetrySample& s) {
  json j{{"time_us", toUnixMicros(s.time)},
         {"utilization_pct", s.util_percent},
         {"memory_used_mib", s.memory_used_mib},
         {"temperature_c", s.temperature_c},
         {"power_w", s.power_w}};
  if (s.job_id) j["job_id"] = *s.job_id;
  return j;
}

json storedTaskJson(const store::TaskTelemetrySample& s) {
  return json{{"time_us", toUnixMicros(s.time)},
              {"utilization_pct", s.util_percent},
              {"memory_used_mib", s.memory_used_mib},
              {"temperature_c", s.temperature_c},
              {"power_w", s.power_w}};
}

store::TelemetryResolution storedResolution(Resolution r) {
  return r == Resolution::k1m   ? store::TelemetryResolution::kRaw
         : r == Resolution::k5m ? store::TelemetryResolution::kFiveMinutes
                                : store::TelemetryResolution::kHourly;
}

json poolPointJson(const PoolPoint& p, bool totals) {
  json j{{"time_us", int64_t{p.at_s} * 1'000'000},
         {"gpus_allocated", p.use.gpus_allocated},
         {"gpus_used", p.use.gpus_used},
         {"memory_allocated_mib", p.use.memory_allocated_mib},
         {"memory_used_mib", p.use.memory_used_mib},
         {"samples", p.samples}};
  if (totals) {
    j["gpus"] = p.use.gpus;
    j["memory_mib"] = p.use.memory_mib;
  }
  return j;
}

json poolPointsJson(const std::vector<PoolPoint>& points, bool totals) {
  json out = json::array();
  for (const PoolPoint& p : points)
    out.push_back(poolPointJson(p, totals));
  return out;
}

// GET /v1/pool/history?range=hour|day|week&by=user|group: the pool's totals for everyone (as
// /v1/summary), the series of the users or groups the caller may see (maySeeUser/maySeeGroup,
// as GET /v1/usage).
Status addPoolHistoryRoute(net::Router& router, const Context& ctx) {
  return router.add(
      net::Method::kGet, "/v1/pool/history",
      authed(
          ctx, {"range", "by"},
          [ctx](const Caller& caller, const net::Request& req) -> Result<net::Response> {
            std::string range_name = req.queryParam("range").value_or("hour");
            PoolRange range = PoolRange::kHour;
            if (range_name == "day") {
              range = PoolRange::kDay;
            } else if (range_name == "week") {
              range = PoolRange::kWeek;
            } else if (range_name != "hour") {
              return Status::invalidArgument("range: '" + range_name +
                                             "' is not one of hour, day, week");
            }
            std::string by = req.queryParam("by").value_or("user");
            if (by != "user" && by != "group") {
              return Status::invalidArgument("by: '" + by + "' is not one of user, group");
            }
            TimePoint now = ctx.clock->now();
            PoolHistoryAnswer a = ctx.pool_history != nullptr ? ctx.pool_history->query(range, now)
                                                              : PoolHistory::empty(range, now);
            json series = json::array();
            for (const PoolSeries& s : by == "user" ? a.users : a.groups) {
              bool visible = by == "user" ? maySeeUser(caller, s.key) : maySeeGroup(caller, s.key);
              if (!visible) continue;
              series.push_back(json{{"key", s.key}, {"points", poolPointsJson(s.points, false)}});
            }
            return jsonResponse(
                200, json{{"range", range_name},
                          {"resolution", a.resolution},
                          {"since_us", toUnixMicros(a.since)},
                          {"simulated", a.simulated},
                          {"pool", json{{"points", poolPointsJson(a.pool.points, true)}}},
                          {"by", by},
                          {"series", std::move(series)}});
          }));
}

}  // namespace

Status addTelemetryRoutes(net::Router& router, const Context& ctx) {
  Status added = router.add(
      net::Method::kGet, "/v1/gpus/{uuid}/telemetry",
      authed(ctx, {"since", "resolution"},
             [ctx](const Caller&, const net::Request& req) -> Result<net::Response> {
               std::string uuid = req.pathParam("uuid");
               std::string node;
               bool simulated = false;
               for (const api::Node& n : ctx.registry->nodes()) {
                 if (const api::Gpu* g = n.findGpu(uuid)) {
                   node = n.name;
                   simulated = g->simulated;
                 }
               }
               if (node.empty()) return Status::notFound("uuid: no GPU '" + uuid + "' in the pool");
               TimePoint now = ctx.clock->now();
               GPOOL_ASSIGN_OR_RETURN(Query q, parseQuery(req, now));
               json points = json::array();
               std::vector<TelemetryPoint> memory;
               if (ctx.telemetry && q.resolution != Resolution::k5m &&
                   q.resolution != Resolution::k1h) {
                 memory = ctx.telemetry->gpuHistory(uuid,
                                                    q.resolution == Resolution::k1s
                                                        ? HistoryResolution::kSecond
                                                        : HistoryResolution::kMinute,
                                                    q.since);
               }
               if (q.resolution != Resolution::k1s) {
                 // Stored rows before the first minute held in memory (a restart emptied it).
                 TimePoint until = memory.empty() ? now + std::chrono::minutes(1)
                                                  : fromUnixSeconds(memory.front().at_s);
                 GPOOL_ASSIGN_OR_RETURN(
                     std::vector<store::TelemetrySample> stored,
                     ctx.store->gpuTelemetry(uuid, storedResolution(q.resolution), q.since, until));
                 for (const store::TelemetrySample& s : stored)
                   points.push_back(storedJson(s));
               }
               for (const TelemetryPoint& p : memory)
                 points.push_back(pointJson(p));
               return jsonResponse(200, json{{"uuid", uuid},
                                             {"node", node},
                                             {"simulated", simulated},
                                             {"resolution", q.name},
                                             {"since_us", toUnixMicros(q.since)},
                                             {"points", std::move(points)}});
             }));
  if (!added.isOk()) return added;
  added = addPoolHistoryRoute(router, ctx);
  if (!added.isOk()) return added;

  return router.add(
      net::Method::kGet, "/v1/jobs/{id}/telemetry",
      authed(ctx, {"since", "resolution"},
             [ctx](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(int64_t id, parseId(req.pathParam("id"), "id"));
               // The owner, an admin of the job's group, or an admin (JobAction::kShow).
               GPOOL_ASSIGN_OR_RETURN(api::Job job, ctx.jobs->show(caller, id));
               (void)job;
               TimePoint now = ctx.clock->now();
               GPOOL_ASSIGN_OR_RETURN(Query q, parseQuery(req, now));
               // Per task: what the store kept (minutes before those held in memory, which a
               // restart or an eviction emptied; all of 5m and 1h), then memory's points.
               struct TaskPoints {
                 std::string node;
                 std::vector<std::string> gpus;
                 std::vector<store::TaskTelemetrySample> stored;
                 std::vector<TelemetryPoint> memory;
               };
               std::map<uint32_t, TaskPoints> by_task;
               if (ctx.telemetry &&
                   (q.resolution == Resolution::k1s || q.resolution == Resolution::k1m)) {
                 for (TaskHistory& t : ctx.telemetry->jobHistory(id,
                                                                 q.resolution == Resolution::k1s
                                                                     ? HistoryResolution::kSecond
                                                                     : HistoryResolution::kMinute,
                                                                 q.since)) {
                   TaskPoints& entry = by_task[t.task];
                   entry.node = t.node;
                   entry.gpus = std::move(t.gpus);
                   entry.memory = std::move(t.points);
                 }
               }
               if (q.resolution != Resolution::k1s) {
                 GPOOL_ASSIGN_OR_RETURN(
                     std::vector<store::TaskTelemetrySample> stored,
                     ctx.store->taskTelemetry(id, storedResolution(q.resolution), q.since,
                                              now + std::chrono::minutes(1)));
                 for (store::TaskTelemetrySample& sample : stored) {
                   TaskPoints& entry = by_task[sample.task];
                   if (!entry.memory.empty() &&
                       sample.time >= fromUnixSeconds(entry.memory.front().at_s)) {
                     continue;
                   }
                   if (entry.node.empty()) entry.node = sample.node;
                   entry.stored.push_back(std::move(sample));
                 }
               }
               json tasks = json::array();
               for (auto& [task, entry] : by_task) {
                 json points = json::array();
                 for (const store::TaskTelemetrySample& sample : entry.stored)
                   points.push_back(storedTaskJson(sample));
                 for (const TelemetryPoint& p : entry.memory)
                   points.push_back(pointJson(p));
                 tasks.push_back(json{{"task", task},
                                      {"node", entry.node},
                                      {"gpus", entry.gpus},
                                      {"points", std::move(points)}});
               }
               // What the store kept: minutes of GPUs the job held alone (survives restarts).
               json gpus = json::array();
               if (q.resolution != Resolution::k1s) {
                 GPOOL_ASSIGN_OR_RETURN(
                     std::vector<store::TelemetrySample> stored,
                     ctx.store->jobTelemetry(id, storedResolution(q.resolution), q.since,
                                             now + std::chrono::minutes(1)));
                 std::map<std::string, json> by_gpu;
                 for (const store::TelemetrySample& s : stored) {
                   json& points = by_gpu[s.gpu_uuid];
                   if (points.is_null()) points = json::array();
                   points.push_back(storedJson(s));
                 }
                 for (auto& [uuid, points] : by_gpu)
                   gpus.push_back(json{{"uuid", uuid}, {"points", std::move(points)}});
               }
               return jsonResponse(200, json{{"job_id", id},
                                             {"resolution", q.name},
                                             {"since_us", toUnixMicros(q.since)},
                                             {"tasks", std::move(tasks)},
                                             {"stored_gpus", std::move(gpus)}});
             }));
}

}  // namespace gpool::controller::routes
