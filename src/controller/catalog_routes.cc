// The catalog: users, groups, quotas, QoS levels, usage reports, the caller's account, and
// the audit log of admin changes.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/json_reader.h"
#include "api/user.h"
#include "controller/accounting.h"
#include "controller/route_helpers.h"
#include "store/api_codec.h"

namespace gpool::controller::routes {

namespace {

using nlohmann::json;

// Usage reports default to the last 30 days.
constexpr int64_t kDefaultUsageDays = 30;
// An audit page without ?limit= (the jobs list's default).
constexpr int64_t kDefaultAuditPage = 100;

Result<std::string> accountName(const net::Request& req, std::string_view what) {
  std::string name = req.pathParam("name");
  Status valid = api::validateAccountName(name, what);
  if (!valid.isOk()) return valid.withContext("name");
  return name;
}

// The body of a PUT: the object under `path` ("user", "group", "qos"); its "name" may be left
// out and must otherwise equal the path's.
Result<json> putBody(const net::Request& req, const std::string& name, std::string_view path) {
  GPOOL_ASSIGN_OR_RETURN(json body, parseObjectBody(req, false));
  auto it = body.find("name");
  if (it == body.end() || it->is_null()) {
    body["name"] = name;
  } else if (!it->is_string() || it->get<std::string>() != name) {
    return Status::invalidArgument(std::string(path) + ".name: " + it->dump() +
                                   " does not match the name in the path '" + name + "'");
  }
  if (body.contains("quota")) {
    return Status::invalidArgument(std::string(path) +
                                   ".quota: set quotas with PUT /v1/quotas/{subject}/{name}");
  }
  return body;
}

Result<bool> parseSubject(const std::string& text) {
  if (text == "user") return false;
  if (text == "group") return true;
  return Status::invalidArgument("subject: '" + text + "' is not one of user, group");
}

// The quota a /v1/quotas/{subject}/{name} path names.
struct QuotaKey {
  store::QuotaSubject subject;
  std::string name;
};
Result<QuotaKey> quotaKey(const net::Request& req) {
  GPOOL_ASSIGN_OR_RETURN(bool is_group, parseSubject(req.pathParam("subject")));
  GPOOL_ASSIGN_OR_RETURN(std::string name, accountName(req, is_group ? "group name" : "user name"));
  return QuotaKey{is_group ? store::QuotaSubject::kGroup : store::QuotaSubject::kUser,
                  std::move(name)};
}

// A usage period bound: Unix seconds, or a UTC date "YYYY-MM-DD" / "YYYY-MM-DDTHH:MM:SSZ".
Result<TimePoint> parseTime(const std::string& text, std::string_view what) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    GPOOL_ASSIGN_OR_RETURN(int64_t s, parseId(text, what));
    if (s > 253'402'300'799) {  // 9999-12-31
      return Status::invalidArgument(std::string(what) + ": '" + text + "' is out of range");
    }
    return fromUnixSeconds(s);
  }
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char tail = 0;
  int n = 0;
  bool ok = false;
  if (text.size() == 10) {
    ok = std::sscanf(text.c_str(), "%4d-%2d-%2d%n", &y, &mo, &d, &n) == 3 && n == 10;
  } else if (text.size() == 20) {
    ok = std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c%n", &y, &mo, &d, &h, &mi, &s, &tail,
                     &n) == 7 &&
         n == 20 && tail == 'Z';
  }
  ok = ok && y >= 1970 && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h <= 23 && mi <= 59 &&
       s <= 59 && h >= 0 && mi >= 0 && s >= 0;
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  time_t t = ok ? timegm(&tm) : -1;
  // timegm normalises 2026-02-31 into March: refuse dates that do not exist.
  if (!ok || t < 0 || tm.tm_mday != d || tm.tm_mon != mo - 1) {
    return Status::invalidArgument(std::string(what) + ": '" + text +
                                   "' is not Unix seconds, YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ");
  }
  return fromUnixSeconds(static_cast<int64_t>(t));
}

