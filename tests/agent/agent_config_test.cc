// gpool-agent.toml's reader (agent/agent_config.h): defaults, every key read, every problem
// reported at once as "<file>:<line>: key '<key>': <why>", and the shipped example valid.
#include "agent/agent_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "agent_test_util.h"

namespace gpool::agent {
namespace {

std::string write(const testing::TempDir& dir, const std::string& name, const std::string& text) {
  std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

TEST(AgentConfigTest, AnEmptyFileGivesTheDefaults) {
  testing::TempDir dir;
  Result<AgentSettings> s = readAgentSettings(write(dir, "empty.toml", ""));
  ASSERT_TRUE(s.ok()) << s.status().toString();
  EXPECT_EQ(s->node, "");
  EXPECT_EQ(s->state_dir, "/var/lib/gpool/agent");
  EXPECT_EQ(s->token_file, "/var/lib/gpool/agent/credential");
  EXPECT_EQ(s->vgpu_dir, "/run/gpool/vgpu");
  EXPECT_EQ(s->cgroup_parent, "gpool");
  EXPECT_TRUE(s->cgroups);
  EXPECT_EQ(s->cpu_millis, 0u);
  EXPECT_EQ(s->ram_mib, 0u);
  EXPECT_TRUE(s->labels.empty());
}

TEST(AgentConfigTest, ReadsEveryKey) {
  testing::TempDir dir;
  std::string ca = write(dir, "ca.pem", "pem");
  std::string fixture = write(dir, "fixture.json", "{}");
  std::string path = write(dir, "agent.toml",
                           "[agent]\n"
                           "node = \"gpu-07\"\n"
                           "controller = \"ctl01:6443\"\n"
                           "ca = \"" +
                               ca +
                               "\"\n"
                               "token_file = \"/etc/gpool/credential\"\n"
                               "state_dir = \"/srv/agent\"\n"
                               "vgpu_dir = \"/run/vgpu\"\n"
                               "fake_fixture = \"" +
                               fixture +
                               "\"\n"
                               "cgroup_parent = \"jobs\"\n"
                               "cgroups = false\n"
                               "cpus = \"59.5\"\n"
                               "ram = \"480G\"\n"
                               "[agent.labels]\n"
                               "rack = \"r12\"\n");
  Result<AgentSettings> s = readAgentSettings(path);
  ASSERT_TRUE(s.ok()) << s.status().toString();
  EXPECT_EQ(s->node, "gpu-07");
  EXPECT_EQ(s->controller, "ctl01:6443");
  EXPECT_EQ(s->ca, ca);
  EXPECT_EQ(s->token_file, "/etc/gpool/credential");
  EXPECT_EQ(s->state_dir, "/srv/agent");
  EXPECT_EQ(s->vgpu_dir, "/run/vgpu");
  EXPECT_EQ(s->fake_fixture, fixture);
  EXPECT_EQ(s->cgroup_parent, "jobs");
  EXPECT_FALSE(s->cgroups);
  EXPECT_EQ(s->cpu_millis, 59'500u);
  EXPECT_EQ(s->ram_mib, 480u * 1024);
  EXPECT_EQ(s->labels, (std::map<std::string, std::string>{{"rack", "r12"}}));
}

TEST(AgentConfigTest, EveryProblemIsReportedWithItsLineAndKey) {
  testing::TempDir dir;
  std::string path = write(dir, "bad.toml",
                           "[agent]\n"
                           "nod = \"x\"\n"
                           "controller = \"ctl01\"\n"
                           "unix_socket = \"/run/gpool/gpoold.sock\"\n"
                           "cpus = \"lots\"\n"
                           "state_dir = \"relative\"\n"
                           "fake_fixture = \"" +
                               dir.file("none.json") +
                               "\"\n"
                               "cgroups = \"yes\"\n");
  Result<AgentSettings> s = readAgentSettings(path);
  ASSERT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = s.status().message();
  for (const std::string& expected :
       {path + ":2: unknown key 'agent.nod' (did you mean 'node'?)",
        path + ":3: key 'agent.controller': 'ctl01' is not host:port",
        path + ":4: key 'agent.unix_socket': give agent.controller (TLS) or agent.unix_socket, "
               "not both",
        path + ":5: key 'agent.cpus': ",
        path + ":6: key 'agent.state_dir': must be an absolute path",
        path + ":7: key 'agent.fake_fixture': cannot read", path + ":8: key 'agent.cgroups': "}) {
    EXPECT_NE(m.find(expected), std::string::npos) << expected << "\nin:\n" << m;
  }
  EXPECT_EQ(readAgentSettings(dir.file("missing.toml")).status().code(), StatusCode::kIoError);
}

// Several controllers (docs/ha.md): a comma-separated list, each host:port.
TEST(AgentConfigTest, ControllerTakesAListOfHostPorts) {
  testing::TempDir dir;
  std::string good =
      write(dir, "good.toml", "[agent]\nnode = \"n1\"\ncontroller = \"ctl-a:6443,ctl-b:6443\"\n");
  Result<AgentSettings> s = readAgentSettings(good);
  ASSERT_TRUE(s.ok()) << s.status().toString();
  EXPECT_EQ(s->controller, "ctl-a:6443,ctl-b:6443");
  std::string bad =
      write(dir, "bad.toml", "[agent]\nnode = \"n1\"\ncontroller = \"ctl-a:6443,ctl-b\"\n");
  Result<AgentSettings> refused = readAgentSettings(bad);
  ASSERT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find(bad + ":3: key 'agent.controller': 'ctl-b' is not "
                                                  "host:port"),
            std::string::npos)
      << refused.status().message();
}

TEST(AgentConfigTest, ImageDirIsReadAndMustBeAbsolute) {
  testing::TempDir dir;
  Result<AgentSettings> s =
      readAgentSettings(write(dir, "good.toml", "[agent]\nimage_dir = \"/srv/gpool/images\"\n"));
  ASSERT_TRUE(s.ok()) << s.status().toString();
  EXPECT_EQ(s->image_dir, "/srv/gpool/images");
  const std::string bad = write(dir, "bad.toml", "[agent]\nimage_dir = \"images\"\n");
  Result<AgentSettings> refused = readAgentSettings(bad);
  ASSERT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find(bad + ":2: key 'agent.image_dir': must be an "
                                                  "absolute path"),
            std::string::npos)
      << refused.status().message();
}

TEST(AgentConfigTest, TheShippedExampleIsValid) {
  Result<AgentSettings> s =
      readAgentSettings(std::string(GPOOL_SOURCE_DIR) + "/deploy/config/gpool-agent.toml");
  ASSERT_TRUE(s.ok()) << s.status().toString();
  EXPECT_EQ(s->unix_socket, "/run/gpool/gpoold.sock");
}

}  // namespace
}  // namespace gpool::agent
