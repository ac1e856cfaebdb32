#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/job_spec.h"
#include "api/node.h"
#include "common/clock.h"
#include "store/sqlite_store.h"

// Shared helpers of the controller tests: a temp dir with a SQLite store, nodes and specs.
namespace gpool::controller::testing {

// A fresh directory under $TMPDIR, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::unique_ptr<store::SqliteStore> openStore(const std::string& path);

// A node with `gpus` GPUs of `memory_mib` each, model "A100", 64 CPUs, 512 GiB RAM.
api::Node makeNode(const std::string& name, int gpus, uint64_t memory_mib = 81920);

// A one-task job running `sleep 1` with `gpus_milli` thousandths of a GPU.
api::JobSpec makeSpec(uint32_t gpus_milli, const std::string& name = "job");

// As `gpool group add` and `gpool user add --group` do: creates each group of `groups` that
// does not exist yet, and the record of user `name` (uid `uid`) with those groups, the first
// its default. A job may charge a group only once its user is a member (JobService::submit).
void addUser(store::Store& store, const std::string& name, uint32_t uid,
             const std::vector<std::string>& groups);

}  // namespace gpool::controller::testing
