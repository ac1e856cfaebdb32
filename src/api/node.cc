#include "api/node.h"

#include <array>
#include <cctype>
#include <set>
#include <utility>

#include "api/json_reader.h"

namespace gpool::api {

namespace {

using nlohmann::json;

constexpr std::array<std::pair<PcieLevel, std::string_view>, 5> kPcieLevels{{
    {PcieLevel::kPix, "PIX"},
    {PcieLevel::kPxb, "PXB"},
    {PcieLevel::kPhb, "PHB"},
    {PcieLevel::kNode, "NODE"},
    {PcieLevel::kSys, "SYS"},
}};

constexpr std::array<std::pair<MigMode, std::string_view>, 3> kMigModes{{
    {MigMode::kUnsupported, "unsupported"},
    {MigMode::kDisabled, "disabled"},
    {MigMode::kEnabled, "enabled"},
}};

constexpr std::array<std::pair<GpuHealth, std::string_view>, 3> kGpuHealth{{
    {GpuHealth::kHealthy, "healthy"},
    {GpuHealth::kDegraded, "degraded"},
    {GpuHealth::kUnhealthy, "unhealthy"},
}};

constexpr std::array<std::pair<NodeState, std::string_view>, 6> kNodeStates{{
    {NodeState::kIdle, "IDLE"},
    {NodeState::kMixed, "MIXED"},
    {NodeState::kAllocated, "ALLOCATED"},
    {NodeState::kDraining, "DRAINING"},
    {NodeState::kDrained, "DRAINED"},
    {NodeState::kDown, "DOWN"},
}};

bool isNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

// Validates text fields that are identifiers of a kind (UUIDs, versions): printable ASCII,
// no spaces, bounded length.
Status validateToken(std::string_view text, std::string_view what, size_t max_len) {
  if (text.size() > max_len) {
    return Status::invalidArgument(std::string(what) + " is longer than " +
                                   std::to_string(max_len) + " characters");
  }
  for (char c : text) {
    if (c <= ' ' || c == 0x7f) {
      return Status::invalidArgument(std::string(what) + " '" + std::string(text) +
                                     "' contains a space or control character");
    }
  }
  return Status::ok();
}

void checkStatus(ObjectReader& r, std::string_view key, const Status& s) {
  if (!s.isOk()) r.fail(key, s.message());
}

}  // namespace

Result<ComputeCapability> parseComputeCapability(std::string_view text) {
  auto bad = [&]() {
    return Status::invalidArgument("compute capability '" + std::string(text) +
                                   "' is not of the form major.minor (e.g. 8.0 or 9.0)");
  };
  size_t dot = text.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 2 || dot + 2 != text.size()) {
    return bad();
  }
  ComputeCapability cc;
  for (size_t i = 0; i < dot; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return bad();
    cc.major = cc.major * 10 + static_cast<uint32_t>(text[i] - '0');
  }
  if (!std::isdigit(static_cast<unsigned char>(text[dot + 1]))) return bad();
  cc.minor = static_cast<uint32_t>(text[dot + 1] - '0');
  if (cc.major == 0) return bad();
  return cc;
}

std::string formatComputeCapability(ComputeCapability cc) {
  return std::to_string(cc.major) + "." + std::to_string(cc.minor);
}

Result<CudaVersion> parseCudaVersion(std::string_view text) {
  auto bad = [&]() {
    return Status::invalidArgument("CUDA version '" + std::string(text) +
                                   "' is not of the form major.minor (e.g. 12.2)");
  };
  size_t dot = text.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 2 || dot + 1 == text.size() ||
      text.size() - dot - 1 > 2) {
    return bad();
  }
  CudaVersion v;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == dot) continue;
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return bad();
    uint32_t& part = i < dot ? v.major : v.minor;
    part = part * 10 + static_cast<uint32_t>(text[i] - '0');
  }
  if (v.major == 0) return bad();
  return v;
}

std::string formatCudaVersion(CudaVersion v) {
  return std::to_string(v.major) + "." + std::to_string(v.minor);
}

uint32_t cudaVersionNumber(std::string_view text) {
  Result<CudaVersion> v = parseCudaVersion(text);
  return v.ok() ? v->major * 100 + v->minor : 0;
}

