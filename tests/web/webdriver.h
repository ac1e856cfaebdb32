#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/plain_http.h"

// Drives a headless Chromium through chromedriver's W3C WebDriver HTTP protocol, for the
// dashboard's browser tests. chromedriver listens on a port the OS chooses (--port=0; the test
// reads it from chromedriver's "started successfully on port N" line). Header-only.
namespace gpool::web::testing {

using nlohmann::json;

inline constexpr const char* kElementKey = "element-6066-11e4-a52e-4f735466cecf";

// Polls `check` every 100 ms until it is true or `timeout` passes; true if it became true.
inline bool waitFor(const std::function<bool()>& check,
                    std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (check()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// One chromedriver process and one browser session. Every call returns the WebDriver answer's
// `value`; a WebDriver error (or no answer) is recorded in lastError() and returns null.
class WebDriver {
 public:
  // Starts `chromedriver` (its output in dir/chromedriver.log) and a headless `chromium` session
  // whose profile lives in dir/profile. ok() tells whether both came up.
  WebDriver(const std::string& chromedriver, const std::string& chromium, const std::string& dir) {
    const std::string log = dir + "/chromedriver.log";
    pid_ = ::fork();
    if (pid_ == 0) {
      // Only system calls between fork and exec: the test process has threads.
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) ::_exit(126);
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::execl(chromedriver.c_str(), chromedriver.c_str(), "--port=0", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const std::regex started("started successfully on port ([0-9]+)");
    waitFor([&] {
      std::ifstream in(log);
      std::stringstream text;
      text << in.rdbuf();
      std::smatch m;
      std::string s = text.str();
      if (std::regex_search(s, m, started)) port_ = std::stoi(m[1]);
      return port_ > 0;
    });
    if (port_ <= 0) {
      error_ = "chromedriver did not start (see " + log + ")";
      return;
    }
    json caps = {
        {"capabilities",
         {{"alwaysMatch",
           {{"browserName", "chrome"},
            {"goog:chromeOptions",
             {{"binary", chromium},
              {"args",
               {"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1400,1000",
                "--user-data-dir=" + dir + "/profile"}}}}}}}}};
    json value = call("POST", "/session", caps);
    if (value.is_object() && value.contains("sessionId")) {
      session_ = value["sessionId"].get<std::string>();
    }
  }

  ~WebDriver() {
    if (!session_.empty()) call("DELETE", "/session/" + session_, nullptr);
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  WebDriver(const WebDriver&) = delete;
  WebDriver& operator=(const WebDriver&) = delete;

  bool ok() const { return !session_.empty(); }
  const std::string& lastError() const { return error_; }

  json navigate(const std::string& url) { return session("POST", "/url", {{"url", url}}); }

  // Runs `script` (a function body; `return` gives the result) in the page.
  json execute(const std::string& script, json args = json::array()) {
    return session("POST", "/execute/sync", {{"script", script}, {"args", std::move(args)}});
  }

  // Runs `script` asynchronously: its last argument is a callback whose argument is the result
  // (WebDriver's execute/async; the session's script timeout, 30 s by default, applies).
  json executeAsync(const std::string& script, json args = json::array()) {
    return session("POST", "/execute/async", {{"script", script}, {"args", std::move(args)}});
  }

  // The element id of the first match of a CSS selector; empty if none.
  std::string find(const std::string& css) {
    json v = session("POST", "/element", {{"using", "css selector"}, {"value", css}});
    return v.is_object() && v.contains(kElementKey) ? v[kElementKey].get<std::string>() : "";
  }

  // A real click (scrolled into view, hit-tested), as a user's.
  bool click(const std::string& element) {
    session("POST", "/element/" + element + "/click", json::object());
    return error_.empty();
  }

  // Saves a PNG of the window to `path`; false (lastError() says why) when it could not.
  bool screenshot(const std::string& path) {
    json v = session("GET", "/screenshot", nullptr);
    if (!v.is_string()) return false;
    std::string png = decodeBase64(v.get<std::string>());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(png.data(), static_cast<std::streamsize>(png.size()));
    if (!out) error_ = "cannot write " + path;
    return static_cast<bool>(out);
  }

  // Resizes the window (CSS pixels), e.g. to capture a whole page.
  bool resize(int width, int height) {
    session("POST", "/window/rect", {{"width", width}, {"height", height}});
    return error_.empty();
  }

  bool type(const std::string& element, const std::string& text) {
    session("POST", "/element/" + element + "/value", {{"text", text}});
    return error_.empty();
  }

 private:
  json session(const std::string& method, const std::string& path, const json& body) {
    return call(method, "/session/" + session_ + path, body);
  }

  json call(const std::string& method, const std::string& path, const json& body) {
    error_.clear();
    net::testing::PlainResponse r =
        net::testing::plainHttp(port_, method, path, body.is_null() ? "" : body.dump());
    if (r.status == 0) {
      error_ = r.error;
      return nullptr;
    }
    json answer = json::parse(r.body, nullptr, false);
    if (answer.is_discarded() || !answer.is_object()) {
      error_ = "HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 300);
      return nullptr;
    }
    json value = answer.value("value", json());
    if (r.status != 200 || (value.is_object() && value.contains("error"))) {
      error_ = value.is_object() ? value.value("error", std::string("?")) + ": " +
                                       value.value("message", std::string()).substr(0, 500)
                                 : r.body.substr(0, 300);
      return nullptr;
    }
    return value;
  }

  static std::string decodeBase64(const std::string& in) {
    std::string out;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : in) {
      int v = c >= 'A' && c <= 'Z'   ? c - 'A'
              : c >= 'a' && c <= 'z' ? c - 'a' + 26
              : c >= '0' && c <= '9' ? c - '0' + 52
              : c == '+'             ? 62
              : c == '/'             ? 63
                                     : -1;
      if (v < 0) continue;  // '=' padding and line breaks
      acc = (acc << 6) | static_cast<uint32_t>(v);
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out.push_back(static_cast<char>((acc >> bits) & 0xff));
      }
    }
    return out;
  }

  pid_t pid_ = -1;
  int port_ = -1;
  std::string session_;
  std::string error_;
};

}  // namespace gpool::web::testing
