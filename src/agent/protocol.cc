#include "agent/protocol.h"

#include <limits>

#include "api/json_reader.h"

namespace gpool::agent::protocol {

using api::ObjectReader;
using api::Presence;
using nlohmann::json;

namespace {

// The body as it is; its type's decoder checks its fields.
struct RawBody {
  json value;
};

Status fromJson(const json& j, RawBody* out, std::string_view path) {
  if (!j.is_object()) {
    return Status::invalidArgument(std::string(path) + ": expected an object, got " +
                                   std::string(api::jsonTypeName(j)));
  }
  out->value = j;
  return Status::ok();
}

}  // namespace

Result<Envelope> decodeEnvelope(const json& msg) {
  Envelope e;
  RawBody body;
  ObjectReader r(msg, "");
  r.integer("v", &e.v, Presence::kRequired, 1, std::numeric_limits<int>::max());
  r.string("type", &e.type, Presence::kRequired);
  r.integer("seq", &e.seq, Presence::kRequired, int64_t{1}, std::numeric_limits<int64_t>::max());
  r.integer("ack", &e.ack, Presence::kOptional, int64_t{0}, std::numeric_limits<int64_t>::max());
  r.object("body", &body, Presence::kRequired);
  GPOOL_RETURN_IF_ERROR(r.finish());
  if (e.v > kVersion) {
    return Status::failedPrecondition("v: protocol version " + std::to_string(e.v) +
                                      " is not supported (this agent speaks " +
                                      std::to_string(kVersion) + ")");
  }
  e.body = std::move(body.value);
  return e;
}

json encodeEnvelope(std::string_view type, int64_t seq, int64_t ack, json body) {
  return json{
      {"v", kVersion}, {"type", type}, {"seq", seq}, {"ack", ack}, {"body", std::move(body)}};
}

Status fromJson(const json& j, Assignment* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("job_id", &out->job_id, Presence::kRequired, int64_t{0},
            std::numeric_limits<int64_t>::max());
  r.integer("task", &out->task, Presence::kRequired, uint32_t{0}, uint32_t{1'000'000});
  r.integer("attempt", &out->attempt, Presence::kOptional, int32_t{0},
            std::numeric_limits<int32_t>::max());
  r.integer("lease_epoch", &out->lease_epoch, Presence::kRequired, int64_t{1},
            std::numeric_limits<int64_t>::max());
  return r.finish();
}

json toJson(const Assignment& a) {
  return json{{"job_id", a.job_id},
              {"task", a.task},
              {"attempt", a.attempt},
              {"lease_epoch", a.lease_epoch}};
}

std::string taskName(const Assignment& a) {
  return std::to_string(a.job_id) + "." + std::to_string(a.task);
}

namespace {

struct SliceEntry {
  uint64_t memory_mib = 0;
  uint32_t compute_milli = 0;
};

Status fromJson(const json& j, SliceEntry* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("memory_mib", &out->memory_mib, Presence::kRequired, uint64_t{1}, uint64_t{1} << 40);
  r.integer("compute_milli", &out->compute_milli, Presence::kRequired, uint32_t{1}, uint32_t{1000});
  return r.finish();
}

struct RendezvousEntry {
  Rendezvous value;
};

Status fromJson(const json& j, RendezvousEntry* entry, std::string_view path) {
  Rendezvous* out = &entry->value;
  ObjectReader r(j, path);
  r.string("master_addr", &out->master_addr);
  r.integer("master_port", &out->master_port, Presence::kOptional, uint16_t{0}, uint16_t{65535});
  r.integer("world_size", &out->world_size, Presence::kOptional, uint32_t{0}, uint32_t{1u << 20});
  r.integer("rank", &out->rank, Presence::kOptional, uint32_t{0}, uint32_t{1u << 20});
  r.integer("local_rank", &out->local_rank, Presence::kOptional, uint32_t{0}, uint32_t{1u << 20});
  r.integer("node_rank", &out->node_rank, Presence::kOptional, uint32_t{0}, uint32_t{1u << 20});
  return r.finish();
}

struct LaunchEntry {
  TaskLaunch* launch;
  std::vector<std::string>* gpu_uuids;
};

Status fromJson(const json& j, LaunchEntry* out, std::string_view path) {
  TaskLaunch& l = *out->launch;
  ObjectReader r(j, path);
  r.stringList("argv", &l.argv, Presence::kRequired);
  r.check(l.argv.empty() == false || !r.ok(), "argv", "must not be empty");
  r.stringMap("env", &l.env);
  r.string("working_dir", &l.working_dir);
  r.string("user", &l.user, Presence::kRequired);
  uint32_t id = 0;
  if (r.has("uid")) {
    r.integer("uid", &id, Presence::kOptional, uint32_t{0}, uint32_t{0xfffffffe});
    l.uid = id;
  }
  if (r.has("gid")) {
    r.integer("gid", &id, Presence::kOptional, uint32_t{0}, uint32_t{0xfffffffe});
    l.gid = id;
  }
  r.integer("cpus_milli", &l.cpu_millicores, Presence::kOptional, uint64_t{0}, uint64_t{1} << 32);
  r.integer("memory_mib", &l.memory_mib, Presence::kOptional, uint64_t{0}, uint64_t{1} << 40);
  r.integer("pids_max", &l.pids_max, Presence::kOptional, uint64_t{0}, uint64_t{1} << 32);
  r.stringList("gpus", out->gpu_uuids);
  std::optional<SliceEntry> slice;
  r.optionalObject("slice", &slice);
  if (slice) {
    l.slice = SliceQuota{};
    l.slice->memory_mib = slice->memory_mib;
    l.slice->compute = slice->compute_milli;
    r.check(out->gpu_uuids->size() == 1, "slice", "a slice needs exactly one GPU in gpus");
  }
  RendezvousEntry rendezvous;
  r.object("rendezvous", &rendezvous);
  l.rendezvous = rendezvous.value;
  int64_t seconds = 0;
  r.integer("time_limit_seconds", &seconds, Presence::kOptional, int64_t{0},
            int64_t{10} * 365 * 86400);
  l.time_limit_ms = seconds * 1000;
  seconds = l.grace_ms / 1000;
  r.integer("grace_seconds", &seconds, Presence::kOptional, int64_t{0}, int64_t{86400});
  l.grace_ms = seconds * 1000;
  return r.finish();
}

}  // namespace

Status fromJson(const json& j, TaskEntry* out, std::string_view path) {
  ObjectReader r(j, path);
  r.object("assignment", &out->assignment, Presence::kRequired);
  r.boolean("requeueable", &out->requeueable);
  LaunchEntry launch{&out->launch, &out->gpu_uuids};
  r.object("launch", &launch, Presence::kRequired);
  GPOOL_RETURN_IF_ERROR(r.finish());
  out->launch.job_id = std::to_string(out->assignment.job_id);
  out->launch.task_index = out->assignment.task;
  return Status::ok();
}

}  // namespace gpool::agent::protocol
