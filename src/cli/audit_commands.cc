// `gpool audit [--after SEQ] [--limit N]`: gpoold's audit log (who created or revoked a token,
// set or removed a quota, removed a node, cleared a GPU's hold) through GET /v1/audit. Admins
// only: gpoold answers others 403.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/admin_common.h"
#include "cli/api_client.h"
#include "cli/client_commands.h"
#include "cli/format.h"
#include "common/status.h"

namespace gpool::cli::admin {

namespace {

using nlohmann::json;

// The DETAIL column's width: a token's or a quota's detail is a JSON object that would
// otherwise push every row off the screen (--json has it whole).
constexpr size_t kDetailWidth = 60;

// `text` cut to `width` bytes with "..." when longer, never inside a UTF-8 character.
std::string shortened(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  size_t cut = width - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;
  return text.substr(0, cut) + "...";
}

Status runAudit(const GlobalOptions& global, int64_t after, int64_t limit) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer =
      api.get("/v1/audit?after=" + std::to_string(after) + "&limit=" + std::to_string(limit));
  if (!answer.ok()) return explainDenied(answer.status(), "audit", kAdminRole);
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  const json events = answer->value("events", json::array());
  if (events.empty()) {
    std::cout << (after > 0 ? "No audit events after " + std::to_string(after) + ".\n"
                            : std::string("No audit events.\n"));
    return Status::ok();
  }
  std::vector<std::vector<std::string>> rows;
  for (const json& e : events) {
    rows.push_back({std::to_string(e.value("seq", int64_t{0})),
                    utcTime(e.value("time_us", int64_t{0})), e.value("actor", ""),
                    e.value("action", ""), e.value("subject", ""),
                    shortened(e.value("detail", ""), kDetailWidth)});
  }
  std::cout << formatTable({"SEQ", "TIME", "ACTOR", "ACTION", "SUBJECT", "DETAIL"}, rows,
                           {Align::kRight});
  const json& next = (*answer)["next_after"];
  if (next.is_number_integer()) {
    std::cout << "(more: gpool audit --after " << next.get<int64_t>() << ")\n";
  }
  return Status::ok();
}

}  // namespace

void registerAuditCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global) {
  auto after = std::make_shared<int64_t>(0);
  auto limit = std::make_shared<int64_t>(100);
  auto* audit = app.add_subcommand(
      "audit", "The audit log: who changed tokens, quotas, nodes and GPU holds (admins)");
  audit->add_option("--after", *after, "only events after this SEQ (the last page's \"more\" line)")
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  audit->add_option("--limit", *limit, "at most this many, oldest first (1..10000, default 100)")
      ->check(CLI::Range(1, 10000));
  audit->footer(kFooter);
  audit->callback(reporting([global, after, limit] { return runAudit(*global, *after, *limit); }));
}

}  // namespace gpool::cli::admin
