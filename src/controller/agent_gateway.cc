#include "controller/agent_gateway.h"

#include "store/api_codec.h"

namespace gpool::controller {

void addGroupProject(store::Store& store, const std::string& group, TaskAssignment* t) {
  if (group.empty()) return;
  Result<api::Group> g = store::loadApiGroup(store, group);
  // A group deleted since the submission leaves its jobs without the directory, not failed.
  if (!g.ok() || g->project_dir.empty()) return;
  t->project_dir = g->project_dir;
  t->project_gid = g->gid;
}

}  // namespace gpool::controller
