#include "api/allocation.h"

#include <set>

#include "api/json_reader.h"
#include "api/node.h"

namespace gpool::api {

using nlohmann::json;

std::vector<std::string> Allocation::gpuUuids() const {
  std::vector<std::string> out;
  out.reserve(slices.size());
  for (const Slice& s : slices)
    out.push_back(s.gpu_uuid);
  return out;
}

json toJson(const Slice& slice) {
  json j{{"gpu_uuid", slice.gpu_uuid}, {"exclusive", slice.exclusive}};
  putQuantity(j, "memory", Quantity::kMemoryMiB, slice.memory_mib);
  putQuantity(j, "compute", Quantity::kComputeShare, slice.compute_milli);
  return j;
}

Status fromJson(const json& j, Slice* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("gpu_uuid", &out->gpu_uuid, Presence::kRequired);
  r.quantity("memory", Quantity::kMemoryMiB, &out->memory_mib, Presence::kRequired);
  r.quantity("compute", Quantity::kComputeShare, &out->compute_milli, Presence::kRequired);
  r.boolean("exclusive", &out->exclusive);
  r.check(!out->gpu_uuid.empty(), "gpu_uuid", "must not be empty");
  r.check(!out->exclusive || out->compute_milli == 1000, "compute",
          "an exclusive slice holds the whole GPU (1000)");
  return r.finish();
}

json toJson(const Allocation& allocation) {
  json slices = json::array();
  for (const Slice& s : allocation.slices)
    slices.push_back(toJson(s));
  json j{{"task", allocation.task}, {"node", allocation.node}, {"slices", std::move(slices)}};
  putQuantity(j, "cpus", Quantity::kCpuMillis, allocation.cpus_milli);
  putQuantity(j, "ram", Quantity::kMemoryMiB, allocation.ram_mib);
  // Absent until the agent reports them, so placements written before stay byte-identical.
  if (!allocation.stdout_log.empty()) j["stdout_log"] = allocation.stdout_log;
  if (!allocation.stderr_log.empty()) j["stderr_log"] = allocation.stderr_log;
  if (!allocation.shell_socket.empty()) j["shell_socket"] = allocation.shell_socket;
  if (allocation.rendezvous_port != 0) j["rendezvous_port"] = allocation.rendezvous_port;
  return j;
}

Status fromJson(const json& j, Allocation* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("task", &out->task, Presence::kRequired, 0u, 1'000'000u);
  r.string("node", &out->node, Presence::kRequired);
  r.objectList("slices", &out->slices, Presence::kOptional, 1024);
  r.quantity("cpus", Quantity::kCpuMillis, &out->cpus_milli, Presence::kOptional, true);
  r.quantity("ram", Quantity::kMemoryMiB, &out->ram_mib);
  r.string("stdout_log", &out->stdout_log);
  r.string("stderr_log", &out->stderr_log);
  r.string("shell_socket", &out->shell_socket);
  r.integer("rendezvous_port", &out->rendezvous_port, Presence::kOptional, 0u, 65535u);
  if (r.ok()) {
    Status s = validateNodeName(out->node);
    if (!s.isOk()) r.fail("node", s.message());
    std::set<std::string_view> seen;
    for (size_t i = 0; i < out->slices.size(); ++i) {
      r.check(seen.insert(out->slices[i].gpu_uuid).second,
              "slices[" + std::to_string(i) + "].gpu_uuid",
              "GPU '" + out->slices[i].gpu_uuid + "' is listed twice");
    }
  }
  return r.finish();
}

}  // namespace gpool::api