std::string_view pcieLevelName(PcieLevel level) {
  return enumName(level, kPcieLevels);
}
Result<PcieLevel> parsePcieLevel(std::string_view text) {
  return parseEnumName(text, kPcieLevels, "PCIe level");
}
std::string_view migModeName(MigMode mode) {
  return enumName(mode, kMigModes);
}
Result<MigMode> parseMigMode(std::string_view text) {
  return parseEnumName(text, kMigModes, "MIG mode");
}
std::string_view gpuHealthName(GpuHealth health) {
  return enumName(health, kGpuHealth);
}
Result<GpuHealth> parseGpuHealth(std::string_view text) {
  return parseEnumName(text, kGpuHealth, "GPU health");
}
std::string_view nodeStateName(NodeState state) {
  return enumName(state, kNodeStates);
}
Result<NodeState> parseNodeState(std::string_view text) {
  return parseEnumName(text, kNodeStates, "node state");
}

bool isSchedulable(NodeState state) {
  return state == NodeState::kIdle || state == NodeState::kMixed;
}

const Gpu* Node::findGpu(std::string_view uuid) const {
  for (const Gpu& g : gpus) {
    if (g.uuid == uuid) return &g;
  }
  return nullptr;
}

Status validateNodeName(std::string_view name) {
  if (name.empty()) return Status::invalidArgument("node name is empty");
  if (name.size() > 253) {
    return Status::invalidArgument("node name is longer than 253 characters");
  }
  for (char c : name) {
    if (!isNameChar(c)) {
      return Status::invalidArgument("node name '" + std::string(name) +
                                     "' may only contain letters, digits, '.', '_' and '-'");
    }
  }
  return Status::ok();
}

Status validateLabelKey(std::string_view key) {
  if (key.empty()) return Status::invalidArgument("label key is empty");
  if (key.size() > 63) return Status::invalidArgument("label key is longer than 63 characters");
  for (char c : key) {
    if (!isNameChar(c) && c != '/') {
      return Status::invalidArgument("label key '" + std::string(key) +
                                     "' may only contain letters, digits, '.', '_', '-' and '/'");
    }
  }
  return Status::ok();
}

json toJson(const GpuLink& link) {
  return json{
      {"peer_uuid", link.peer_uuid}, {"nvlinks", link.nvlinks}, {"pcie", pcieLevelName(link.pcie)}};
}

Status fromJson(const json& j, GpuLink* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("peer_uuid", &out->peer_uuid, Presence::kRequired);
  r.integer("nvlinks", &out->nvlinks, Presence::kOptional, 0u, 64u);
  r.parsed("pcie", &out->pcie, &parsePcieLevel, Presence::kOptional);
  r.check(!out->peer_uuid.empty(), "peer_uuid", "must not be empty");
  return r.finish();
}

json toJson(const Gpu& gpu) {
  json links = json::array();
  for (const GpuLink& l : gpu.links)
    links.push_back(toJson(l));
  json j{{"uuid", gpu.uuid},
         {"index", gpu.index},
         {"pci_bus_id", gpu.pci_bus_id},
         {"model", gpu.model},
         {"compute_capability", formatComputeCapability(gpu.compute_capability)},
         {"driver_version", gpu.driver_version},
         {"cuda_version", gpu.cuda_version},
         {"links", std::move(links)},
         {"mig_mode", migModeName(gpu.mig_mode)},
         {"health", gpuHealthName(gpu.health)},
         {"health_reason", gpu.health_reason},
         {"simulated", gpu.simulated}};
  putQuantity(j, "memory", Quantity::kMemoryMiB, gpu.memory_mib);
  return j;
}

Status fromJson(const json& j, Gpu* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("uuid", &out->uuid, Presence::kRequired);
  r.integer("index", &out->index, Presence::kRequired, 0u, 1023u);
  r.string("pci_bus_id", &out->pci_bus_id);
  r.string("model", &out->model, Presence::kRequired);
  r.quantity("memory", Quantity::kMemoryMiB, &out->memory_mib, Presence::kRequired);
  r.parsed("compute_capability", &out->compute_capability, &parseComputeCapability,
           Presence::kRequired);
  r.string("driver_version", &out->driver_version);
  r.string("cuda_version", &out->cuda_version);
  r.objectList("links", &out->links, Presence::kOptional, 1024);
  r.parsed("mig_mode", &out->mig_mode, &parseMigMode);
  r.parsed("health", &out->health, &parseGpuHealth);
  r.string("health_reason", &out->health_reason);
  r.boolean("simulated", &out->simulated);
  if (r.ok()) {
    r.check(!out->uuid.empty(), "uuid", "must not be empty");
    checkStatus(r, "uuid", validateToken(out->uuid, "uuid", 128));
    checkStatus(r, "pci_bus_id", validateToken(out->pci_bus_id, "PCI bus id", 64));
    checkStatus(r, "driver_version", validateToken(out->driver_version, "driver version", 64));
    checkStatus(r, "cuda_version", validateToken(out->cuda_version, "CUDA version", 64));
    r.check(!out->model.empty(), "model", "must not be empty");
    r.check(out->memory_mib > 0, "memory", "must be > 0");
    std::set<std::string_view> peers;
    for (size_t i = 0; i < out->links.size(); ++i) {
      const std::string& peer = out->links[i].peer_uuid;
      std::string key = "links[" + std::to_string(i) + "].peer_uuid";
      r.check(peer != out->uuid, key, "a GPU cannot link to itself");
      r.check(peers.insert(peer).second, key, "peer '" + peer + "' is listed twice");
    }
  }
  return r.finish();
}

