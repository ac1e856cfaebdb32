// The admin and account commands' shared pieces (errors naming the flag and the role, the
// name and amount formats, the quota columns) and the order `gpool --help` lists them in; each
// noun's commands are in its own file (user_commands.cc, group_commands.cc, ...).
#include "cli/admin_commands.h"

#include <time.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/json_reader.h"
#include "api/user.h"
#include "cli/admin_common.h"
#include "cli/api_client.h"
#include "cli/client_commands.h"
#include "cli/format.h"
#include "common/status.h"
#include "common/units.h"
#include "net/http.h"

namespace gpool::cli {
namespace admin {

using nlohmann::json;

const std::string kFooter = globalOptionsFooter(
    "0 ok, 2 bad arguments, 3 not found, 4 permission denied, 5 wrong state or already exists, "
    "6 quota, 7 controller unreachable");

// gpoold's permission errors name the caller and the action; the CLI adds which command needs
// which role and what to do about it.
Status explainDenied(Status s, std::string_view command, std::string_view role) {
  // Unauthenticated (a refused API token) already says what to do about the token.
  if (s.code() != StatusCode::kPermissionDenied) return s;
  return Status(s.code(), "permission denied: `gpool " + std::string(command) + "` needs " +
                              std::string(role) + " (gpoold: " + s.message() +
                              "); ask an admin, or run it as root on the controller's server");
}

Status withFlagNames(Status s, std::string_view prefix, const std::vector<FieldFlag>& fields) {
  if (s.isOk()) return s;
  std::string m = s.message();
  for (const FieldFlag& f : fields) {
    std::string path = std::string(prefix) + "." + std::string(f.field);
    size_t at = m.find(path);
    if (at == std::string::npos) continue;
    size_t end = at + path.size();
    // "quota.max_gpus" also matches inside "quota.max_gpus_milli": take the whole key.
    while (end < m.size() && (std::isalnum(static_cast<unsigned char>(m[end])) || m[end] == '_'))
      ++end;
    // "group.members[1]" names the flag's second value: "--member".
    if (end < m.size() && m[end] == '[') {
      size_t close = m.find(']', end);
      if (close != std::string::npos) end = close + 1;
    }
    m.replace(at, end - at, std::string(f.flag));
    break;
  }
  return Status(s.code(), m);
}

std::string pathName(const std::string& name) {
  return net::percentEncode(name);
}

// "1.5" for 1500 thousandths.
std::string gpuAmount(uint64_t milli) {
  std::string s = std::to_string(milli / 1000);
  uint64_t frac = milli % 1000;
  if (frac == 0) return s;
  char buf[8];
  std::snprintf(buf, sizeof buf, "%03llu", static_cast<unsigned long long>(frac));
  std::string f = buf;
  while (!f.empty() && f.back() == '0')
    f.pop_back();
  return s + "." + f;
}

std::string joined(const std::vector<std::string>& items, const std::string& none) {
  if (items.empty()) return none;
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? "," : "") + items[i];
  return out;
}

std::vector<std::string> splitList(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    std::stringstream ss(item);
    std::string part;
    while (std::getline(ss, part, ',')) {
      if (!part.empty()) out.push_back(part);
    }
  }
  return out;
}

Result<uint32_t> parseUint32(const std::string& text, std::string_view flag) {
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) {
    return Status::invalidArgument(std::string(flag) + ": '" + text +
                                   "' is not a non-negative integer");
  }
  return v;
}

Status validName(const std::string& name, std::string_view what, std::string_view arg) {
  Status s = api::validateAccountName(name, what);
  if (s.isOk()) return s;
  return Status::invalidArgument(std::string(arg) + ": " + s.message());
}

