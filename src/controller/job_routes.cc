// Jobs: submit, list, show, events, cancel, requeue.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job.h"
#include "api/job_spec.h"
#include "api/json_reader.h"
#include "controller/route_helpers.h"
#include "store/api_codec.h"

namespace gpool::controller::routes {

namespace {

using nlohmann::json;

constexpr int64_t kMaxLogChunk = 1 << 20;  // bytes per GET /v1/jobs/{id}/log

// The routes that change jobs: most of their run is the wait for a durable commit, so they run
// on the server's blocking pool, where many wait at once and share fsyncs while the API threads
// keep serving reads.
constexpr net::RouteOptions kCommits{.blocking = true};

json eventJson(const store::JobEvent& e) {
  return json{{"seq", e.seq},
              {"time_us", toUnixMicros(e.time)},
              {"from_state", e.fromStateName()},
              {"to_state", api::jobStateName(e.to_state)},
              {"reason", e.reason}};
}

}  // namespace

Status addJobRoutes(net::Router& router, const Context& ctx) {
  JobService& jobs = *ctx.jobs;
  // Plain checks rather than GPOOL_RETURN_IF_ERROR: the handlers use that macro inside, and a
  // nested expansion would shadow its variable.
  Status added;
  added = router.add(
      net::Method::kPost, "/v1/jobs",
      authed(ctx, {"group"},
             [&jobs](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(json body, parseObjectBody(req, false));
               SubmitRequest submit;
               GPOOL_RETURN_IF_ERROR(api::fromJson(body, &submit.spec, "job"));
               submit.group = req.queryParam("group").value_or("");
               GPOOL_ASSIGN_OR_RETURN(std::vector<int64_t> ids, jobs.submit(caller, submit));
               return jsonResponse(201, json{{"ids", ids}});
             }),
      kCommits);
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kGet, "/v1/jobs",
      authed(ctx, {"user", "group", "state", "after", "limit"},
             [&jobs](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               store::JobFilter filter;
               filter.user = req.queryParam("user");
               filter.group = req.queryParam("group");
               for (const std::string& s : req.queryParams("state")) {
                 Result<api::JobState> state = api::parseJobState(s);
                 if (!state.ok()) return state.status().withContext("state");
                 filter.states.push_back(*state);
               }
               if (auto after = req.queryParam("after")) {
                 GPOOL_ASSIGN_OR_RETURN(filter.after_id, parseId(*after, "after"));
               }
               if (auto limit = req.queryParam("limit")) {
                 GPOOL_ASSIGN_OR_RETURN(int64_t l, parseId(*limit, "limit"));
                 if (l < 1 || l > store::kMaxPageSize) {
                   return Status::invalidArgument("limit: must be in [1, " +
                                                  std::to_string(store::kMaxPageSize) + "]");
                 }
                 filter.limit = static_cast<int32_t>(l);
               }
               GPOOL_ASSIGN_OR_RETURN(store::JobPage page, jobs.list(caller, filter));
               // {"jobs":[...],"next_after":N|null}, written as text so that each job's
               // stored spec is served as stored (store::apiJobJsonText).
               std::string body = "{\"jobs\":[";
               for (size_t i = 0; i < page.jobs.size(); ++i) {
                 std::optional<PendingInsight> insight = jobs.insightOf(page.jobs[i]);
                 GPOOL_ASSIGN_OR_RETURN(
                     std::string j, insight ? store::apiJobJsonText(page.jobs[i], insight->detail,
                                                                    insight->expected_start)
                                            : store::apiJobJsonText(page.jobs[i]));
                 if (i > 0) body += ',';
                 body += j;
               }
               body += "],\"next_after\":";
               body += page.next_after_id ? std::to_string(*page.next_after_id) : "null";
               body += '}';
               return net::Response::json(200, std::move(body));
             }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kGet, "/v1/jobs/{id}",
      authed(ctx, {},
             [&jobs](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(int64_t id, parseId(req.pathParam("id"), "id"));
               GPOOL_ASSIGN_OR_RETURN(api::Job job, jobs.show(caller, id));
               return jsonResponse(200, api::toJson(job));
             }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kGet, "/v1/jobs/{id}/events",
      authed(ctx, {},
             [&jobs](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(int64_t id, parseId(req.pathParam("id"), "id"));
               GPOOL_ASSIGN_OR_RETURN(std::vector<store::JobEvent> events, jobs.events(caller, id));
               json out = json::array();
               for (const store::JobEvent& e : events)
                 out.push_back(eventJson(e));
               return jsonResponse(200, json{{"id", id}, {"events", std::move(out)}});
             }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kPost, "/v1/jobs/{id}/cancel",
      authed(ctx, {},
             [&jobs](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(int64_t id, parseId(req.pathParam("id"), "id"));
               GPOOL_RETURN_IF_ERROR(expectNoBody(req));
               GPOOL_RETURN_IF_ERROR(jobs.cancel(caller, id));
               return jsonResponse(
                   200, json{{"id", id}, {"state", api::jobStateName(api::JobState::kCancelled)}});
             }),
      kCommits);
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kPost, "/v1/jobs/{id}/requeue",
      authed(ctx, {},
             [&jobs](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(int64_t id, parseId(req.pathParam("id"), "id"));
               GPOOL_RETURN_IF_ERROR(expectNoBody(req));
               GPOOL_RETURN_IF_ERROR(jobs.requeue(caller, id));
               return jsonResponse(
                   200, json{{"id", id}, {"state", api::jobStateName(api::JobState::kPending)}});
             }),
      kCommits);
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kPatch, "/v1/jobs/{id}",
      authed(ctx, {},
             [&jobs](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(int64_t id, parseId(req.pathParam("id"), "id"));
               GPOOL_ASSIGN_OR_RETURN(json body, parseObjectBody(req, false));
               std::optional<int64_t> time_limit;
               std::optional<int32_t> priority;
               api::ObjectReader r(body, "body");
               r.optionalQuantity("time_limit", api::Quantity::kDuration, &time_limit);
               r.optionalInteger("priority", &priority, -1'000'000, 1'000'000);
               GPOOL_RETURN_IF_ERROR(r.finish());
               if (!time_limit && !priority) {
                 return Status::invalidArgument(
                     "body.time_limit: give time_limit (or time_limit_seconds) and/or priority");
               }
               GPOOL_RETURN_IF_ERROR(jobs.update(caller, id, time_limit, priority));
               GPOOL_ASSIGN_OR_RETURN(api::Job job, jobs.show(caller, id));
               return jsonResponse(200, api::toJson(job));
             }),
      kCommits);
  if (!added.isOk()) return added;

  // A piece of a task's output; clients follow a log by polling with next_offset until
  // `complete` (a handler never blocks an I/O thread waiting for output, nor for the agent of
  // another server: `pending` asks the client to repeat the request shortly).
  added = router.add(
      net::Method::kGet, "/v1/jobs/{id}/log",
      authed(ctx, {"task", "stream", "offset", "limit", "attempt"},
             [&jobs](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(int64_t id, parseId(req.pathParam("id"), "id"));
               int64_t task = 0;
               if (auto t = req.queryParam("task")) {
                 GPOOL_ASSIGN_OR_RETURN(task, parseId(*t, "task"));
               }
               std::string stream = req.queryParam("stream").value_or("stdout");
               if (stream != "stdout" && stream != "stderr") {
                 return Status::invalidArgument("stream: expected stdout or stderr, got '" +
                                                stream + "'");
               }
               int64_t offset = 0;
               if (auto o = req.queryParam("offset")) {
                 GPOOL_ASSIGN_OR_RETURN(offset, parseId(*o, "offset"));
               }
               int64_t limit = kMaxLogChunk;
               if (auto l = req.queryParam("limit")) {
                 GPOOL_ASSIGN_OR_RETURN(limit, parseId(*l, "limit"));
                 if (limit < 1 || limit > kMaxLogChunk) {
                   return Status::invalidArgument("limit: must be in [1, " +
                                                  std::to_string(kMaxLogChunk) + "]");
                 }
               }
               if (task > 1'000'000) return Status::invalidArgument("task: out of range");
               // Which run of a requeued job (from 1); absent: the latest.
               int64_t attempt = 0;
               if (auto a = req.queryParam("attempt")) {
                 GPOOL_ASSIGN_OR_RETURN(attempt, parseId(*a, "attempt"));
                 if (attempt < 1 || attempt > 1'000'000) {
                   return Status::invalidArgument("attempt: must be in [1, 1000000], got " + *a);
                 }
               }
               GPOOL_ASSIGN_OR_RETURN(
                   LogChunk chunk,
                   jobs.readLog(caller, id, static_cast<uint32_t>(task), stream == "stderr",
                                static_cast<uint64_t>(offset), static_cast<uint64_t>(limit),
                                static_cast<uint32_t>(attempt)));
               return jsonResponse(200, json{{"id", id},
                                             {"task", task},
                                             {"stream", stream},
                                             {"node", chunk.node},
                                             {"path", chunk.path},
                                             {"offset", chunk.offset},
                                             {"next_offset", chunk.next_offset},
                                             {"size", chunk.size},
                                             {"state", api::jobStateName(chunk.state)},
                                             {"complete", chunk.complete},
                                             {"pending", chunk.pending},
                                             {"attempt", chunk.attempt},
                                             {"attempts", chunk.attempts},
                                             {"data", chunk.data}});
             }));
  if (!added.isOk()) return added;

  // Hold and release answer the job's state and reason after the change.
  auto holdRoute = [&jobs](bool hold) {
    return [&jobs, hold](const Caller& caller, const net::Request& req) -> Result<net::Response> {
      GPOOL_ASSIGN_OR_RETURN(int64_t id, parseId(req.pathParam("id"), "id"));
      GPOOL_RETURN_IF_ERROR(expectNoBody(req));
      GPOOL_RETURN_IF_ERROR(hold ? jobs.hold(caller, id) : jobs.release(caller, id));
      GPOOL_ASSIGN_OR_RETURN(api::Job job, jobs.show(caller, id));
      return jsonResponse(
          200, json{{"id", id}, {"state", api::jobStateName(job.state)}, {"reason", job.reason}});
    };
  };
  added = router.add(net::Method::kPost, "/v1/jobs/{id}/hold", authed(ctx, {}, holdRoute(true)),
                     kCommits);
  if (!added.isOk()) return added;
  return router.add(net::Method::kPost, "/v1/jobs/{id}/release", authed(ctx, {}, holdRoute(false)),
                    kCommits);
}

}  // namespace gpool::controller::routes
