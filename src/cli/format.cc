#include "cli/format.h"

#include <time.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "api/gpu_model.h"
#include "api/text.h"
#include "common/units.h"

namespace gpool::cli {

namespace {

std::string localTime(TimePoint t) {
  time_t secs = static_cast<time_t>(toUnixMicros(t) / 1'000'000);
  struct tm tm {};
  localtime_r(&secs, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

std::string joined(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

// Distinct node names of a job's allocations, in task order.
std::vector<std::string> jobNodes(const api::Job& job) {
  std::vector<std::string> nodes;
  for (const api::Allocation& a : job.allocations) {
    if (std::find(nodes.begin(), nodes.end(), a.node) == nodes.end()) nodes.push_back(a.node);
  }
  return nodes;
}

}  // namespace

std::string terminalSafe(std::string_view text) {
  return api::escapeForTerminal(text);
}

std::string shellQuoted(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& word : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !word.empty() && word.find_first_not_of(
                                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789_-+=.,:/@%^") == std::string::npos;
    if (plain) {
      out += word;
    } else if (api::firstUnsafeChar(word).empty()) {
      out += '\'';
      for (char c : word) {
        if (c == '\'') {
          out += "'\\''";
        } else {
          out += c;
        }
      }
      out += '\'';
    } else {
      // Bash's ANSI-C quoting: the escapes are the text's, quotes and backslashes escaped.
      std::string inner;
      for (char c : word) {
        if (c == '\'' || c == '\\') inner += '\\';
        inner += c;
      }
      out += "$'" + api::escapeForTerminal(inner) + "'";
    }
  }
  return out;
}

std::string formatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows,
                        const std::vector<Align>& align) {
  std::vector<size_t> width(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c)
    width[c] = terminalSafe(header[c]).size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], terminalSafe(row[c]).size());
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < cells.size() ? terminalSafe(cells[c]) : "";
      if (c) out += "  ";
      std::string pad(width[c] - std::min(width[c], cell.size()), ' ');
      bool right = c < align.size() && align[c] == Align::kRight;
      out += right ? pad + cell : cell + pad;
    }
    while (!out.empty() && out.back() == ' ')
      out.pop_back();
    return out + "\n";
  };
  std::string out = line(header);
  for (const auto& row : rows)
    out += line(row);
  return out;
}

std::string jobElapsed(const api::Job& job, TimePoint now) {
  if (!job.start_time) return formatDuration(0);
  TimePoint end = job.end_time ? *job.end_time : now;
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(end - *job.start_time).count();
  return formatDuration(secs);
}

std::string jobGpus(const api::JobSpec& spec) {
  uint32_t per_task = spec.resources.gpus_milli;
  if (spec.tasks <= 1 || per_task == 0) return formatGpuCount(per_task);
  if (per_task % 1000 == 0) {
    return formatGpuCount(static_cast<uint32_t>(
        std::min<uint64_t>(uint64_t{per_task} * spec.tasks, uint64_t{kMaxGpusPerTask} * 1000)));
  }
  return formatGpuCount(per_task) + "x" + std::to_string(spec.tasks);
}

std::string jobWhere(const api::Job& job) {
  std::vector<std::string> nodes = jobNodes(job);
  if (!nodes.empty()) return joined(nodes, ",");
  if (!job.reason.empty()) return "(" + job.reason + ")";
  return "(None)";
}

std::string formatQueue(const std::vector<api::Job>& jobs, TimePoint now) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(jobs.size());
  for (const api::Job& job : jobs) {
    rows.push_back({api::formatJobId(job), job.spec.name, job.user,
                    std::string(api::jobStateCode(job.state)), jobElapsed(job, now),
                    jobGpus(job.spec), jobWhere(job)});
  }
  return formatTable(
      {"JOBID", "NAME", "USER", "ST", "TIME", "GPUS", "NODE(REASON)"}, rows,
      {Align::kRight, Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight, Align::kRight});
}

std::string formatQueueStart(const std::vector<api::Job>& jobs, TimePoint now) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(jobs.size());
  for (const api::Job& job : jobs) {
    std::string start = "N/A";
    if (job.state != api::JobState::kPending) {
      start = job.start_time ? localTime(*job.start_time) : "-";
    } else if (job.expected_start) {
      start = localTime(std::max(*job.expected_start, now));
    }
    rows.push_back({api::formatJobId(job), job.spec.name, job.user,
                    std::string(api::jobStateCode(job.state)), start, jobGpus(job.spec),
                    jobWhere(job)});
  }
  return formatTable(
      {"JOBID", "NAME", "USER", "ST", "START_TIME", "GPUS", "NODE(REASON)"}, rows,
      {Align::kRight, Align::kLeft, Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight});
}