std::string utcTime(int64_t unix_us) {
  time_t t = static_cast<time_t>(unix_us / 1'000'000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// "Key: value" lines with the values aligned.
std::string formatFields(const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& [k, v] : fields)
    width = std::max(width, k.size() + 1);
  std::string out;
  for (const auto& [k, v] : fields) {
    std::string key = k + ":";
    key.resize(width + 1, ' ');
    out += key + terminalSafe(v);
    while (!out.empty() && out.back() == ' ')
      out.pop_back();
    out += "\n";
  }
  return out;
}

// ---------------------------------------------------------------- quota formatting

std::string limitText(const std::optional<uint64_t>& v, std::string (*f)(uint64_t)) {
  return v ? f(*v) : "-";
}
std::string memText(uint64_t mib) {
  return formatMemoryMiB(mib);
}
// GPU-hours as given: "100", "0.5", "12.25" (at most 3 decimals shown).
std::string hoursLimitText(double h) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", h);
  std::string s = buf;
  while (s.back() == '0')
    s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// "max_gpus=4 gpu_hours=1000/30-00:00:00 ..." for one line of text.
std::string quotaSummary(const api::Quota& q) {
  std::vector<std::string> parts;
  if (q.max_gpus_milli) parts.push_back("max_gpus=" + gpuAmount(*q.max_gpus_milli));
  if (q.gpu_hours) {
    parts.push_back("gpu_hours=" + hoursLimitText(*q.gpu_hours) + "/" +
                    formatDuration(q.period_seconds));
  }
  if (q.max_memory_per_task_mib) {
    parts.push_back("max_gpu_mem=" + formatMemoryMiB(*q.max_memory_per_task_mib));
  }
  if (q.max_compute_milli) parts.push_back("max_compute=" + gpuAmount(*q.max_compute_milli));
  if (q.max_run_time_seconds) {
    parts.push_back("max_run_time=" + formatDuration(*q.max_run_time_seconds));
  }
  parts.push_back("priority_weight=" + std::to_string(q.priority_weight));
  if (q.guaranteed_gpus_milli) {
    parts.push_back("guaranteed_gpus=" + gpuAmount(q.guaranteed_gpus_milli));
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i ? " " : "") + parts[i];
  return out;
}

std::vector<std::string> quotaHeader() {
  return {"SUBJECT",     "NAME",        "MAX_GPUS",     "GPU_HOURS", "PERIOD",
          "MAX_GPU_MEM", "MAX_COMPUTE", "MAX_RUN_TIME", "WEIGHT",    "GUARANTEED"};
}
const std::vector<Align> kQuotaAlign = {Align::kLeft,  Align::kLeft,  Align::kRight, Align::kRight,
                                        Align::kRight, Align::kRight, Align::kRight, Align::kRight,
                                        Align::kRight, Align::kRight};

std::vector<std::string> quotaRow(const std::string& subject, const std::string& name,
                                  const api::Quota& q) {
  return {subject,
          name,
          q.max_gpus_milli ? gpuAmount(*q.max_gpus_milli) : "-",
          q.gpu_hours ? hoursLimitText(*q.gpu_hours) : "-",
          formatDuration(q.period_seconds),
          limitText(q.max_memory_per_task_mib, memText),
          q.max_compute_milli ? gpuAmount(*q.max_compute_milli) : "-",
          q.max_run_time_seconds ? formatDuration(*q.max_run_time_seconds) : "-",
          std::to_string(q.priority_weight),
          gpuAmount(q.guaranteed_gpus_milli)};
}

Result<api::Quota> quotaFrom(const json& answer) {
  api::Quota q;
  if (!answer.contains("limits")) return Status::internal("gpoold's quota has no 'limits'");
  GPOOL_RETURN_IF_ERROR(api::fromJson(answer["limits"], &q, "gpoold's quota limits"));
  return q;
}

Result<api::User> userFrom(const json& j) {
  api::User u;
  GPOOL_RETURN_IF_ERROR(api::fromJson(j, &u, "gpoold's user"));
  return u;
}

// DELETE `target`; prints "Removed <what>" or the JSON answer.
Status removeThing(const GlobalOptions& global, const std::string& target, const std::string& what,
                   const std::string& command, std::string_view role) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.del(target);
  if (!answer.ok()) return explainDenied(answer.status(), command, role);
  if (global.json) {
    printJson(*answer);
  } else {
    std::cout << "Removed " << what << "\n";
  }
  return Status::ok();
}

std::string hoursText(double h) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", h);
  return buf;
}

Result<json> accountOf(ApiClient& api) {
  return api.get("/v1/account");
}

Result<json> getRecord(ApiClient& api, const std::string& route, const std::string& not_found) {
  Result<json> r = api.get(route);
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) return Status::notFound(not_found);
  return r;
}

CLI::App* addNamedCommand(CLI::App& parent, const std::string& name, const std::string& help,
                          const std::string& arg, const std::string& arg_help,
                          std::function<Status(const std::string&)> run) {
  auto value = std::make_shared<std::string>();
  auto* cmd = parent.add_subcommand(name, help);
  cmd->add_option(arg, *value, arg_help)->required();
  cmd->footer(kFooter);
  cmd->callback(reporting([value, run = std::move(run)] { return run(*value); }));
  return cmd;
}

void addRepeatable(CLI::App* cmd, const std::string& flag, std::vector<std::string>& into,
                   const std::string& help, const std::string& type_name) {
  cmd->add_option(flag, into, help)
      ->type_name(type_name)
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

}  // namespace admin

void registerAdminCommands(CLI::App& app, std::shared_ptr<GlobalOptions> global) {
  admin::registerUserCommands(app, global);
  admin::registerGroupCommands(app, global);
  admin::registerQuotaCommands(app, global);
  admin::registerQosCommands(app, global);
  admin::registerAlertCommands(app, global);
  admin::registerNodeCommands(app, global);
  admin::registerUsageCommands(app, global);
  admin::registerAuditCommands(app, global);
  admin::registerAccountCommands(app, global);
  admin::registerConfigCommands(app, global);
}

}  // namespace gpool::cli
