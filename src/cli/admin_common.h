#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/user.h"
#include "cli/format.h"
#include "common/status.h"

namespace CLI {
class App;
}

// What the admin and account commands (admin_commands.h) share: the help footer, errors that
// name the flag and the role a command needs, name and amount formats, the quota columns, and
// the per-noun registration functions registerAdminCommands calls in `gpool --help` order.
// Internal to src/cli; every function prints nothing unless its name says so.
namespace gpool::cli {

struct GlobalOptions;
class ApiClient;

namespace admin {

// The footer of every admin command's --help: the global options and the exit codes.
extern const std::string kFooter;

inline constexpr std::string_view kAdminRole = "the admin role";
inline constexpr std::string_view kQuotaRole = "the admin role (or group-admin of that group)";

// gpoold's permission errors name the caller and the action; the CLI adds which command needs
// which role and what to do about it. Other statuses pass through.
Status explainDenied(Status s, std::string_view command, std::string_view role);

// Replaces the API's field paths in a message ("quota.max_gpus_milli: ...") by the flags that
// set them ("--max-gpus: ..."), so errors name what the user typed.
struct FieldFlag {
  std::string_view field;
  std::string_view flag;
};
Status withFlagNames(Status s, std::string_view prefix, const std::vector<FieldFlag>& fields);

// A name as one URL path segment (percent-encoded).
std::string pathName(const std::string& name);
// "1.5" for 1500 thousandths.
std::string gpuAmount(uint64_t milli);
// "a,b,c", or `none` for no items.
std::string joined(const std::vector<std::string>& items, const std::string& none = "-");
// Repeatable, comma-separable flag values as one list ({"a,b", "c"} -> {"a", "b", "c"}).
std::vector<std::string> splitList(const std::vector<std::string>& items);
// InvalidArgument naming `flag` unless `text` is a whole non-negative 32-bit integer.
Result<uint32_t> parseUint32(const std::string& text, std::string_view flag);
// api::validateAccountName with the argument `arg` named in the error.
Status validName(const std::string& name, std::string_view what, std::string_view arg);
// "YYYY-MM-DD HH:MM:SS" (UTC) of a Unix time in microseconds.
std::string utcTime(int64_t unix_us);
// "Key: value" lines with the values aligned.
std::string formatFields(const std::vector<std::pair<std::string, std::string>>& fields);

// Quota formatting: the one-line summary, the table's header, alignment and row, and the
// limits of one of gpoold's quota answers.
std::string limitText(const std::optional<uint64_t>& v, std::string (*f)(uint64_t));
std::string memText(uint64_t mib);
std::string hoursLimitText(double h);
std::string quotaSummary(const api::Quota& q);
std::vector<std::string> quotaHeader();
extern const std::vector<Align> kQuotaAlign;
std::vector<std::string> quotaRow(const std::string& subject, const std::string& name,
                                  const api::Quota& q);
Result<api::Quota> quotaFrom(const nlohmann::json& answer);

// One of gpoold's user records.
Result<api::User> userFrom(const nlohmann::json& j);

// DELETE `target`; prints "Removed <what>" or the JSON answer. A refusal names `command` and
// the `role` it needs.
Status removeThing(const GlobalOptions& global, const std::string& target, const std::string& what,
                   const std::string& command, std::string_view role);

// GET `route`; a NotFound answer becomes NotFound(`not_found`), which says how to add the record.
Result<nlohmann::json> getRecord(ApiClient& api, const std::string& route,
                                 const std::string& not_found);

// The user and group commands' shapes, shared by the other nouns where they fit:
// `parent <name> ARG` with one required positional argument, the admin footer, and `run` called
// on the argument (its Status reported as every command's is).
CLI::App* addNamedCommand(CLI::App& parent, const std::string& name, const std::string& help,
                          const std::string& arg, const std::string& arg_help,
                          std::function<Status(const std::string&)> run);
// A repeatable option taking one value each time (`--member a --member b`), all kept in `into`.
void addRepeatable(CLI::App* cmd, const std::string& flag, std::vector<std::string>& into,
                   const std::string& help, const std::string& type_name);

// GPU-hours with two decimals.
std::string hoursText(double h);
// GET /v1/account: the caller's user, groups, quotas and use.
Result<nlohmann::json> accountOf(ApiClient& api);
// `gpool account` (quota_only: `gpool account quota`, `gpool quota --mine`); prints.
Status runAccount(const GlobalOptions& global, bool quota_only);

// Each noun's commands, added to `app` (account_commands.cc, alert_commands.cc, ...).
void registerUserCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global);
void registerGroupCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global);
void registerQuotaCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global);
void registerQosCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global);
void registerAlertCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global);
void registerNodeCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global);
void registerUsageCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global);
void registerAuditCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global);
void registerAccountCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global);
void registerConfigCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global);

}  // namespace admin
}  // namespace gpool::cli
