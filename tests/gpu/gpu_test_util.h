#pragma once

#include <string>

#include "gpu/fake_fixture.h"

namespace gpool::gpu::testing {

// The path of a fixture shipped in src/gpu/fixtures/.
inline std::string fixturePath(const std::string& name) {
  return std::string(GPOOL_SOURCE_DIR) + "/src/gpu/fixtures/" + name;
}

}  // namespace gpool::gpu::testing