Result<json> quotaJson(const store::QuotaRecord& record) {
  auto parsed = json::parse(record.limits_json, nullptr, /*allow_exceptions=*/false);
  api::Quota quota;
  Status s = parsed.is_discarded() ? Status::invalidArgument("does not parse")
                                   : api::fromJson(parsed, &quota, "limits");
  if (!s.isOk()) return Status::internal("stored quota of '" + record.name + "': " + s.message());
  return json{{"subject", record.subject == store::QuotaSubject::kGroup ? "group" : "user"},
              {"name", record.name},
              {"limits", api::toJson(quota)},
              {"updated_us", toUnixMicros(record.updated)}};
}

bool maySeeQuota(const Caller& caller, const store::QuotaRecord& q) {
  return q.subject == store::QuotaSubject::kGroup ? maySeeGroup(caller, q.name)
                                                  : maySeeUser(caller, q.name);
}

// What differs between the two kinds of account, users and groups; the routes are the same.
template <typename Account>
struct AccountKind;

template <>
struct AccountKind<api::User> {
  static constexpr std::string_view kName = "user";
  static constexpr std::string_view kPlural = "users";
  static Result<std::vector<store::UserRecord>> list(store::Store& s) { return s.listUsers(); }
  static Result<api::User> load(store::Store& s, const std::string& name) {
    return store::loadApiUser(s, name);
  }
  static Status save(store::Store& s, const api::User& user) { return store::saveApiUser(s, user); }
  static bool exists(store::Store& s, const std::string& name) { return s.getUser(name).ok(); }
  static Status remove(store::Store& s, const std::string& name) { return s.deleteUser(name); }
  static bool visible(const Caller& caller, const api::User& user) {
    return maySeeUser(caller, user.name, user.groups);
  }
};

template <>
struct AccountKind<api::Group> {
  static constexpr std::string_view kName = "group";
  static constexpr std::string_view kPlural = "groups";
  static Result<std::vector<store::GroupRecord>> list(store::Store& s) { return s.listGroups(); }
  static Result<api::Group> load(store::Store& s, const std::string& name) {
    return store::loadApiGroup(s, name);
  }
  static Status save(store::Store& s, const api::Group& group) {
    return store::saveApiGroup(s, group);
  }
  static bool exists(store::Store& s, const std::string& name) { return s.getGroup(name).ok(); }
  // With the group taken out of its members' records in the same transaction.
  static Status remove(store::Store& s, const std::string& name) {
    return removeGroupWithMembers(s, name, nullptr);
  }
  // Group names and directories are no secret: everyone may read them (to pick a group to
  // submit into).
  static bool visible(const Caller&, const api::Group&) { return true; }
};

