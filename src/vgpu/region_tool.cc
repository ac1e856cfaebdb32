// gpool-vgpu-region: creates or shows a task's vgpu region by hand (the agent uses ShmRegion
// directly). Used by tests/gpu/check_vgpu.sh and for running the interposer without an agent.
//   gpool-vgpu-region create PATH QUOTA_MIB [SHARE_PERMILLE [wc|strict [CONTEXT_MIB [PERIOD_US]]]]
//   gpool-vgpu-region show PATH

#include <cstdio>
#include <cstdlib>
#include <string>

#include "vgpu/shm_region.h"

int main(int argc, char** argv) {
  using gpool::vgpu::RegionConfig;
  using gpool::vgpu::SharePolicy;
  using gpool::vgpu::ShmRegion;
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "create" && argc >= 4) {
    RegionConfig cfg;
    cfg.quota_bytes = std::strtoull(argv[3], nullptr, 10) << 20;
    if (argc > 4) cfg.share_permille = static_cast<std::uint32_t>(std::atoi(argv[4]));
    if (argc > 5 && std::string(argv[5]) == "strict") cfg.policy = SharePolicy::kStrict;
    if (argc > 6) cfg.context_bytes = std::strtoull(argv[6], nullptr, 10) << 20;
    if (argc > 7) cfg.control_period_us = static_cast<std::uint32_t>(std::atoi(argv[7]));
    auto r = ShmRegion::create(argv[2], cfg);
    if (!r.ok()) {
      std::fprintf(stderr, "gpool-vgpu-region: %s\n", r.status().message().c_str());
      return 1;
    }
    return 0;
  }
  if (cmd == "show" && argc >= 3) {
    auto r = ShmRegion::open(argv[2]);
    if (!r.ok()) {
      std::fprintf(stderr, "gpool-vgpu-region: %s\n", r.status().message().c_str());
      return 1;
    }
    const auto* h = r->header();
    std::printf("quota_bytes %llu\nused_bytes %llu\npeak_bytes %llu\noom_count %llu\n",
                static_cast<unsigned long long>(r->quotaBytes()),
                static_cast<unsigned long long>(r->usedBytes()),
                static_cast<unsigned long long>(h->peak_bytes.load()),
                static_cast<unsigned long long>(h->oom_count.load()));
    std::printf("share_permille %u\nallowed_permille %u\nmeasured_permille %u\n",
                r->limits()->share_permille.load(), h->allowed_permille.load(),
                h->measured_permille.load());
    std::printf("device_permille %u\nlaunches_total %llu\nthrottled_us_total %llu\n",
                h->device_permille.load(),
                static_cast<unsigned long long>(h->launches_total.load()),
                static_cast<unsigned long long>(h->throttled_us_total.load()));
    return 0;
  }
  std::fprintf(stderr,
               "usage: gpool-vgpu-region create PATH QUOTA_MIB [SHARE_PERMILLE [wc|strict "
               "[CONTEXT_MIB [PERIOD_US]]]]\n       gpool-vgpu-region show PATH\n");
  return 2;
}
