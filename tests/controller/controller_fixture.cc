#include "controller/controller_fixture.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "store/api_codec.h"

namespace gpool::controller::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "gpool-ctl-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::unique_ptr<store::SqliteStore> openStore(const std::string& path) {
  store::SqliteOptions options;
  options.synchronous = "NORMAL";
  auto opened = store::SqliteStore::open(path, options);
  if (!opened.ok()) throw std::runtime_error(opened.status().toString());
  return std::move(opened).value();
}

api::Node makeNode(const std::string& name, int gpus, uint64_t memory_mib) {
  api::Node node;
  node.name = name;
  node.cpus_milli = 64'000;
  node.ram_mib = 512 * 1024;
  for (int i = 0; i < gpus; ++i) {
    api::Gpu gpu;
    gpu.uuid = "GPU-" + name + "-" + std::to_string(i);
    gpu.index = static_cast<uint32_t>(i);
    gpu.model = "A100";
    gpu.memory_mib = memory_mib;
    gpu.compute_capability = {8, 0};
    gpu.simulated = true;
    node.gpus.push_back(gpu);
  }
  return node;
}

api::JobSpec makeSpec(uint32_t gpus_milli, const std::string& name) {
  api::JobSpec spec;
  spec.name = name;
  spec.command = {"sleep", "1"};
  spec.resources.gpus_milli = gpus_milli;
  return spec;
}

void addUser(store::Store& store, const std::string& name, uint32_t uid,
             const std::vector<std::string>& groups) {
  for (const std::string& g : groups) {
    if (store.getGroup(g).ok()) continue;
    api::Group group;
    group.name = g;
    group.gid = 5000 + static_cast<uint32_t>(store.listGroups().valueOr({}).size());
    Status saved = store::saveApiGroup(store, group);
    if (!saved.isOk()) throw std::runtime_error(saved.toString());
  }
  api::User user;
  user.name = name;
  user.uid = uid;
  user.groups = groups;
  Status saved = store::saveApiUser(store, user);
  if (!saved.isOk()) throw std::runtime_error(saved.toString());
}

}  // namespace gpool::controller::testing
