#include "gpu/backend_factory.h"

#include <memory>

#include "gpu/fake_backend.h"
#include "gpu/nvml_backend.h"

namespace gpool::gpu {

Result<GpuBackendPtr> makeGpuBackend(const GpuBackendOptions& options, const Clock& clock) {
  if (!options.fake_fixture.empty()) {
    GPOOL_ASSIGN_OR_RETURN(std::unique_ptr<FakeBackend> fake,
                           FakeBackend::fromFile(options.fake_fixture, clock, options.node_name));
    return GpuBackendPtr(std::move(fake));
  }
  // The default library is process-wide (NVML is initialised once per process); another path
  // gets its own library, owned by the backend.
  Result<std::unique_ptr<NvmlBackend>> nvml =
      options.nvml_library == NvmlLibrary::kDefaultPath
          ? NvmlBackend::create(defaultNvmlLibrary(), clock)
          : NvmlBackend::create(std::make_unique<NvmlLibrary>(options.nvml_library), clock);
  if (!nvml.ok()) return nvml.status();
  return GpuBackendPtr(std::move(nvml).value());
}

}  // namespace gpool::gpu
