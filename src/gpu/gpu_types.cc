#include "gpu/gpu_types.h"

#include <charconv>
#include <string>

namespace gpool::gpu {

std::string topologyLevelName(TopologyLevel level, uint32_t nvlink_count) {
  switch (level) {
    case TopologyLevel::kSelf: return "X";
    case TopologyLevel::kNvLink: return "NV" + std::to_string(nvlink_count);
    case TopologyLevel::kPix: return "PIX";
    case TopologyLevel::kPxb: return "PXB";
    case TopologyLevel::kPhb: return "PHB";
    case TopologyLevel::kNode: return "NODE";
    case TopologyLevel::kSys: return "SYS";
  }
  return "SYS";
}

Result<TopologyLevel> parseTopologyLevel(std::string_view text, uint32_t* nvlink_count) {
  *nvlink_count = 0;
  if (text == "X") return TopologyLevel::kSelf;
  if (text == "PIX") return TopologyLevel::kPix;
  if (text == "PXB") return TopologyLevel::kPxb;
  if (text == "PHB") return TopologyLevel::kPhb;
  if (text == "NODE") return TopologyLevel::kNode;
  if (text == "SYS") return TopologyLevel::kSys;
  if (text.size() > 2 && text.substr(0, 2) == "NV") {
    uint32_t count = 0;
    auto digits = text.substr(2);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
    if (ec == std::errc() && end == digits.data() + digits.size() && count > 0 && count <= 64) {
      *nvlink_count = count;
      return TopologyLevel::kNvLink;
    }
  }
  return Status::invalidArgument("unknown topology level '" + std::string(text) +
                                 "': expected NV<links> (e.g. NV12), PIX, PXB, PHB, NODE or SYS");
}

const GpuLink* Inventory::linkBetween(uint32_t a, uint32_t b) const {
  if (a > b) std::swap(a, b);
  for (const GpuLink& link : links) {
    if (link.gpu_a == a && link.gpu_b == b) return &link;
  }
  return nullptr;
}

const GpuInfo* Inventory::findGpu(std::string_view uuid) const {
  for (const GpuInfo& gpu : gpus) {
    if (gpu.uuid == uuid) return &gpu;
  }
  return nullptr;
}

const GpuTelemetry* TelemetrySample::findGpu(std::string_view uuid) const {
  for (const GpuTelemetry& gpu : gpus) {
    if (gpu.uuid == uuid) return &gpu;
  }
  return nullptr;
}

}  // namespace gpool::gpu