json toJson(const SliceEnforcement& slices) {
  return json{{"enforced", slices.enforced()},
              {"interposer", slices.interposer},
              {"backstop", slices.backstop},
              {"detail", slices.detail}};
}

Status fromJson(const json& j, SliceEnforcement* out, std::string_view path) {
  ObjectReader r(j, path);
  bool enforced = false;  // derived from the other two; read so that toJson's output reads back
  r.boolean("enforced", &enforced);
  r.boolean("interposer", &out->interposer, Presence::kRequired);
  r.boolean("backstop", &out->backstop, Presence::kRequired);
  r.string("detail", &out->detail);
  return r.finish();
}

json toJson(const Node& node) {
  json gpus = json::array();
  for (const Gpu& g : node.gpus)
    gpus.push_back(toJson(g));
  json j{{"name", node.name},
         {"labels", node.labels},
         {"state", nodeStateName(node.state)},
         {"state_reason", node.state_reason},
         {"gpus", std::move(gpus)}};
  putQuantity(j, "cpus", Quantity::kCpuMillis, node.cpus_milli);
  putQuantity(j, "ram", Quantity::kMemoryMiB, node.ram_mib);
  if (node.last_seen) j["last_seen_us"] = toUnixMicros(*node.last_seen);
  if (!node.health_reason.empty()) j["health_reason"] = node.health_reason;
  if (node.slices) j["slices"] = toJson(*node.slices);
  return j;
}

Status fromJson(const json& j, Node* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("name", &out->name, Presence::kRequired);
  r.stringMap("labels", &out->labels);
  r.quantity("cpus", Quantity::kCpuMillis, &out->cpus_milli, Presence::kRequired);
  r.quantity("ram", Quantity::kMemoryMiB, &out->ram_mib, Presence::kRequired);
  r.parsed("state", &out->state, &parseNodeState);
  r.string("state_reason", &out->state_reason);
  r.string("health_reason", &out->health_reason);
  r.objectList("gpus", &out->gpus, Presence::kOptional, 1024);
  r.optionalTime("last_seen_us", &out->last_seen);
  if (r.has("slices")) {
    out->slices.emplace();
    r.object("slices", &*out->slices);
  }
  if (r.ok()) {
    checkStatus(r, "name", validateNodeName(out->name));
    for (const auto& [key, value] : out->labels) {
      checkStatus(r, "labels", validateLabelKey(key));
      r.check(value.size() <= 256, "labels." + key, "is longer than 256 characters");
    }
  }
  GPOOL_RETURN_IF_ERROR(r.finish());
  return validateNodeGpus(*out, path);
}

Status validateNodeGpus(const Node& node, std::string_view path) {
  auto bad = [&](const std::string& field, const std::string& why) {
    return Status::invalidArgument((path.empty() ? "" : std::string(path) + ".") + field + ": " +
                                   why);
  };
  std::set<std::string_view> uuids;
  std::set<uint32_t> indexes;
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    const Gpu& g = node.gpus[i];
    std::string at = "gpus[" + std::to_string(i) + "]";
    if (!uuids.insert(g.uuid).second) {
      return bad(at + ".uuid", "GPU '" + g.uuid + "' is listed twice");
    }
    if (!indexes.insert(g.index).second) {
      return bad(at + ".index", "index " + std::to_string(g.index) + " is used twice");
    }
  }
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    for (size_t k = 0; k < node.gpus[i].links.size(); ++k) {
      const std::string& peer = node.gpus[i].links[k].peer_uuid;
      if (uuids.count(peer) == 0) {
        return bad("gpus[" + std::to_string(i) + "].links[" + std::to_string(k) + "].peer_uuid",
                   "peer '" + peer + "' is not a GPU of this node");
      }
    }
  }
  return Status::ok();
}

}  // namespace gpool::api
