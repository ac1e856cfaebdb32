// The pool: nodes (list, show, drain, resume), GPUs and the summary.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job.h"
#include "api/json_reader.h"
#include "api/node.h"
#include "api/text.h"
#include "controller/api_routes.h"
#include "controller/route_helpers.h"
#include "store/api_codec.h"

namespace gpool::controller::routes {

namespace {

using nlohmann::json;

// Longest drain reason accepted (Slurm keeps reasons short; they show in every node listing).
constexpr size_t kMaxReasonBytes = 256;

// What running and completing jobs hold: compute share (thousandths) per GPU, and the nodes
// with any task (a CPU-only task holds its node too).
struct PoolUse {
  std::map<std::string, uint64_t> gpu_milli;
  std::set<std::string> busy_nodes;
  // Per GPU: the tasks holding it (job, task, user, job name, slice), for /v1/gpus.
  std::map<std::string, json> tenants;
};

Result<PoolUse> poolUse(store::Store& store) {
  GPOOL_ASSIGN_OR_RETURN(std::vector<store::JobRecord> running,
                         store.jobsInStates({api::JobState::kRunning, api::JobState::kCompleting}));
  PoolUse use;
  for (const store::JobRecord& record : running) {
    GPOOL_ASSIGN_OR_RETURN(api::Job job, store::apiJobFrom(record));
    for (const api::Allocation& a : job.allocations) {
      use.busy_nodes.insert(a.node);
      for (const api::Slice& s : a.slices) {
        use.gpu_milli[s.gpu_uuid] += s.compute_milli;
        json& list = use.tenants[s.gpu_uuid];
        if (list.is_null()) list = json::array();
        list.push_back(json{{"job_id", record.id},
                            {"task", a.task},
                            {"user", record.user},
                            {"job_name", job.spec.name},
                            {"compute_milli", s.compute_milli},
                            {"memory_mib", s.memory_mib},
                            {"exclusive", s.exclusive}});
      }
    }
  }
  return use;
}

// The registry keeps what agents and admins decide (up, DRAINING, DOWN); how much of an up node
// is in use is derived here, as Slurm's sinfo does: IDLE (nothing runs), ALLOCATED (every GPU's
// whole compute share is held; a node without GPUs: any task), else MIXED. A draining node with
// nothing left running reads DRAINED, and a drained one that still runs something DRAINING.
api::Node withDerivedState(api::Node node, const PoolUse& use) {
  bool busy = use.busy_nodes.count(node.name) > 0;
  switch (node.state) {
    case api::NodeState::kIdle:
    case api::NodeState::kMixed:
    case api::NodeState::kAllocated: {
      if (!busy) {
        node.state = api::NodeState::kIdle;
        break;
      }
      bool full = true;
      for (const api::Gpu& gpu : node.gpus) {
        auto it = use.gpu_milli.find(gpu.uuid);
        if (it == use.gpu_milli.end() || it->second < 1000) full = false;
      }
      node.state = full ? api::NodeState::kAllocated : api::NodeState::kMixed;
      break;
    }
    case api::NodeState::kDraining:
    case api::NodeState::kDrained:
      node.state = busy ? api::NodeState::kDraining : api::NodeState::kDrained;
      break;
    case api::NodeState::kDown: break;
  }
  return node;
}

// One GPU's state, from the most to the least limiting: "down" (its node is DOWN),
// "unhealthy", "allocated" (its whole compute share is held), "mixed" (part of it),
// "drained" (its node is draining or drained and nothing runs on it), "idle".
std::string gpuState(const api::Node& node, const api::Gpu& gpu, uint64_t used_milli) {
  if (node.state == api::NodeState::kDown) return "down";
  if (gpu.health == api::GpuHealth::kUnhealthy) return "unhealthy";
  if (used_milli >= 1000) return "allocated";
  if (used_milli > 0) return "mixed";
  if (node.state == api::NodeState::kDraining || node.state == api::NodeState::kDrained) {
    return "drained";
  }
  return "idle";
}

json readingJson(const GpuReading& r) {
  json processes = json::array();
  for (const GpuProcessUse& p : r.processes) {
    json j{{"pid", p.pid}, {"used_mib", p.used_mib}};
    if (p.job_id) j["job_id"] = *p.job_id;
    if (p.task) j["task"] = *p.task;
    processes.push_back(std::move(j));
  }
  return json{{"taken_at_us", toUnixMicros(r.taken_at)},
              {"utilization_pct", r.utilization_pct},
              {"memory_utilization_pct", r.memory_utilization_pct},
              {"memory_used_mib", r.memory_used_mib},
              {"memory_total_mib", r.memory_total_mib},
              {"temperature_c", r.temperature_c},
              {"power_w", r.power_w},
              {"sm_clock_mhz", r.sm_clock_mhz},
              {"memory_clock_mhz", r.memory_clock_mhz},
              {"ecc_corrected", r.ecc_corrected ? json(*r.ecc_corrected) : json(nullptr)},
              {"ecc_uncorrected", r.ecc_uncorrected ? json(*r.ecc_uncorrected) : json(nullptr)},
              {"xid_errors", r.xid_errors},
              {"processes", std::move(processes)}};
}

json gpuJson(const api::Node& node, const api::Gpu& gpu, uint64_t used_milli) {
  return json{{"node", node.name},
              {"index", gpu.index},
              {"uuid", gpu.uuid},
              {"model", gpu.model},
              {"memory_mib", gpu.memory_mib},
              {"health", api::gpuHealthName(gpu.health)},
              {"health_reason", gpu.health_reason},
              {"state", gpuState(node, gpu, used_milli)},
              {"allocated_milli", std::min<uint64_t>(used_milli, 1000)},
              {"simulated", gpu.simulated}};
}

Result<std::string> nodeName(const net::Request& req) {
  std::string name = req.pathParam("name");
  Status valid = api::validateNodeName(name);
  if (!valid.isOk()) return valid.withContext("name");
  return name;
}

}  // namespace

Status addNodeRoutes(net::Router& router, const Context& ctx) {
  NodeRegistry& registry = *ctx.registry;
  store::Store& store = *ctx.store;
  Status added;
  added = router.add(
      net::Method::kGet, "/v1/nodes",
      authed(ctx, {},
             [&registry, &store](const Caller&, const net::Request&) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(PoolUse use, poolUse(store));
               json out = json::array();
               for (const api::Node& node : registry.nodes())
                 out.push_back(api::toJson(withDerivedState(node, use)));
               return jsonResponse(200, json{{"nodes", std::move(out)}});
             }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kGet, "/v1/nodes/{name}",
      authed(ctx, {},
             [&registry, &store](const Caller&, const net::Request& req) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(std::string name, nodeName(req));
               GPOOL_ASSIGN_OR_RETURN(api::Node node, registry.node(name));
               GPOOL_ASSIGN_OR_RETURN(PoolUse use, poolUse(store));
               return jsonResponse(200, api::toJson(withDerivedState(std::move(node), use)));
             }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kPost, "/v1/nodes/{name}/drain",
      authed(ctx, {},
             [&registry, &store](const Caller& caller,
                                 const net::Request& req) -> Result<net::Response> {
               GPOOL_RETURN_IF_ERROR(checkNodeAdmin(caller));
               GPOOL_ASSIGN_OR_RETURN(std::string name, nodeName(req));
               GPOOL_ASSIGN_OR_RETURN(json body, parseObjectBody(req, false));
               std::string reason;
               api::ObjectReader r(body, "body");
               r.string("reason", &reason, api::Presence::kRequired);
               r.check(reason.find_first_not_of(" \t") != std::string::npos, "reason",
                       "must not be empty (say why the node is drained)");
               r.check(reason.size() <= kMaxReasonBytes, "reason",
                       "longer than " + std::to_string(kMaxReasonBytes) + " bytes");
               GPOOL_RETURN_IF_ERROR(r.finish());
               GPOOL_RETURN_IF_ERROR(api::validateDisplayText(reason, "body.reason"));
               GPOOL_RETURN_IF_ERROR(registry.drain(name, reason));
               GPOOL_ASSIGN_OR_RETURN(api::Node node, registry.node(name));
               GPOOL_ASSIGN_OR_RETURN(PoolUse use, poolUse(store));
               return jsonResponse(200, api::toJson(withDerivedState(std::move(node), use)));
             }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kPost, "/v1/nodes/{name}/gpus/{index}/clear",
      authed(ctx, {},
             [&registry, &store, ctx](const Caller& caller,
                                      const net::Request& req) -> Result<net::Response> {
               GPOOL_RETURN_IF_ERROR(checkNodeAdmin(caller));
               GPOOL_ASSIGN_OR_RETURN(std::string name, nodeName(req));
               GPOOL_ASSIGN_OR_RETURN(int64_t index, parseId(req.pathParam("index"), "index"));
               GPOOL_RETURN_IF_ERROR(expectNoBody(req));
               GPOOL_RETURN_IF_ERROR(
                   registry.clearGpuHold(name, static_cast<uint32_t>(index), caller.user).status());
               if (ctx.gpu_cleared) ctx.gpu_cleared(name);
               GPOOL_ASSIGN_OR_RETURN(api::Node node, registry.node(name));
               GPOOL_ASSIGN_OR_RETURN(PoolUse use, poolUse(store));
               return jsonResponse(200, api::toJson(withDerivedState(std::move(node), use)));
             }));
  if (!added.isOk()) return added;

  added = router.add(net::Method::kPost, "/v1/nodes/{name}/resume",
                     authed(ctx, {},
                            [&registry, &store](const Caller& caller,
                                                const net::Request& req) -> Result<net::Response> {
                              GPOOL_RETURN_IF_ERROR(checkNodeAdmin(caller));
                              GPOOL_ASSIGN_OR_RETURN(std::string name, nodeName(req));
                              GPOOL_RETURN_IF_ERROR(expectNoBody(req));
                              GPOOL_RETURN_IF_ERROR(registry.resume(name));
                              GPOOL_ASSIGN_OR_RETURN(api::Node node, registry.node(name));
                              GPOOL_ASSIGN_OR_RETURN(PoolUse use, poolUse(store));
                              return jsonResponse(
                                  200, api::toJson(withDerivedState(std::move(node), use)));
                            }));
  if (!added.isOk()) return added;

  // An admin removes a node (a server taken out of the pool, or one whose agent reported
  // nonsense): its record, GPUs and credentials go in one transaction, and its GPU UUIDs are
  // free for another node. Refused while jobs hold it.
  added = router.add(
      net::Method::kDelete, "/v1/nodes/{name}",
      authed(ctx, {},
             [&registry, &store, ctx](const Caller& caller,
                                      const net::Request& req) -> Result<net::Response> {
               GPOOL_RETURN_IF_ERROR(checkNodeAdmin(caller));
               GPOOL_ASSIGN_OR_RETURN(std::string name, nodeName(req));
               GPOOL_RETURN_IF_ERROR(expectNoBody(req));
               GPOOL_RETURN_IF_ERROR(registry.node(name).status());
               GPOOL_ASSIGN_OR_RETURN(PoolUse use, poolUse(store));
               if (use.busy_nodes.count(name) > 0) {
                 return Status::failedPrecondition(
                     "node '" + name + "' still runs jobs: drain it (gpool drain " + name +
                     " --reason ...) and wait for them to end, or cancel them, then remove it");
               }
               GPOOL_RETURN_IF_ERROR(registry.removeNode(name, caller.user));
               if (ctx.node_removed) ctx.node_removed(name);
               return jsonResponse(200, json{{"deleted", name}});
             }));
  if (!added.isOk()) return added;

  added = router.add(net::Method::kGet, "/v1/gpus",
                     authed(ctx, {"node"},
                            [&registry, &store, telemetry = ctx.telemetry](
                                const Caller&, const net::Request& req) -> Result<net::Response> {
                              std::optional<std::string> only = req.queryParam("node");
                              if (only) {
                                Status valid = api::validateNodeName(*only);
                                if (!valid.isOk()) return valid.withContext("node");
                              }
                              GPOOL_ASSIGN_OR_RETURN(PoolUse use, poolUse(store));
                              json out = json::array();
                              bool found = !only;
                              for (const api::Node& node : registry.nodes()) {
                                if (only && node.name != *only) continue;
                                found = true;
                                for (const api::Gpu& gpu : node.gpus) {
                                  json g = gpuJson(node, gpu, use.gpu_milli[gpu.uuid]);
                                  json& tenants = use.tenants[gpu.uuid];
                                  g["tenants"] = tenants.is_null() ? json::array() : tenants;
                                  std::optional<GpuReading> reading;
                                  if (telemetry) reading = telemetry->latest(gpu.uuid);
                                  g["telemetry"] = reading ? readingJson(*reading) : json(nullptr);
                                  out.push_back(std::move(g));
                                }
                              }
                              if (!found)
                                return Status::notFound("node: unknown node '" + *only + "'");
                              return jsonResponse(200, json{{"gpus", std::move(out)}});
                            }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kGet, "/v1/summary",
      authed(ctx, {},
             [&registry, &store](const Caller&, const net::Request&) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(json out, poolSummary(store, registry));
               return jsonResponse(200, out);
             }));
  return added;
}

}  // namespace gpool::controller::routes

namespace gpool::controller {

Result<nlohmann::json> poolSummary(store::Store& store, const NodeRegistry& registry) {
  using nlohmann::json;
  using routes::gpuState;
  using routes::poolUse;
  using routes::PoolUse;
  using routes::withDerivedState;
  GPOOL_ASSIGN_OR_RETURN(PoolUse use, poolUse(store));
  GPOOL_ASSIGN_OR_RETURN(auto job_counts, store.countJobsByState());
  json nodes_by_state = json::object();
  json gpus_by_state = json::object();
  int64_t node_total = 0;
  int64_t gpu_total = 0;
  uint64_t allocated_milli = 0;
  for (const api::Node& registered : registry.nodes()) {
    api::Node node = withDerivedState(registered, use);
    ++node_total;
    std::string state(api::nodeStateName(node.state));
    nodes_by_state[state] = nodes_by_state.value(state, 0) + 1;
    for (const api::Gpu& gpu : node.gpus) {
      ++gpu_total;
      uint64_t used = std::min<uint64_t>(use.gpu_milli[gpu.uuid], 1000);
      allocated_milli += used;
      std::string g = gpuState(node, gpu, used);
      gpus_by_state[g] = gpus_by_state.value(g, 0) + 1;
    }
  }
  json jobs_by_state = json::object();
  int64_t job_total = 0;
  for (const auto& [state, count] : job_counts) {
    jobs_by_state[std::string(api::jobStateName(state))] = count;
    job_total += count;
  }
  return json{
      {"nodes", {{"total", node_total}, {"by_state", nodes_by_state}}},
      {"gpus",
       {{"total", gpu_total}, {"allocated_milli", allocated_milli}, {"by_state", gpus_by_state}}},
      {"jobs", {{"total", job_total}, {"by_state", jobs_by_state}}}};
}

}  // namespace gpool::controller
