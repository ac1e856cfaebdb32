#include "common/container_spec.h"

namespace gpool {
namespace {

// Why `path` cannot be one side of a mount, or "" when it can.
std::string badPath(std::string_view path) {
  if (path.empty()) return "is empty";
  if (path.front() != '/') return "is not an absolute path";
  if (path.find('\0') != std::string_view::npos) return "contains a NUL character";
  // ".." would let a path name something other than it seems after normalisation.
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    if (path.substr(pos, end - pos) == "..") return "contains '..'";
    pos = end + 1;
  }
  return "";
}

}  // namespace

Result<BindMount> parseBindMount(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Status::invalidArgument("mount '" + std::string(text) + "': " + why +
                                   " (expected SRC:DST or SRC:DST:ro, absolute paths)");
  };
  size_t first = text.find(':');
  if (first == std::string_view::npos) return bad("has no ':' between source and target");
  BindMount m;
  m.source = std::string(text.substr(0, first));
  std::string_view rest = text.substr(first + 1);
  size_t second = rest.find(':');
  m.target = std::string(rest.substr(0, second));
  if (second != std::string_view::npos) {
    std::string_view mode = rest.substr(second + 1);
    if (mode == "ro") {
      m.read_only = true;
    } else if (mode != "rw") {
      return bad("mode '" + std::string(mode) + "' is not ro or rw");
    }
  }
  if (std::string why = badPath(m.source); !why.empty()) return bad("source " + why);
  if (std::string why = badPath(m.target); !why.empty()) return bad("target " + why);
  if (m.target == "/") return bad("target may not be the container's root");
  return m;
}

std::string formatBindMount(const BindMount& m) {
  return m.source + ":" + m.target + (m.read_only ? ":ro" : "");
}

Status checkImageName(std::string_view image) {
  auto bad = [&](const std::string& why) {
    return Status::invalidArgument("image '" + std::string(image) + "' " + why);
  };
  if (image.empty()) return bad("is empty");
  if (image.size() > 512) return bad("is longer than 512 characters");
  if (image.front() == '-') return bad("may not start with '-'");
  for (char c : image) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '/' || c == ':' || c == '@' || c == '-';
    if (!ok) return bad("has a character outside [A-Za-z0-9._/:@-]");
  }
  if (image.front() == '/' && !badPath(image).empty()) return bad(badPath(image));
  return Status::ok();
}

}  // namespace gpool
