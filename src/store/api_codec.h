#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/job.h"
#include "api/node.h"
#include "api/user.h"
#include "common/clock.h"
#include "common/result.h"
#include "store/store.h"

// The api's domain types (gpool::api::Job, Node, User, ...) in and out of the store. The store
// keeps each object's canonical JSON (api::toJson) next to the columns it indexes; these
// functions are the only place that knows how the two map onto each other, so the controller
// works with api types only.
//
// Reading back validates the stored JSON with the api's strict parsers: a row that no longer
// parses (a bug, or a hand-edited database) is an Internal error naming the row, never a crash.
namespace gpool::store {

// ---- jobs

// The rows of one submission: one NewJob, or one per element of `spec.array` (in the array's
// index order; the elements form one array, see NewJob::array_parent). GPU use for accounting
// is `spec.resources.gpus_milli` x `spec.tasks`.
std::vector<NewJob> newJobsFor(const std::string& user, uint32_t uid, const std::string& group,
                               const api::JobSpec& spec);

// Submits `spec` (expanding an array) in one transaction; returns the ids, ascending.
Result<std::vector<int64_t>> submitApiJob(Store& store, const std::string& user, uint32_t uid,
                                          const std::string& group, const api::JobSpec& spec,
                                          TimePoint now);

// The api view of a stored job; `allocations` come from the placement.
Result<api::Job> apiJobFrom(const JobRecord& record);
// The same in two parts, for a caller that keeps decoded specs (the scheduling loop decodes a
// job's spec once, not at every pass): every field but the spec (left default), and the spec.
Result<api::Job> apiJobWithoutSpec(const JobRecord& record);
Result<api::JobSpec> apiJobSpecFrom(const JobRecord& record);
Result<api::Job> loadApiJob(Store& store, int64_t id);

// api::dumpJson(api::toJson(apiJobFrom(record))) for a stored row, the way a list serves it:
// the stored spec text is spliced in as stored (it is the canonical api::toJson(spec).dump())
// instead of being decoded strictly and encoded again, which cost most of a list page. The
// spec is only checked to be one JSON object (Internal otherwise); the other fields are checked
// as apiJobFrom checks them. Show and the scheduler still decode strictly.
// `reason_detail` and `expected_start` are the scheduler's words about a pending job
// (api::Job), which the store does not hold.
Result<std::string> apiJobJsonText(const JobRecord& record, const std::string& reason_detail = {},
                                   std::optional<TimePoint> expected_start = std::nullopt);

// The placement text recordPlacement stores for these allocations (a JSON array).
std::string placementJsonFor(const std::vector<api::Allocation>& allocations);
// The allocations of a stored placement (JobRecord::placement_json, JobAttempt::placement_json);
// none for an empty one. Internal, naming `what`, for a stored text that does not decode.
Result<std::vector<api::Allocation>> apiAllocationsFrom(const std::string& placement_json,
                                                        const std::string& what);

// ---- nodes and GPUs

NodeRecord nodeRecordFor(const api::Node& node);
GpuRecord gpuRecordFor(const std::string& node, const api::Gpu& gpu);
// Stores the node and exactly its GPUs in one transaction (Store::registerNode).
Status saveApiNode(Store& store, const api::Node& node);
// The node with its GPUs (in index order) as stored; state and last_seen come from the columns
// that upsertNode keeps current.
Result<api::Node> loadApiNode(Store& store, const std::string& name);

// ---- users, groups, quotas, QoS
// Quotas live in their own table (setQuota, with an audit event), not in the user's or group's
// row: save* ignore `quota`, load* fill it from the quota table.

UserRecord userRecordFor(const api::User& user);
// The user a record holds, without its quota (Internal when the stored JSON does not decode).
Result<api::User> apiUserFrom(const UserRecord& record);
Status saveApiUser(Store& store, const api::User& user);
Result<api::User> loadApiUser(Store& store, const std::string& name);

GroupRecord groupRecordFor(const api::Group& group);
Status saveApiGroup(Store& store, const api::Group& group);
Result<api::Group> loadApiGroup(Store& store, const std::string& name);

Status saveApiQuota(Store& store, QuotaSubject subject, const std::string& name,
                    const api::Quota& quota, const std::string& actor, TimePoint now);
// The quota of a user or group from the quota table; nullopt when none is set. Internal for
// a stored quota that does not decode.
Result<std::optional<api::Quota>> loadApiQuota(Store& store, QuotaSubject subject,
                                               const std::string& name);

QosRecord qosRecordFor(const api::Qos& qos);
Status saveApiQos(Store& store, const api::Qos& qos);
Result<std::vector<api::Qos>> loadApiQos(Store& store);

}  // namespace gpool::store
