#include "store/api_codec.h"

#include <nlohmann/json.hpp>

#include "api/allocation.h"
#include "api/job_spec.h"
#include "api/json_reader.h"

namespace gpool::store {
namespace {

// Parses stored JSON text without exceptions; `what` names the row in the error.
Result<nlohmann::json> parseStored(const std::string& text, const std::string& what) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::internal(what + ": stored JSON does not parse");
  return j;
}

template <typename T>
Result<T> decodeStored(const std::string& text, const std::string& what) {
  GPOOL_ASSIGN_OR_RETURN(auto j, parseStored(text, what));
  T out;
  Status s = api::fromJson(j, &out, what);
  if (!s.isOk()) return Status::internal("stored " + s.message());
  return out;
}

}  // namespace

// ---- jobs

std::vector<NewJob> newJobsFor(const std::string& user, uint32_t uid, const std::string& group,
                               const api::JobSpec& spec) {
  NewJob base;
  base.user = user;
  base.uid = uid;
  base.group = group;
  base.spec_json = api::toJson(spec).dump();
  base.gpu_thousandths = spec.resources.gpus_milli * spec.tasks;
  if (!spec.array) return {base};
  std::vector<NewJob> jobs;
  for (uint32_t index : spec.array->indices()) {
    NewJob element = base;
    element.array_parent = -1;
    element.array_index = static_cast<int32_t>(index);
    jobs.push_back(std::move(element));
  }
  return jobs;
}

Result<std::vector<int64_t>> submitApiJob(Store& store, const std::string& user, uint32_t uid,
                                          const std::string& group, const api::JobSpec& spec,
                                          TimePoint now) {
  return store.submitJobs(newJobsFor(user, uid, group, spec), now);
}

std::string placementJsonFor(const std::vector<api::Allocation>& allocations) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& alloc : allocations)
    a.push_back(api::toJson(alloc));
  return a.dump();
}

namespace {

// Every field of the api view but the spec.
Result<api::Job> jobWithoutSpec(const JobRecord& record, const std::string& what) {
  api::Job job;
  job.id = static_cast<uint64_t>(record.id);
  job.user = record.user;
  job.uid = record.uid;
  job.group = record.group;
  job.state = record.state;
  job.reason = record.reason;
  job.submit_time = record.submit_time;
  job.start_time = record.start_time;
  job.end_time = record.end_time;
  job.exit_code = record.exit_code;
  if (record.array_parent) job.array_job_id = static_cast<uint64_t>(*record.array_parent);
  if (record.array_index) job.array_index = static_cast<uint32_t>(*record.array_index);
  job.requeue_count = static_cast<uint32_t>(record.requeue_count);
  GPOOL_ASSIGN_OR_RETURN(job.allocations, apiAllocationsFrom(record.placement_json, what));
  return job;
}

}  // namespace

Result<std::vector<api::Allocation>> apiAllocationsFrom(const std::string& placement_json,
                                                        const std::string& what) {
  std::vector<api::Allocation> allocations;
  if (placement_json.empty()) return allocations;
  GPOOL_ASSIGN_OR_RETURN(auto j, parseStored(placement_json, what + ".placement"));
  if (!j.is_array()) return Status::internal(what + ": stored placement is not an array");
  for (size_t i = 0; i < j.size(); ++i) {
    api::Allocation alloc;
    Status s = api::fromJson(j[i], &alloc, what + ".allocations[" + std::to_string(i) + "]");
    if (!s.isOk()) return Status::internal("stored " + s.message());
    allocations.push_back(std::move(alloc));
  }
  return allocations;
}

Result<api::Job> apiJobFrom(const JobRecord& record) {
  GPOOL_ASSIGN_OR_RETURN(api::Job job, apiJobWithoutSpec(record));
  GPOOL_ASSIGN_OR_RETURN(job.spec, apiJobSpecFrom(record));
  return job;
}

Result<api::Job> apiJobWithoutSpec(const JobRecord& record) {
  return jobWithoutSpec(record, "job " + std::to_string(record.id));
}

Result<api::JobSpec> apiJobSpecFrom(const JobRecord& record) {
  return decodeStored<api::JobSpec>(record.spec_json, "job " + std::to_string(record.id) + ".spec");
}

Result<std::string> apiJobJsonText(const JobRecord& record, const std::string& reason_detail,
                                   std::optional<TimePoint> expected_start) {
  const std::string what = "job " + std::to_string(record.id);
  // The stored spec is api::toJson(spec).dump(), the same compact text dumpJson writes, so it
  // is spliced in as it is. Checked to be one JSON object, so that a hand-edited row cannot
  // break the document it is spliced into.
  if (record.spec_json.empty() || record.spec_json.front() != '{' ||
      !api::isJsonObjectText(record.spec_json)) {
    return Status::internal(what + ".spec: stored JSON does not parse");
  }
  GPOOL_ASSIGN_OR_RETURN(api::Job job, jobWithoutSpec(record, what));
  job.reason_detail = reason_detail;
  job.expected_start = expected_start;
  return api::toJsonText(job, record.spec_json);
}

Result<api::Job> loadApiJob(Store& store, int64_t id) {
  GPOOL_ASSIGN_OR_RETURN(auto record, store.getJob(id));
  return apiJobFrom(record);
}