// GET /v1/<plural>, GET, PUT and DELETE /v1/<plural>/{name}. Reading shows what the caller may
// see; changing is for admins (checkCatalogAdmin).
template <typename Account>
Status addAccountRoutes(net::Router& router, const Context& ctx) {
  using Kind = AccountKind<Account>;
  store::Store& store = *ctx.store;
  const std::string kind(Kind::kName);
  const std::string collection = "/v1/" + std::string(Kind::kPlural);
  const std::string item = collection + "/{name}";
  Status added = router.add(
      net::Method::kGet, collection,
      authed(ctx, {}, [&store](const Caller& caller, const net::Request&) -> Result<net::Response> {
        GPOOL_ASSIGN_OR_RETURN(auto records, Kind::list(store));
        json out = json::array();
        for (const auto& r : records) {
          GPOOL_ASSIGN_OR_RETURN(Account account, Kind::load(store, r.name));
          if (Kind::visible(caller, account)) out.push_back(api::toJson(account));
        }
        return jsonResponse(200, json{{std::string(Kind::kPlural), std::move(out)}});
      }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kGet, item,
      authed(
          ctx, {},
          [&store, kind](const Caller& caller, const net::Request& req) -> Result<net::Response> {
            GPOOL_ASSIGN_OR_RETURN(std::string name, accountName(req, kind + " name"));
            GPOOL_ASSIGN_OR_RETURN(Account account, Kind::load(store, name));
            if (!Kind::visible(caller, account)) {
              return Status::permissionDenied(std::string(roleName(caller.role)) + " '" +
                                              caller.user + "' may not read " + kind + " '" + name +
                                              "'");
            }
            return jsonResponse(200, api::toJson(account));
          }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kPut, item,
      authed(
          ctx, {},
          [&store, kind](const Caller& caller, const net::Request& req) -> Result<net::Response> {
            GPOOL_ASSIGN_OR_RETURN(std::string name, accountName(req, kind + " name"));
            GPOOL_RETURN_IF_ERROR(checkCatalogAdmin(caller, "change " + kind + " '" + name + "'"));
            GPOOL_ASSIGN_OR_RETURN(json body, putBody(req, name, kind));
            Account account;
            GPOOL_RETURN_IF_ERROR(api::fromJson(body, &account, kind));
            bool existed = Kind::exists(store, name);
            GPOOL_RETURN_IF_ERROR(Kind::save(store, account));
            GPOOL_ASSIGN_OR_RETURN(Account saved, Kind::load(store, name));
            return jsonResponse(existed ? 200 : 201, api::toJson(saved));
          }));
  if (!added.isOk()) return added;

  return router.add(
      net::Method::kDelete, item,
      authed(
          ctx, {},
          [&store, kind](const Caller& caller, const net::Request& req) -> Result<net::Response> {
            GPOOL_ASSIGN_OR_RETURN(std::string name, accountName(req, kind + " name"));
            GPOOL_RETURN_IF_ERROR(checkCatalogAdmin(caller, "delete " + kind + " '" + name + "'"));
            GPOOL_RETURN_IF_ERROR(Kind::remove(store, name));
            return jsonResponse(200, json{{"deleted", name}});
          }));
}

Status addQuotaRoutes(net::Router& router, const Context& ctx) {
  store::Store& store = *ctx.store;
  Clock& clock = *ctx.clock;
  Status added = router.add(
      net::Method::kGet, "/v1/quotas",
      authed(ctx, {}, [&store](const Caller& caller, const net::Request&) -> Result<net::Response> {
        GPOOL_ASSIGN_OR_RETURN(std::vector<store::QuotaRecord> records, store.listQuotas());
        json out = json::array();
        for (const store::QuotaRecord& r : records) {
          if (!maySeeQuota(caller, r)) continue;
          GPOOL_ASSIGN_OR_RETURN(json q, quotaJson(r));
          out.push_back(std::move(q));
        }
        return jsonResponse(200, json{{"quotas", std::move(out)}});
      }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kGet, "/v1/quotas/{subject}/{name}",
      authed(ctx, {},
             [&store](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(QuotaKey key, quotaKey(req));
               const std::string& name = key.name;
               GPOOL_ASSIGN_OR_RETURN(store::QuotaRecord record, store.getQuota(key.subject, name));
               if (!maySeeQuota(caller, record)) {
                 return Status::permissionDenied(std::string(roleName(caller.role)) + " '" +
                                                 caller.user + "' may not read the quota of " +
                                                 req.pathParam("subject") + " '" + name + "'");
               }
               GPOOL_ASSIGN_OR_RETURN(json q, quotaJson(record));
               return jsonResponse(200, q);
             }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kPut, "/v1/quotas/{subject}/{name}",
      authed(
          ctx, {},
          [&store, &clock](const Caller& caller, const net::Request& req) -> Result<net::Response> {
            GPOOL_ASSIGN_OR_RETURN(QuotaKey key, quotaKey(req));
            const std::string& name = key.name;
            auto subject = key.subject;
            GPOOL_RETURN_IF_ERROR(
                checkQuotaChange(caller, subject == store::QuotaSubject::kGroup, name));
            GPOOL_ASSIGN_OR_RETURN(json body, parseObjectBody(req, false));
            api::Quota quota;
            GPOOL_RETURN_IF_ERROR(api::fromJson(body, &quota, "quota"));
            GPOOL_RETURN_IF_ERROR(
                store::saveApiQuota(store, subject, name, quota, caller.user, clock.now()));
            GPOOL_ASSIGN_OR_RETURN(store::QuotaRecord saved, store.getQuota(subject, name));
            GPOOL_ASSIGN_OR_RETURN(json q, quotaJson(saved));
            return jsonResponse(200, q);
          }));
  if (!added.isOk()) return added;

  return router.add(
      net::Method::kDelete, "/v1/quotas/{subject}/{name}",
      authed(
          ctx, {},
          [&store, &clock](const Caller& caller, const net::Request& req) -> Result<net::Response> {
            GPOOL_ASSIGN_OR_RETURN(QuotaKey key, quotaKey(req));
            const std::string& name = key.name;
            auto subject = key.subject;
            GPOOL_RETURN_IF_ERROR(
                checkQuotaChange(caller, subject == store::QuotaSubject::kGroup, name));
            GPOOL_RETURN_IF_ERROR(store.deleteQuota(subject, name, caller.user, clock.now()));
            return jsonResponse(200, json{{"deleted", req.pathParam("subject") + ":" + name}});
          }));
}

Status addQosRoutes(net::Router& router, const Context& ctx) {
  store::Store& store = *ctx.store;
  Status added = router.add(
      net::Method::kGet, "/v1/qos",
      authed(ctx, {}, [&store](const Caller&, const net::Request&) -> Result<net::Response> {
        GPOOL_ASSIGN_OR_RETURN(std::vector<api::Qos> all, store::loadApiQos(store));
        json out = json::array();
        for (const api::Qos& q : all)
          out.push_back(api::toJson(q));
        return jsonResponse(200, json{{"qos", std::move(out)}});
      }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kPut, "/v1/qos/{name}",
      authed(ctx, {},
             [&store](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               std::string name = req.pathParam("name");
               GPOOL_RETURN_IF_ERROR(checkCatalogAdmin(caller, "change QoS '" + name + "'"));
               GPOOL_ASSIGN_OR_RETURN(json body, putBody(req, name, "qos"));
               api::Qos qos;
               GPOOL_RETURN_IF_ERROR(api::fromJson(body, &qos, "qos"));
               GPOOL_ASSIGN_OR_RETURN(std::vector<api::Qos> before, store::loadApiQos(store));
               bool existed = false;
               for (const api::Qos& q : before)
                 existed = existed || q.name == name;
               GPOOL_RETURN_IF_ERROR(store::saveApiQos(store, qos));
               return jsonResponse(existed ? 200 : 201, api::toJson(qos));
             }));
  if (!added.isOk()) return added;

  return router.add(
      net::Method::kDelete, "/v1/qos/{name}",
      authed(ctx, {},
             [&store](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               std::string name = req.pathParam("name");
               GPOOL_RETURN_IF_ERROR(checkCatalogAdmin(caller, "delete QoS '" + name + "'"));
               GPOOL_RETURN_IF_ERROR(store.deleteQos(name));
               return jsonResponse(200, json{{"deleted", name}});
             }));
}

Status addUsageRoute(net::Router& router, const Context& ctx) {
  store::Store& store = *ctx.store;
  Clock& clock = *ctx.clock;
  return router.add(
      net::Method::kGet, "/v1/usage",
      authed(
          ctx, {"by", "from", "to"},
          [&store, &clock](const Caller& caller, const net::Request& req) -> Result<net::Response> {
            std::string by = req.queryParam("by").value_or("user");
            if (by != "user" && by != "group") {
              return Status::invalidArgument("by: '" + by + "' is not one of user, group");
            }
            TimePoint to = clock.now();
            if (auto t = req.queryParam("to")) {
              GPOOL_ASSIGN_OR_RETURN(to, parseTime(*t, "to"));
            }
            TimePoint from = to - std::chrono::hours(24 * kDefaultUsageDays);
            if (auto f = req.queryParam("from")) {
              GPOOL_ASSIGN_OR_RETURN(from, parseTime(*f, "from"));
            }
            if (!(from < to)) return Status::invalidArgument("from: must be before to");
            bool by_group = by == "group";
            // Running jobs count with their run so far (issue 21: a user holding 32 GPUs
            // showed no use until the jobs ended).
            GPOOL_ASSIGN_OR_RETURN(
                std::vector<store::UsageRow> rows,
                usageSoFar(store,
                           by_group ? store::UsageGrouping::kGroup : store::UsageGrouping::kUser,
                           from, std::min(to, clock.now())));
            json out = json::array();
            for (const store::UsageRow& row : rows) {
              bool visible = by_group ? maySeeGroup(caller, row.key) : maySeeUser(caller, row.key);
              if (!visible) continue;
              out.push_back(
                  json{{"key", row.key}, {"gpu_hours", row.gpu_hours}, {"jobs", row.jobs}});
            }
            return jsonResponse(200, json{{"by", by},
                                          {"from_us", toUnixMicros(from)},
                                          {"to_us", toUnixMicros(to)},
                                          {"rows", std::move(out)}});
          }));
}

// The caller's own view: who they are (user, uid, role, groups, the groups they administer),
// their jobs and GPUs held now, each quota that applies to them (their user's and their groups')
// with what is used of it (GPUs held now, GPU-hours in the quota's period), and their fair share
// (the scheduler's decayed usage). Everyone may read their own; nobody anyone else's here.
Status addAccountRoute(net::Router& router, const Context& ctx) {
  store::Store& store = *ctx.store;
  Clock& clock = *ctx.clock;
  auto user_usage = ctx.user_usage;
  auto group_usage = ctx.group_usage;
  int64_t half_life = ctx.usage_half_life_s;
  return router.add(
      net::Method::kGet, "/v1/account",
      authed(
          ctx, {},
          [&store, &clock, user_usage, group_usage, half_life](
              const Caller& caller, const net::Request&) -> Result<net::Response> {
            TimePoint now = clock.now();
            std::vector<std::string> groups;
            std::string default_qos;
            bool has_record = false;
            Result<api::User> user = store::loadApiUser(store, caller.user);
            if (user.ok()) {
              has_record = true;
              groups = user->groups;
              default_qos = user->default_qos;
            } else if (user.status().code() != StatusCode::kNotFound) {
              return user.status();
            }
            // Jobs of the caller, and GPUs held per group (for the groups' quotas).
            GPOOL_ASSIGN_OR_RETURN(
                std::vector<store::JobRecord> jobs,
                store.jobsInStates({api::JobState::kPending, api::JobState::kRunning,
                                    api::JobState::kCompleting}));
            int64_t running = 0, pending = 0;
            uint64_t held_milli = 0;
            std::map<std::string, uint64_t> group_held;
            for (const store::JobRecord& j : jobs) {
              bool holds = j.state != api::JobState::kPending;
              if (holds) group_held[j.group] += j.gpu_thousandths;
              if (j.user != caller.user) continue;
              if (holds) {
                ++running;
                held_milli += j.gpu_thousandths;
              } else {
                ++pending;
              }
            }
            auto gpus = [](uint64_t milli) {
              std::string s = std::to_string(milli / 1000);
              if (milli % 1000) {
                char buf[8];
                std::snprintf(buf, sizeof buf, ".%03u", static_cast<unsigned>(milli % 1000));
                std::string f = buf;
                while (f.back() == '0')
                  f.pop_back();
                s += f;
              }
              return s;
            };
            // GPU-hours of `key` over the `period_s` before now.
            auto used_hours = [&](bool by_group, const std::string& key,
                                  int64_t period_s) -> Result<double> {
              GPOOL_ASSIGN_OR_RETURN(
                  std::vector<store::UsageRow> rows,
                  usageSoFar(store,
                             by_group ? store::UsageGrouping::kGroup : store::UsageGrouping::kUser,
                             now - std::chrono::seconds(period_s), now, &jobs));
              for (const store::UsageRow& r : rows) {
                if (r.key == key) return r.gpu_hours;
              }
              return 0.0;
            };
            json quotas = json::array();
            GPOOL_ASSIGN_OR_RETURN(std::vector<store::QuotaRecord> records, store.listQuotas());
            for (const store::QuotaRecord& r : records) {
              bool is_group = r.subject == store::QuotaSubject::kGroup;
              bool mine = is_group ? std::find(groups.begin(), groups.end(), r.name) != groups.end()
                                   : r.name == caller.user;
              if (!mine) continue;
              GPOOL_ASSIGN_OR_RETURN(json q, quotaJson(r));
              int64_t period = q["limits"].value("gpu_hours_period_seconds", int64_t{1});
              GPOOL_ASSIGN_OR_RETURN(double hours, used_hours(is_group, r.name, period));
              uint64_t held = is_group ? group_held[r.name] : held_milli;
              q["used"] = json{{"gpus", gpus(held)},
                               {"gpus_milli", held},
                               {"gpu_hours", hours},
                               {"period_seconds", period}};
              quotas.push_back(std::move(q));
            }
            json fair_share;  // null without the scheduler's ledger
            if (user_usage) {
              json by_group = json::object();
              if (group_usage) {
                for (const std::string& g : groups)
                  by_group[g] = group_usage(g) / 3600.0;
              }
              fair_share = json{{"half_life_seconds", half_life},
                                {"user_gpu_hours", user_usage(caller.user) / 3600.0},
                                {"group_gpu_hours", std::move(by_group)}};
            }
            std::string role(roleName(caller.role));
            return jsonResponse(200, json{{"user", caller.user},
                                          {"uid", caller.uid},
                                          {"role", role},
                                          {"has_record", has_record},
                                          {"groups", groups},
                                          {"admin_groups", caller.admin_groups},
                                          {"default_qos", default_qos},
                                          {"use",
                                           {{"running_jobs", running},
                                            {"pending_jobs", pending},
                                            {"gpus", gpus(held_milli)},
                                            {"gpus_milli", held_milli}}},
                                          {"quotas", std::move(quotas)},
                                          {"fair_share", std::move(fair_share)}});
          }));
}

// GET /v1/audit?after=SEQ&limit=N: the audit log, oldest first, for admins only (it names
// every actor and what they changed). Paged like /v1/jobs: next_after is the last event's seq
// when the page is full (there may be more), null otherwise.
Status addAuditRoute(net::Router& router, const Context& ctx) {
  store::Store& store = *ctx.store;
  return router.add(
      net::Method::kGet, "/v1/audit",
      authed(ctx, {"after", "limit"},
             [&store](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               GPOOL_RETURN_IF_ERROR(checkCatalogAdmin(caller, "read the audit log"));
               int64_t after = 0;
               int64_t limit = kDefaultAuditPage;
               if (auto a = req.queryParam("after")) {
                 GPOOL_ASSIGN_OR_RETURN(after, parseId(*a, "after"));
               }
               if (auto l = req.queryParam("limit")) {
                 GPOOL_ASSIGN_OR_RETURN(limit, parseId(*l, "limit"));
                 if (limit < 1 || limit > store::kMaxPageSize) {
                   return Status::invalidArgument("limit: must be in [1, " +
                                                  std::to_string(store::kMaxPageSize) + "]");
                 }
               }
               GPOOL_ASSIGN_OR_RETURN(std::vector<store::AuditEvent> events,
                                      store.auditEvents(after, static_cast<int32_t>(limit)));
               json out = json::array();
               for (const store::AuditEvent& e : events) {
                 out.push_back(json{{"seq", e.seq},
                                    {"time_us", toUnixMicros(e.time)},
                                    {"actor", e.actor},
                                    {"action", e.action},
                                    {"subject", e.subject},
                                    {"detail", e.detail}});
               }
               json next = static_cast<int64_t>(events.size()) == limit ? json(events.back().seq)
                                                                        : json(nullptr);
               return jsonResponse(200, json{{"events", std::move(out)}, {"next_after", next}});
             }));
}

}  // namespace

Status addCatalogRoutes(net::Router& router, const Context& ctx) {
  Status added = addAccountRoutes<api::User>(router, ctx);
  if (added.isOk()) added = addAccountRoutes<api::Group>(router, ctx);
  if (added.isOk()) added = addQuotaRoutes(router, ctx);
  if (added.isOk()) added = addQosRoutes(router, ctx);
  if (added.isOk()) added = addUsageRoute(router, ctx);
  if (added.isOk()) added = addAccountRoute(router, ctx);
  if (added.isOk()) added = addAuditRoute(router, ctx);
  return added;
}

}  // namespace gpool::controller::routes
