#include "cli/api_client.h"

#include <pwd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <charconv>
#include <iostream>
#include <vector>

#include "api/json_reader.h"

namespace gpool::cli {

ApiClient::ApiClient(std::string socket)
    : socket_(std::move(socket)), http_(net::ClientEndpoint::unixSocket(socket_)) {}

Result<json> ApiClient::call(net::Method method, const std::string& target, std::string body) {
  Result<net::Response> r = http_.request(method, target, std::move(body));
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kUnavailable) {
      return Status::unavailable(
          "cannot reach gpoold at unix:" + socket_ + " (" + r.status().message() +
          "): is it running? Start it with `systemctl start gpoold` (or `gpoold --config "
          "FILE` with controller.socket set), or point --socket or GPOOL_SOCKET at its socket");
    }
    return r.status().withContext("gpoold at unix:" + socket_);
  }
  Result<json> parsed = api::parseJsonText(r->body, "gpoold's answer");
  if (r->status >= 400) {
    if (parsed.ok() && parsed->is_object() && parsed->contains("error") &&
        (*parsed)["error"].is_object()) {
      const json& e = (*parsed)["error"];
      std::string code = e.value("code", "internal");
      std::string message = e.value("message", "");
      return Status(codeFromName(code), message);
    }
    return Status::internal("gpoold answered HTTP " + std::to_string(r->status) + ": " + r->body);
  }
  return parsed;
}

StatusCode codeFromName(std::string_view name) {
  for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    if (statusCodeName(static_cast<StatusCode>(c)) == name) return static_cast<StatusCode>(c);
  }
  return StatusCode::kInternal;
}

std::string currentUser() {
  uid_t uid = geteuid();
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) return pw.pw_name;
  return "#" + std::to_string(uid);  // what the controller calls a uid without a passwd entry
}

void printJson(const json& j) {
  std::cout << api::dumpJson(j, 2) << "\n";
}

Result<JobRef> parseJobRef(const std::string& text) {
  JobRef ref;
  ref.text = text;
  auto bad = [&] {
    return Status::invalidArgument("'" + text +
                                   "' is not a job id (use a number such as 42, or 42_3 for "
                                   "element 3 of array job 42)");
  };
  std::string_view id_part = text;
  size_t underscore = text.find('_');
  if (underscore != std::string::npos) {
    id_part = std::string_view(text).substr(0, underscore);
    std::string_view index_part = std::string_view(text).substr(underscore + 1);
    uint32_t index = 0;
    auto [p, ec] = std::from_chars(index_part.data(), index_part.data() + index_part.size(), index);
    if (index_part.empty() || ec != std::errc() || p != index_part.data() + index_part.size()) {
      return bad();
    }
    ref.array_index = index;
  }
  auto [p, ec] = std::from_chars(id_part.data(), id_part.data() + id_part.size(), ref.id);
  if (id_part.empty() || ec != std::errc() || p != id_part.data() + id_part.size() || ref.id == 0) {
    return bad();
  }
  return ref;
}

Result<std::vector<api::Job>> jobsFrom(const json& page, std::vector<json>* raw) {
  std::vector<api::Job> jobs;
  if (!page.contains("jobs") || !page["jobs"].is_array()) {
    return Status::internal("gpoold's job list has no 'jobs' array");
  }
  for (const json& j : page["jobs"]) {
    api::Job job;
    GPOOL_RETURN_IF_ERROR(api::fromJson(j, &job, "gpoold's job"));
    jobs.push_back(std::move(job));
    if (raw) raw->push_back(j);
  }
  return jobs;
}

// Every job matching `query` (without after/limit), following next_after to the end.
Result<std::vector<api::Job>> listAll(ApiClient& api, const std::string& query,
                                      std::vector<json>* raw) {
  std::vector<api::Job> all;
  int64_t after = 0;
  while (true) {
    std::string target =
        "/v1/jobs?limit=" + std::to_string(kPageSize) + "&after=" + std::to_string(after) + query;
    GPOOL_ASSIGN_OR_RETURN(json page, api.get(target));
    GPOOL_ASSIGN_OR_RETURN(std::vector<api::Job> jobs, jobsFrom(page, raw));
    all.insert(all.end(), jobs.begin(), jobs.end());
    if (!page.contains("next_after") || page["next_after"].is_null()) break;
    int64_t next = page["next_after"].get<int64_t>();
    if (next <= after) return Status::internal("gpoold's next_after did not advance");
    after = next;
  }
  return all;
}

// The job id of `ref`: itself, or the element of an array found by listing from the array's
// id on (the elements of an array get consecutive ids in one transaction).
Result<uint64_t> resolve(ApiClient& api, const JobRef& ref) {
  if (!ref.array_index) return ref.id;
  int64_t after = static_cast<int64_t>(ref.id) - 1;
  while (true) {
    std::string target =
        "/v1/jobs?limit=" + std::to_string(kPageSize) + "&after=" + std::to_string(after);
    GPOOL_ASSIGN_OR_RETURN(json page, api.get(target));
    GPOOL_ASSIGN_OR_RETURN(std::vector<api::Job> jobs, jobsFrom(page, nullptr));
    for (const api::Job& job : jobs) {
      if (job.array_job_id != ref.id) {
        return Status::notFound("job " + ref.text + " not found (job " + std::to_string(ref.id) +
                                " has no array element " + std::to_string(*ref.array_index) + ")");
      }
      if (job.array_index == ref.array_index) return job.id;
    }
    if (jobs.empty() || page["next_after"].is_null()) break;
    after = page["next_after"].get<int64_t>();
  }
  return Status::notFound("job " + ref.text + " not found");
}

TimePoint now() {
  return realClock().now();
}

std::string activeStatesQuery() {
  return "&state=PENDING&state=RUNNING&state=COMPLETING";
}

std::function<void()> reporting(std::function<Status()> body) {
  return [body = std::move(body)] {
    Status s = body();
    if (s.isOk()) return;
    std::cerr << "gpool: " << s.message() << "\n";
    throw CLI::RuntimeError(exitCodeFor(s.code()));
  };
}

}  // namespace gpool::cli