std::string formatJob(const api::Job& job, TimePoint now) {
  const api::JobSpec& s = job.spec;
  std::vector<std::pair<std::string, std::string>> f;
  f.emplace_back("JobId", api::formatJobId(job) +
                              (job.array_job_id ? " (id " + std::to_string(job.id) + ")" : ""));
  f.emplace_back("Name", s.name);
  f.emplace_back("User", job.user + " (uid " + std::to_string(job.uid) + ")");
  f.emplace_back("Group", job.group.empty() ? "-" : job.group);
  f.emplace_back("State", std::string(api::jobStateName(job.state)) +
                              (job.reason.empty() ? "" : " Reason=" + job.reason));
  // The scheduler's words about a pending job, and when its reservation expects it to start.
  if (!job.reason_detail.empty()) f.emplace_back("Waiting", job.reason_detail);
  if (job.expected_start) {
    const int64_t in_s = std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::seconds>(*job.expected_start - now).count());
    f.emplace_back("ExpectedStart",
                   localTime(*job.expected_start) + " (in " + formatDuration(in_s) + ")");
  }
  if (job.exit_code) f.emplace_back("ExitCode", std::to_string(*job.exit_code));
  f.emplace_back("SubmitTime", localTime(job.submit_time));
  f.emplace_back("StartTime", job.start_time ? localTime(*job.start_time) : "-");
  f.emplace_back("EndTime", job.end_time ? localTime(*job.end_time) : "-");
  f.emplace_back("RunTime", jobElapsed(job, now));
  f.emplace_back("TimeLimit",
                 s.time_limit_seconds ? formatDuration(s.time_limit_seconds) : "QoS maximum");
  f.emplace_back("QoS", s.qos.empty() ? "default" : s.qos);
  f.emplace_back("Preemptible", s.preemptible ? "yes" : "no");
  if (s.interactive) f.emplace_back("Interactive", "yes");
  f.emplace_back("Tasks", std::to_string(s.tasks) +
                              (s.nodes ? " on " + std::to_string(s.nodes) + " nodes" : ""));
  std::string gpus = formatGpuCount(s.resources.gpus_milli);
  if (s.resources.gpu_memory_mib) gpus += " mem=" + formatMemoryMiB(s.resources.gpu_memory_mib);
  if (s.resources.gpu_compute_milli) {
    gpus += " compute=" + formatComputeShare(s.resources.gpu_compute_milli);
  }
  f.emplace_back("GpusPerTask", gpus);
  f.emplace_back("CpusPerTask", formatCpuMillis(s.resources.cpus_milli));
  f.emplace_back("MemPerTask",
                 s.resources.ram_mib ? formatMemoryMiB(s.resources.ram_mib) : "site default");
  if (!s.constraints.gpu_models.empty()) {
    f.emplace_back("GpuModels", joined(s.constraints.gpu_models, ","));
  }
  if (s.constraints.min_compute_capability) {
    f.emplace_back("MinComputeCapability",
                   api::formatComputeCapability(*s.constraints.min_compute_capability));
  }
  if (s.constraints.min_cuda) {
    f.emplace_back("MinCuda", api::formatCudaVersion(*s.constraints.min_cuda));
  }
  if (s.constraints.min_gpu_memory_mib) {
    f.emplace_back("MinGpuMemory", formatMemoryMiB(s.constraints.min_gpu_memory_mib));
  }
  for (const auto& [k, v] : s.constraints.node_labels)
    f.emplace_back("NodeLabel", k + "=" + v);
  if (s.array) f.emplace_back("Array", api::formatArraySpec(*s.array));
  if (job.array_job_id) {
    f.emplace_back("ArrayJobId", std::to_string(*job.array_job_id));
    f.emplace_back("ArrayIndex", job.array_index ? std::to_string(*job.array_index) : "-");
  }
  if (!s.dependencies.empty()) {
    f.emplace_back("Dependency", api::formatDependencyList(s.dependencies));
  }
  f.emplace_back("Command", shellQuoted(s.command));
  f.emplace_back("WorkDir", s.working_dir.empty() ? "(home)" : s.working_dir);
  for (const auto& [k, v] : s.env)
    f.emplace_back("Env", k + "=" + v);
  if (job.requeue_count) f.emplace_back("Requeues", std::to_string(job.requeue_count));
  for (const api::Allocation& a : job.allocations) {
    std::string text = "task " + std::to_string(a.task) + " on " + a.node +
                       " cpus=" + formatCpuMillis(a.cpus_milli) +
                       " mem=" + formatMemoryMiB(a.ram_mib);
    for (const api::Slice& slice : a.slices) {
      text += " " + slice.gpu_uuid +
              (slice.exclusive ? "(whole)"
                               : "(" + formatMemoryMiB(slice.memory_mib) + "," +
                                     formatComputeShare(slice.compute_milli) + ")");
    }
    f.emplace_back("Allocation", text);
  }
  size_t width = 0;
  for (const auto& [k, v] : f)
    width = std::max(width, k.size());
  std::string out;
  for (const auto& [k, v] : f)
    out += k + ":" + std::string(width - k.size() + 1, ' ') + terminalSafe(v) + "\n";
  return out;
}

