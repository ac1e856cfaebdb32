#include "cli/client_commands.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/gpu_model.h"
#include "api/job.h"
#include "api/json_reader.h"
#include "api/node.h"
#include "cli/api_client.h"
#include "cli/format.h"
#include "cli/interactive_commands.h"
#include "cli/submit_options.h"
#include "common/status.h"
#include "net/client.h"
#include "net/http.h"

namespace gpool::cli {

namespace {

using nlohmann::json;

// ---------------------------------------------------------------- submit

struct SubmitArgs {
  std::map<std::string, std::vector<std::string>> values;
  std::map<std::string, bool> switches;
  std::vector<std::string> args;
};

std::optional<std::string> envLookup(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

// The job that `a` describes (flags, #GPOOL directives of a script, the command). `what` is
// the command's name in messages ("submit", "run").
Result<SubmitPlan> planSubmit(const GlobalOptions& global, const SubmitArgs& a,
                              const std::string& what) {
  if (!global.submit_error.empty()) return Status::invalidArgument(global.submit_error);
  SubmitFlags command_line;
  for (const auto& [name, values] : a.values) {
    for (const std::string& v : values)
      command_line.add(name, FlagValue{v, "--" + name});
  }
  for (const auto& [name, on] : a.switches) {
    if (on) command_line.add(name, FlagValue{"true", "--" + name});
  }
  if (a.args.empty()) {
    return Status::invalidArgument("nothing to run: give a batch script (gpool " + what +
                                   " train.sh) or a command after -- (gpool " + what +
                                   " --gpus 1 -- python train.py)");
  }
  SubmitFlags flags;
  std::vector<std::string> command;
  SubmitContext context;
  std::error_code ec;
  context.cwd = std::filesystem::current_path(ec).string();
  if (ec) return Status::ioError("cannot read the current directory: " + ec.message());
  context.getenv = envLookup;
  if (global.submit_command) {
    command = a.args;
  } else {
    const std::string& path = a.args[0];
    if (!std::filesystem::is_regular_file(path, ec)) {
      return Status::invalidArgument("'" + path +
                                     "' is not a file: give a batch script, or put a command "
                                     "after -- (gpool submit -- " +
                                     path + ")");
    }
    std::ifstream in(path, std::ios::binary);
    std::stringstream content;
    content << in.rdbuf();
    if (!in) return Status::ioError("cannot read the script " + path);
    GPOOL_ASSIGN_OR_RETURN(flags, parseDirectives(content.str(), path));
    std::string absolute = std::filesystem::absolute(path, ec).lexically_normal().string();
    command = scriptCommand(content.str(), absolute,
                            std::vector<std::string>(a.args.begin() + 1, a.args.end()));
    context.default_name = std::filesystem::path(path).filename().string();
  }
  flags.overrideWith(command_line);
  return buildSubmitPlan(flags, std::move(command), context);
}

// The flags of an allocation (gpool alloc): resources only, no command.
Result<SubmitPlan> planAlloc(const SubmitArgs& a) {
  SubmitFlags flags;
  for (const auto& [name, values] : a.values) {
    for (const std::string& v : values)
      flags.add(name, FlagValue{v, "--" + name});
  }
  for (const auto& [name, on] : a.switches) {
    if (on) flags.add(name, FlagValue{"true", "--" + name});
  }
  SubmitContext context;
  std::error_code ec;
  context.cwd = std::filesystem::current_path(ec).string();
  if (ec) return Status::ioError("cannot read the current directory: " + ec.message());
  context.getenv = envLookup;
  context.default_name = "interactive";
  context.interactive = true;
  return buildSubmitPlan(flags, {}, context);
}

Status runSubmit(const GlobalOptions& global, const SubmitArgs& a) {
  GPOOL_ASSIGN_OR_RETURN(SubmitPlan plan, planSubmit(global, a, "submit"));
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  std::string target = "/v1/jobs";
  if (!plan.group.empty()) target += "?group=" + net::percentEncode(plan.group);
  GPOOL_ASSIGN_OR_RETURN(json answer, api.post(target, api::toJson(plan.spec).dump()));
  if (global.json) {
    printJson(answer);
    return Status::ok();
  }
  std::vector<int64_t> ids;
  if (answer.contains("ids") && answer["ids"].is_array()) {
    for (const json& id : answer["ids"]) {
      if (id.is_number_integer()) ids.push_back(id.get<int64_t>());
    }
  }
  if (ids.empty()) return Status::internal("gpoold's answer names no job ids: " + answer.dump());
  if (!plan.spec.array) {
    std::cout << "Submitted job " << ids[0] << "\n";
    return Status::ok();
  }
  bool consecutive = true;
  for (size_t i = 1; i < ids.size(); ++i)
    consecutive = consecutive && ids[i] == ids[i - 1] + 1;
  std::cout << "Submitted array job " << ids[0] << " (" << ids.size() << " elements, jobs ";
  if (consecutive) {
    std::cout << ids.front() << "-" << ids.back();
  } else {
    for (size_t i = 0; i < ids.size(); ++i)
      std::cout << (i ? "," : "") << ids[i];
  }
  std::cout << ")\n";
  return Status::ok();
}

// ---------------------------------------------------------------- queue

struct QueueArgs {
  std::string user;
  std::vector<std::string> states;
  bool all = false;
  bool watch = false;
  bool start = false;  // squeue --start: expected start times
};

// --watch: calls `draw` now and again after every job event from GET /v1/watch (at most every
// 200 ms), or every 2 s when the live route cannot be reached (an older gpoold). Runs until
// interrupted or `draw` fails.
Status watchLoop(const GlobalOptions& global, const std::function<Status()>& draw) {
  std::mutex mu;
  std::condition_variable cv;
  bool changed = false;
  bool live = false;
  net::WebSocketClientOptions o;
  GPOOL_ASSIGN_OR_RETURN(ControllerTarget target, controllerTarget(global));
  o.endpoint = target.endpoint;
  o.alternates = target.alternates;
  o.target = "/v1/watch?topics=jobs";
  o.initial_backoff = std::chrono::milliseconds(1000);
  o.max_backoff = std::chrono::milliseconds(10'000);
  o.on_message = [&](std::string text) {
    std::lock_guard lock(mu);
    if (text.find("\"last_event\"") != std::string::npos) live = true;
    changed = true;
    cv.notify_all();
  };
  o.on_disconnect = [&](const Status&) {
    std::lock_guard lock(mu);
    live = false;
  };
  net::WebSocketClient client(o);
  client.start();
  while (true) {
    GPOOL_RETURN_IF_ERROR(draw());
    std::unique_lock lock(mu);
    cv.wait_for(lock, live ? std::chrono::seconds(30) : std::chrono::seconds(2),
                [&] { return changed; });
    changed = false;
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // coalesce bursts
  }
}

Status runQueue(const GlobalOptions& global, const QueueArgs& a) {
  if (a.all && !a.user.empty()) {
    return Status::invalidArgument("--all and --user exclude each other (--all: every user)");
  }
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  std::string query;
  if (!a.all) {
    std::string user = a.user;
    if (user.empty()) {
      GPOOL_ASSIGN_OR_RETURN(user, api.callerName());
    }
    query += "&user=" + net::percentEncode(user);
  }
  bool every_state = false;
  std::string states;
  for (const std::string& item : a.states) {
    std::stringstream ss(item);
    std::string s;
    while (std::getline(ss, s, ',')) {
      if (s == "all" || s == "ALL") {
        every_state = true;
        continue;
      }
      Result<api::JobState> state = api::parseJobState(s);
      if (!state.ok()) {
        return Status::invalidArgument(
            "--state: '" + s +
            "' is not a job state (use PD, R, CG, CD, F, CA, TO, PR, NF, OOM, their names, or "
            "all)");
      }
      states += "&state=" + std::string(api::jobStateName(*state));
    }
  }
  if (!every_state) query += states.empty() ? activeStatesQuery() : states;

  auto draw = [&]() -> Status {
    std::vector<json> raw;
    GPOOL_ASSIGN_OR_RETURN(std::vector<api::Job> jobs, listAll(api, query, &raw));
    if (global.json) {
      printJson(json{{"jobs", raw}});
      return Status::ok();
    }
    if (a.watch) std::cout << "\033[H\033[2J";  // redraw from the top of a cleared screen
    std::cout << (a.start ? formatQueueStart(jobs, now()) : formatQueue(jobs, now())) << std::flush;
    return Status::ok();
  };
  if (!a.watch) return draw();
  return watchLoop(global, draw);
}

// ---------------------------------------------------------------- show

Status runShow(const GlobalOptions& global, const std::string& job_text) {
  GPOOL_ASSIGN_OR_RETURN(JobRef ref, parseJobRef(job_text));
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(uint64_t id, resolve(api, ref));
  GPOOL_ASSIGN_OR_RETURN(json answer, api.get("/v1/jobs/" + std::to_string(id)));
  if (global.json) {
    printJson(answer);
    return Status::ok();
  }
  api::Job job;
  GPOOL_RETURN_IF_ERROR(api::fromJson(answer, &job, "gpoold's job"));
  std::cout << formatJob(job, now());
  return Status::ok();
}

// ---------------------------------------------------------------- cancel

struct CancelArgs {
  std::vector<std::string> jobs;
  bool mine = false;
};

Status runCancel(const GlobalOptions& global, const CancelArgs& a) {
  if (a.mine == !a.jobs.empty()) {
    return Status::invalidArgument(
        a.mine ? "give job ids or --mine, not both"
               : "which jobs? give job ids (gpool cancel 42 43) or --mine for all of yours");
  }
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  std::vector<std::string> targets = a.jobs;
  if (a.mine) {
    GPOOL_ASSIGN_OR_RETURN(std::string me, api.callerName());
    GPOOL_ASSIGN_OR_RETURN(
        std::vector<api::Job> mine,
        listAll(api, "&user=" + net::percentEncode(me) + activeStatesQuery(), nullptr));
    for (const api::Job& job : mine)
      targets.push_back(std::to_string(job.id));
  }
  json results = json::array();
  std::vector<std::string> failed;
  Status first_failure;
  for (const std::string& text : targets) {
    Status s;
    Result<JobRef> ref = parseJobRef(text);
    if (!ref.ok()) {
      s = ref.status();
    } else {
      Result<uint64_t> id = resolve(api, *ref);
      if (!id.ok()) {
        s = id.status();
      } else {
        Result<json> answer = api.post("/v1/jobs/" + std::to_string(*id) + "/cancel", "");
        if (answer.ok()) {
          results.push_back(*answer);
          if (!global.json) std::cout << "Cancelled job " << text << "\n";
          continue;
        }
        s = answer.status();
      }
    }
    // The controller cannot be reached: the rest would fail the same way.
    if (s.code() == StatusCode::kUnavailable) return s;
    std::cerr << "gpool: cannot cancel job " << text << ": " << s.message() << "\n";
    results.push_back(json{
        {"job", text},
        {"error", {{"code", std::string(statusCodeName(s.code()))}, {"message", s.message()}}}});
    failed.push_back(text);
    if (first_failure.isOk()) first_failure = s;
  }
  if (global.json) printJson(json{{"results", results}});
  if (a.mine && targets.empty() && !global.json) std::cout << "No jobs of yours to cancel\n";
  if (failed.empty()) return Status::ok();
  std::string list;
  for (size_t i = 0; i < failed.size(); ++i)
    list += (i ? ", " : "") + failed[i];
  return Status(first_failure.code(), std::to_string(failed.size()) + " of " +
                                          std::to_string(targets.size()) +
                                          " cancellations failed (jobs " + list + ")");
}

// ---------------------------------------------------------------- nodes

Status runNodes(const GlobalOptions& global, bool models) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(json answer, api.get("/v1/nodes"));
  if (global.json && !models) {
    printJson(answer);
    return Status::ok();
  }
  std::vector<api::Node> nodes;
  if (!answer.contains("nodes") || !answer["nodes"].is_array()) {
    return Status::internal("gpoold's node list has no 'nodes' array");
  }
  for (const json& j : answer["nodes"]) {
    api::Node node;
    GPOOL_RETURN_IF_ERROR(api::fromJson(j, &node, "gpoold's node"));
    nodes.push_back(std::move(node));
  }
  if (models) {
    if (global.json) {
      std::map<std::string, json> by_model;
      for (const api::Node& node : nodes) {
        for (const api::Gpu& gpu : node.gpus) {
          json& m = by_model[gpu.model];
          if (m.is_null())
            m = json{{"model", gpu.model}, {"gpus", 0}, {"names", api::gpuModelNames(gpu.model)}};
          m["gpus"] = m["gpus"].get<int64_t>() + 1;
        }
      }
      json out = json::array();
      for (auto& [model, m] : by_model)
        out.push_back(std::move(m));
      printJson(json{{"models", std::move(out)}});
    } else {
      std::cout << formatGpuModels(nodes);
    }
    return Status::ok();
  }
  // Usage comes from the jobs that hold resources, as far as the caller may list them.
  GPOOL_ASSIGN_OR_RETURN(std::vector<api::Job> running,
                         listAll(api, "&state=RUNNING&state=COMPLETING", nullptr));
  if (nodes.empty()) {
    std::cout << "No nodes registered yet (start gpool-agent on a GPU server)\n";
    return Status::ok();
  }
  std::cout << formatNodes(nodes, usageByNode(running));
  return Status::ok();
}

}  // namespace

std::vector<std::string> splitSubmitArguments(const std::vector<std::string>& args,
                                              GlobalOptions* global) {
  // Global options before the command: --socket takes a value.
  size_t i = 0;
  while (i < args.size() && args[i].size() > 1 && args[i][0] == '-') {
    i += args[i].rfind("--", 0) == 0 && globalOptionTakesValue(args[i].substr(2)) ? 2 : 1;
  }
  if (i >= args.size() || (args[i] != "submit" && args[i] != "run")) return args;
  std::vector<std::string> kept(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1);
  for (++i; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      global->submit_args.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      global->submit_command = true;
      return kept;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      global->submit_args.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      return kept;
    }
    std::string name = arg.substr(arg.rfind("--", 0) == 0 ? 2 : 1);
    bool has_value = name.find('=') != std::string::npos;
    name = name.substr(0, name.find('='));
    const SubmitFlagDef* def = findSubmitFlag(name);
    bool global_flag =
        globalOptionTakesValue(name) || name == "json" || name == "help" || name == "h";
    if (!def && !global_flag) {
      // CLI11 would only say "not expected"; submit names the flag and suggests one.
      if (global->submit_error.empty()) global->submit_error = unknownSubmitFlag(name);
      continue;
    }
    kept.push_back(arg);
    if (!has_value && ((def && def->value_name) || globalOptionTakesValue(name)) &&
        i + 1 < args.size()) {
      kept.push_back(args[++i]);  // its value
    }
  }
  return kept;
}

std::string effectiveServer(const GlobalOptions& global) {
  return global.socket_given && !global.server_given ? std::string() : global.server;
}

bool globalOptionTakesValue(const std::string& name) {
  return name == "socket" || name == "server" || name == "ca" || name == "token-file";
}

std::string defaultSocketPath() {
  const char* env = std::getenv("GPOOL_SOCKET");
  if (env && *env) return env;
  return "/run/gpool/gpoold.sock";
}

std::string globalOptionsFooter(std::string_view exit_codes) {
  return "Global options (before or after the command):\n"
         "  --socket PATH       the controller's Unix socket (default: $GPOOL_SOCKET, else "
         "/run/gpool/gpoold.sock)\n"
         "  --server HOST:PORT  its TLS listener instead, with an API token (default: "
         "$GPOOL_SERVER;\n"
         "                      --ca FILE, --token-file FILE: see `gpool token --help`)\n"
         "  --json              print JSON (the server's answer) instead of tables\n"
         "Exit codes: " +
         std::string(exit_codes) + " (docs/cli-exit-codes.md)\n";
}

void registerClientCommands(CLI::App& app, std::shared_ptr<GlobalOptions> global) {
  const std::string footer = globalOptionsFooter(
      "0 ok, 2 bad arguments, 3 not found, 4 permission denied, 5 wrong state, 6 quota, 7 "
      "controller unreachable");
  // ---- submit
  auto submit_args = std::make_shared<SubmitArgs>();
  auto* submit = app.add_subcommand(
      "submit", "Submit a batch job: a script with #GPOOL directive lines, or a command after --");
  for (const SubmitFlagDef& def : submitFlagDefs()) {
    std::string flag = std::string("--") + def.name;
    if (!def.value_name) {
      submit->add_flag(flag, submit_args->switches[def.name], def.help);
      continue;
    }
    submit
        ->add_option(flag, submit_args->values[def.name],
                     def.help + std::string(def.repeatable ? " (repeatable)" : ""))
        ->type_name(def.value_name)
        ->expected(1)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
  submit->callback(reporting([global, submit_args] {
    submit_args->args = global->submit_args;
    return runSubmit(*global, *submit_args);
  }));
  submit->footer(
      "Usage: gpool submit [OPTIONS] SCRIPT [ARGS...]   (#GPOOL lines in SCRIPT hold more "
      "options)\n       gpool submit [OPTIONS] -- CMD [ARGS...]\n\n" +
      footer);

  // ---- run and alloc: submit's flags; run also takes the command (split off like submit's)
  auto addSubmitFlags = [](CLI::App* cmd, SubmitArgs& args) {
    for (const SubmitFlagDef& def : submitFlagDefs()) {
      std::string flag = std::string("--") + def.name;
      if (!def.value_name) {
        cmd->add_flag(flag, args.switches[def.name], def.help);
        continue;
      }
      cmd->add_option(flag, args.values[def.name],
                      def.help + std::string(def.repeatable ? " (repeatable)" : ""))
          ->type_name(def.value_name)
          ->expected(1)
          ->allow_extra_args(false)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
  };
  // A command that ends with the exit code of what it ran.
  auto exiting = [](int code) {
    if (code != 0) throw CLI::RuntimeError(code);
  };
  auto run_args = std::make_shared<SubmitArgs>();
  auto* run = app.add_subcommand(
      "run", "Run a job in the foreground: submit, wait, stream its output, exit with its code");
  addSubmitFlags(run, *run_args);
  run->callback([global, run_args, exiting] {
    int code = 0;
    reporting([&]() -> Status {
      run_args->args = global->submit_args;
      GPOOL_ASSIGN_OR_RETURN(SubmitPlan plan, planSubmit(*global, *run_args, "run"));
      return runForeground(*global, plan, &code);
    })();
    exiting(code);
  });
  run->footer(
      "Usage: gpool run [OPTIONS] -- CMD [ARGS...]   (or a SCRIPT with #GPOOL lines)\n"
      "Ctrl-C cancels the job and waits for its end; a second Ctrl-C leaves at once.\n\n" +
      footer);

  auto alloc_args = std::make_shared<SubmitArgs>();
  auto* alloc = app.add_subcommand(
      "alloc", "Allocate resources interactively and enter them; leaving the shell releases them");
  addSubmitFlags(alloc, *alloc_args);
  alloc->callback([global, alloc_args, exiting] {
    int code = 0;
    reporting([&]() -> Status {
      GPOOL_ASSIGN_OR_RETURN(SubmitPlan plan, planAlloc(*alloc_args));
      return runAlloc(*global, plan, &code);
    })();
    exiting(code);
  });
  alloc->footer(
      "The allocation holds its resources until you leave the shell (it is then released "
      "without asking), it is cancelled, or its time limit passes.\n\n" +
      footer);

  registerInteractiveCommands(app, global);

  // ---- queue
  auto queue_args = std::make_shared<QueueArgs>();
  auto* queue = app.add_subcommand(
      "queue", "List jobs, like squeue (default: your pending and running jobs)");
  queue->add_option("-u,--user", queue_args->user, "the jobs of this user");
  queue
      ->add_option("-s,--state", queue_args->states,
                   "only these states, comma-separated codes or names (PD,R,CD...), or all")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  queue->add_flag("-a,--all", queue_args->all,
                  "every user's jobs (as far as your role lets you see them)");
  queue->add_flag("-w,--watch", queue_args->watch,
                  "redraw on every job event until Ctrl-C (polls every 2 s without live updates)");
  queue->add_flag("--start", queue_args->start,
                  "START_TIME instead of TIME: when a reservation expects each pending job to "
                  "start (N/A without one), like squeue --start");
  queue->footer(footer);
  queue->callback(reporting([global, queue_args] { return runQueue(*global, *queue_args); }));

  // ---- show
  auto show_job = std::make_shared<std::string>();
  auto* show = app.add_subcommand("show", "Show every field of one job");
  show->add_option("job", *show_job, "job id: 42, or 42_3 for an array element")->required();
  show->footer(footer);
  show->callback(reporting([global, show_job] { return runShow(*global, *show_job); }));

  // ---- cancel
  auto cancel_args = std::make_shared<CancelArgs>();
  auto* cancel = app.add_subcommand("cancel", "Cancel jobs: the ones named, or all of yours");
  cancel->add_option("jobs", cancel_args->jobs, "job ids: 42, 42_3 (an array element)");
  cancel->add_flag("--mine", cancel_args->mine, "every pending or running job of yours");
  cancel->footer(footer);
  cancel->callback(reporting([global, cancel_args] { return runCancel(*global, *cancel_args); }));

  // ---- nodes
  auto* nodes = app.add_subcommand("nodes", "List the pool's servers and their GPUs, like sinfo");
  auto models = std::make_shared<bool>(false);
  nodes->add_flag("--models", *models,
                  "list the pool's GPU models and the names --gpu-model accepts for each");
  nodes->footer(footer);
  nodes->callback(reporting([global, models] { return runNodes(*global, *models); }));
}

}  // namespace gpool::cli
