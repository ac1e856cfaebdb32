#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

// Helpers shared by the fuzz targets (tests/fuzz, docs/fuzzing.md).
namespace gpool::fuzz {

// A directory of this process for the files a target writes (preferably on tmpfs, so that the
// many small writes cost no disk I/O), removed when the process exits normally.
inline const std::string& scratchDir() {
  static const std::string dir = [] {
    std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "";
    if (base.empty()) base = std::filesystem::temp_directory_path().string();
    std::string tmpl = base + "/gpool-fuzz-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    static std::string removed_at_exit = tmpl;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(removed_at_exit, ec);
    });
    return tmpl;
  }();
  return dir;
}

// Replaces `path` with exactly `bytes`; aborts when it cannot (the target would test nothing).
inline void writeFile(const std::string& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() ||
      std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
}

// Reports a broken property of the code under test and aborts, which libFuzzer records as a
// crash with the input that caused it.
[[noreturn]] inline void fail(std::string_view what) {
  std::fprintf(stderr, "fuzz property broken: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

}  // namespace gpool::fuzz
