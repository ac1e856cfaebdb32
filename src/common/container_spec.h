#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

// What a containerised task names (docs/containers.md): its image and bind mounts,
// "SRC:DST[:ro]" on the command line (`gpool submit --mount`), in job specs and in the agent
// protocol. One parser serves the CLI, the API's validation and the agent, so that all three
// accept exactly the same text.
namespace gpool {

struct BindMount {
  std::string source;  // absolute path on the server
  std::string target;  // absolute path inside the container
  bool read_only = false;
  bool operator==(const BindMount&) const = default;
};

// "SRC:DST" or "SRC:DST:ro" (or ":rw"). Both paths absolute, without "..", ':' or NUL.
// InvalidArgument naming the mount and what is wrong with it.
Result<BindMount> parseBindMount(std::string_view text);
std::string formatBindMount(const BindMount& mount);

// An image is a local image's name ("pytorch:24.05", "registry.example/team/img@sha256:...")
// or an absolute root filesystem directory. InvalidArgument naming the image when it is
// neither (empty, leading '-', characters outside [A-Za-z0-9._/:@-], too long).
Status checkImageName(std::string_view image);

}  // namespace gpool