// ---- nodes and GPUs

NodeRecord nodeRecordFor(const api::Node& node) {
  api::Node without_gpus = node;
  without_gpus.gpus.clear();  // they have their own rows
  return NodeRecord{node.name, std::string(api::nodeStateName(node.state)),
                    api::toJson(without_gpus).dump(), node.last_seen};
}

GpuRecord gpuRecordFor(const std::string& node, const api::Gpu& gpu) {
  return GpuRecord{gpu.uuid,  node,           static_cast<int32_t>(gpu.index),
                   gpu.model, gpu.memory_mib, api::toJson(gpu).dump()};
}

Status saveApiNode(Store& store, const api::Node& node) {
  std::vector<GpuRecord> gpus;
  for (const auto& g : node.gpus)
    gpus.push_back(gpuRecordFor(node.name, g));
  return store.registerNode(nodeRecordFor(node), gpus);
}

Result<api::Node> loadApiNode(Store& store, const std::string& name) {
  GPOOL_ASSIGN_OR_RETURN(auto record, store.getNode(name));
  GPOOL_ASSIGN_OR_RETURN(auto node, decodeStored<api::Node>(record.info_json, "node " + name));
  auto state = api::parseNodeState(record.state);
  if (!state.ok()) return Status::internal("node " + name + ": stored state unknown");
  node.state = *state;
  node.last_seen = record.last_heartbeat;
  GPOOL_ASSIGN_OR_RETURN(auto gpus, store.listGpus(name));
  node.gpus.clear();
  for (const auto& g : gpus) {
    GPOOL_ASSIGN_OR_RETURN(auto gpu, decodeStored<api::Gpu>(g.info_json, "gpu " + g.uuid));
    node.gpus.push_back(std::move(gpu));
  }
  return node;
}

// ---- users, groups, quotas, QoS

UserRecord userRecordFor(const api::User& user) {
  api::User without_quota = user;
  without_quota.quota.reset();
  return UserRecord{user.name, int64_t{user.uid}, std::string(api::roleName(user.role)),
                    api::toJson(without_quota).dump()};
}

Result<api::User> apiUserFrom(const UserRecord& record) {
  return decodeStored<api::User>(record.info_json, "user " + record.name);
}

Status saveApiUser(Store& store, const api::User& user) {
  return store.upsertUser(userRecordFor(user));
}

Result<std::optional<api::Quota>> loadApiQuota(Store& store, QuotaSubject subject,
                                               const std::string& name) {
  auto q = store.getQuota(subject, name);
  if (!q.ok()) {
    if (q.status().code() == StatusCode::kNotFound) return std::optional<api::Quota>{};
    return q.status();
  }
  GPOOL_ASSIGN_OR_RETURN(auto quota, decodeStored<api::Quota>(q->limits_json, "quota " + name));
  return std::optional<api::Quota>(std::move(quota));
}

Result<api::User> loadApiUser(Store& store, const std::string& name) {
  GPOOL_ASSIGN_OR_RETURN(auto record, store.getUser(name));
  GPOOL_ASSIGN_OR_RETURN(auto user, decodeStored<api::User>(record.info_json, "user " + name));
  GPOOL_ASSIGN_OR_RETURN(user.quota, loadApiQuota(store, QuotaSubject::kUser, name));
  return user;
}

GroupRecord groupRecordFor(const api::Group& group) {
  api::Group without_quota = group;
  without_quota.quota.reset();
  return GroupRecord{group.name, int64_t{group.gid}, api::toJson(without_quota).dump()};
}

Status saveApiGroup(Store& store, const api::Group& group) {
  return store.upsertGroup(groupRecordFor(group));
}

Result<api::Group> loadApiGroup(Store& store, const std::string& name) {
  GPOOL_ASSIGN_OR_RETURN(auto record, store.getGroup(name));
  GPOOL_ASSIGN_OR_RETURN(auto group, decodeStored<api::Group>(record.info_json, "group " + name));
  GPOOL_ASSIGN_OR_RETURN(group.quota, loadApiQuota(store, QuotaSubject::kGroup, name));
  return group;
}

Status saveApiQuota(Store& store, QuotaSubject subject, const std::string& name,
                    const api::Quota& quota, const std::string& actor, TimePoint now) {
  return store.setQuota(QuotaRecord{subject, name, api::toJson(quota).dump(), now}, actor);
}

QosRecord qosRecordFor(const api::Qos& qos) {
  return QosRecord{qos.name, static_cast<int32_t>(qos.priority), api::toJson(qos).dump()};
}

Status saveApiQos(Store& store, const api::Qos& qos) {
  return store.upsertQos(qosRecordFor(qos));
}

Result<std::vector<api::Qos>> loadApiQos(Store& store) {
  GPOOL_ASSIGN_OR_RETURN(auto records, store.listQos());
  std::vector<api::Qos> out;
  for (const auto& r : records) {
    GPOOL_ASSIGN_OR_RETURN(auto qos, decodeStored<api::Qos>(r.info_json, "qos " + r.name));
    out.push_back(std::move(qos));
  }
  return out;
}

}  // namespace gpool::store
