#include "controller/web_routes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

namespace gpool::controller {
namespace {

namespace fs = std::filesystem;

bool validFileName(std::string_view name) {
  if (name.empty() || name.front() == '.' || name.size() > 128) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

// Reads `root`/`name` if it is a regular file inside root. O_NOFOLLOW refuses a symbolic link
// (it could point anywhere); validFileName already refused '/' and "..".
net::Response serveFile(const std::string& root, std::string_view name) {
  net::Response not_found = net::Response::error(404, "not_found", "no such file");
  if (!validFileName(name)) return not_found;
  std::string path = root + "/" + std::string(name);
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return not_found;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (16 << 20)) {
    ::close(fd);
    return not_found;
  }
  std::string body(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < body.size()) {
    ssize_t n = ::read(fd, body.data() + done, body.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  body.resize(done);
  net::Response r;
  r.status = 200;
  r.body = std::move(body);
  r.setHeader("Content-Type", std::string(webContentType(name)));
  // Small files read at each request: let the browser revalidate rather than keep a stale page
  // after an upgrade.
  r.setHeader("Cache-Control", "no-cache");
  r.setHeader("X-Content-Type-Options", "nosniff");
  if (name == "index.html") {
    // The page loads only its own files and talks only to this server (API and WebSocket).
    r.setHeader("Content-Security-Policy",
                "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; "
                "frame-ancestors 'none'");
    r.setHeader("Referrer-Policy", "no-referrer");
  }
  return r;
}

}  // namespace

std::string_view webContentType(std::string_view file_name) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 9> kTypes{{
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},
  }};
  size_t dot = file_name.rfind('.');
  if (dot != std::string_view::npos) {
    std::string_view ext = file_name.substr(dot);
    for (const auto& [e, type] : kTypes) {
      if (e == ext) return type;
    }
  }
  return "application/octet-stream";
}

Status addWebRoutes(net::Router& router, std::string web_root) {
  auto root = std::make_shared<const std::string>(std::move(web_root));
  net::RouteOptions anonymous;
  anonymous.allow_anonymous = true;
  Status s = router.add(
      net::Method::kGet, "/",
      [root](const net::Request&) { return serveFile(*root, "index.html"); }, anonymous);
  if (!s.isOk()) return s;
  return router.add(
      net::Method::kGet, "/web/{file}",
      [root](const net::Request& req) { return serveFile(*root, req.pathParam("file")); },
      anonymous);
}

std::string findWebRoot() {
  std::vector<fs::path> candidates;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path() / "../share/gpool/web");
  candidates.emplace_back("/usr/share/gpool/web");
  candidates.push_back(fs::path(GPOOL_SOURCE_DIR) / "web");
  for (const fs::path& dir : candidates) {
    if (fs::is_regular_file(dir / "index.html", ec)) {
      fs::path canonical = fs::weakly_canonical(dir, ec);
      return ec ? dir.string() : canonical.string();
    }
  }
  return "";
}

}  // namespace gpool::controller
