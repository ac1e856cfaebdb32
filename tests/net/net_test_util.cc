#include "net_test_util.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace gpool::net::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "gpool-net-XXXXXX").string();
  char* made = mkdtemp(tmpl.data());
  path_ = made ? made : "";
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

Status makeTestCerts(const std::string& dir, TestCerts* out,
                     const std::vector<std::string>& extra_ips) {
  std::string names = "DNS:localhost,IP:127.0.0.1";
  for (const std::string& ip : extra_ips)
    names += ",IP:" + ip;
  // EC keys keep generation fast (a few milliseconds each).
  const std::string script_path = dir + "/make-certs.sh";
  {
    std::ofstream script(script_path);
    script << "set -e\n"
              "cd \"$1\"\n"
              "K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'\n"
              "openssl req -x509 $K -keyout ca.key -out ca.pem -days 2 -subj '/CN=gpool test CA'\n"
              "openssl req -x509 $K -keyout other.key -out other.pem -days 2 -subj '/CN=other CA'\n"
              "openssl req $K -keyout server.key -out server.csr -subj '/CN=localhost'\n"
              "printf 'subjectAltName=" +
                  names +
                  "\\nbasicConstraints=CA:FALSE\\n'"
                  " > ext.cnf\n"
                  "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial"
                  " -out server.pem -days 2 -extfile ext.cnf\n";
  }
  std::string cmd = "sh '" + script_path + "' '" + dir + "' >'" + dir + "/openssl.log' 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    return Status::internal("openssl failed making test certificates; see " + dir + "/openssl.log");
  }
  out->ca_file = dir + "/ca.pem";
  out->cert_file = dir + "/server.pem";
  out->key_file = dir + "/server.key";
  out->other_ca_file = dir + "/other.pem";
  return Status::ok();
}

int rawUnixConnect(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string rawUnixExchange(const std::string& path, const std::string& data) {
  int fd = rawUnixConnect(path);
  if (fd < 0) return "";
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace gpool::net::testing