std::vector<std::pair<std::string, NodeUsage>> usageByNode(const std::vector<api::Job>& jobs) {
  std::map<std::string, NodeUsage> by_node;
  for (const api::Job& job : jobs) {
    if (!api::holdsResources(job.state)) continue;
    for (const api::Allocation& a : job.allocations) {
      NodeUsage& u = by_node[a.node];
      u.cpus_milli += a.cpus_milli;
      u.ram_mib += a.ram_mib;
      for (const api::Slice& slice : a.slices) {
        ++u.slices;
        u.gpu_compute_milli += slice.compute_milli;
        u.compute_by_gpu[slice.gpu_uuid] += slice.compute_milli;
      }
    }
  }
  return {by_node.begin(), by_node.end()};
}

std::string nodeGpus(const api::Node& node) {
  std::vector<std::pair<std::string, int>> models;  // in first-seen order
  for (const api::Gpu& gpu : node.gpus) {
    auto it = std::find_if(models.begin(), models.end(),
                           [&](const auto& m) { return m.first == gpu.model; });
    if (it == models.end()) {
      models.emplace_back(gpu.model, 1);
    } else {
      ++it->second;
    }
  }
  if (models.empty()) return "-";
  std::vector<std::string> parts;
  for (const auto& [model, count] : models)
    parts.push_back(std::to_string(count) + "x " + model);
  const auto unhealthy = std::count_if(node.gpus.begin(), node.gpus.end(), [](const api::Gpu& g) {
    return g.health == api::GpuHealth::kUnhealthy;
  });
  std::string out = joined(parts, ", ");
  if (unhealthy > 0) out += " (" + std::to_string(unhealthy) + " unhealthy)";
  return out;
}

std::string formatNodes(const std::vector<api::Node>& nodes,
                        const std::vector<std::pair<std::string, NodeUsage>>& usage) {
  std::vector<std::vector<std::string>> rows;
  bool simulated = false;
  for (const api::Node& node : nodes) {
    NodeUsage u;
    for (const auto& [name, node_usage] : usage) {
      if (name == node.name) u = node_usage;
    }
    // Free is what the scheduler could still place: healthy GPUs of a server that takes work.
    uint64_t free = 0;
    if (api::isSchedulable(node.state)) {
      for (const api::Gpu& gpu : node.gpus) {
        if (gpu.health == api::GpuHealth::kUnhealthy) continue;
        auto used = u.compute_by_gpu.find(gpu.uuid);
        const uint64_t taken = used == u.compute_by_gpu.end() ? 0 : used->second;
        free += 1000 - std::min<uint64_t>(1000, taken);
      }
    }
    std::string state(api::nodeStateName(node.state));
    if (!node.state_reason.empty()) state += " (" + node.state_reason + ")";
    for (const api::Gpu& gpu : node.gpus)
      simulated = simulated || gpu.simulated;
    rows.push_back({node.name, state, nodeGpus(node),
                    formatGpuCount(static_cast<uint32_t>(std::min<uint64_t>(free, UINT32_MAX))) +
                        "/" + std::to_string(u.slices),
                    formatCpuMillis(u.cpus_milli) + "/" + formatCpuMillis(node.cpus_milli),
                    formatMemoryMiB(u.ram_mib) + "/" + formatMemoryMiB(node.ram_mib),
                    !node.slices              ? "-"
                    : node.slices->enforced() ? "enforced"
                                              : "NO"});
  }
  std::string out = formatTable({"NODE", "STATE", "GPUS", "SLICES(free/used)", "CPU(used/total)",
                                 "MEM(used/total)", "SLICE_LIMITS"},
                                rows,
                                {Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight,
                                 Align::kRight, Align::kRight, Align::kLeft});
  if (simulated) out += "(some GPUs are simulated by the fake backend)\n";
  // What the agents found wrong with the servers themselves (a GPU missing, the driver), and
  // the unhealthy GPUs, which get no work, and why a server takes no slices.
  for (const api::Node& node : nodes) {
    if (!node.health_reason.empty())
      out += terminalSafe(node.name + ": " + node.health_reason) + "\n";
    for (const api::Gpu& gpu : node.gpus) {
      if (gpu.health != api::GpuHealth::kUnhealthy) continue;
      out += terminalSafe(node.name + ": GPU " + std::to_string(gpu.index) + " is unhealthy" +
                          (gpu.health_reason.empty() ? "" : ": " + gpu.health_reason)) +
             "\n";
    }
    if (node.slices && !node.slices->enforced()) {
      out += terminalSafe(node.name + ": takes no GPU slices: " + node.slices->detail) + "\n";
    }
  }
  return out;
}

std::string formatGpuModels(const std::vector<api::Node>& nodes) {
  std::map<std::string, size_t> count;
  for (const api::Node& node : nodes) {
    for (const api::Gpu& gpu : node.gpus)
      ++count[gpu.model];
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& [model, n] : count)
    rows.push_back({model, std::to_string(n), joined(api::gpuModelNames(model), ", ")});
  return formatTable({"MODEL", "GPUS", "NAMES (--gpu-model)"}, rows,
                     {Align::kLeft, Align::kRight, Align::kLeft}) +
         "--gpu-model takes any of the names, in any case: a name's words must be the model's, "
         "in order\n";
}

}  // namespace gpool::cli
