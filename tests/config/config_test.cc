#include "config/config.h"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace gpool::config {
namespace {

// A temporary directory removed at the end of the test.
class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpool-config-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string& f : files_)
      std::remove(f.c_str());
    ::rmdir(dir_.c_str());
  }
  std::string write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    files_.push_back(path);
    return path;
  }

  std::string dir_;
  std::vector<std::string> files_;
};

::testing::AssertionResult hasError(const Status& s, const std::string& needle) {
  if (s.isOk()) return ::testing::AssertionFailure() << "no error, expected '" << needle << "'";
  if (s.code() != StatusCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << "wrong code: " << s.toString();
  }
  if (s.message().find(needle) == std::string::npos) {
    return ::testing::AssertionFailure() << "'" << s.message() << "' lacks '" << needle << "'";
  }
  return ::testing::AssertionSuccess();
}

const char* kGood = R"(# gpoold configuration
name = "lab"

[controller]
listen_port = 6817
heartbeat_interval = "5s"
node_timeout = "2m"
tls = true
admins = ["alice", "bob"]
ratio = 0.75

[agent]
gpu_memory_reserve = "512M"
default_compute = "25%"
cpus = 0.5

[agent.labels]
rack = "r1"
fabric = "ib"

[[node]]
name = "gpu-01"

[[node]]
name = "gpu-02"
)";

TEST_F(ConfigFileTest, ReadsEveryKindOfValue) {
  Result<ConfigFile> file = ConfigFile::load(write("gpoold.toml", kGood));
  ASSERT_TRUE(file.ok()) << file.status().toString();
  ConfigSection root = file->root();
  EXPECT_EQ(root.requireString("name"), "lab");
  ConfigSection ctl = root.section("controller");
  EXPECT_TRUE(ctl.exists());
  EXPECT_EQ(ctl.path(), "controller");
  EXPECT_EQ(ctl.getInt("listen_port", 1, 1, 65535), 6817);
  EXPECT_EQ(ctl.getDuration("heartbeat_interval", 1), 5);
  EXPECT_EQ(ctl.getDuration("node_timeout", 1), 120);
  EXPECT_TRUE(ctl.getBool("tls", false));
  EXPECT_EQ(ctl.getStringList("admins"), (std::vector<std::string>{"alice", "bob"}));
  EXPECT_DOUBLE_EQ(ctl.getDouble("ratio", 0, 0, 1), 0.75);
  ConfigSection agent = root.section("agent");
  EXPECT_EQ(agent.getMemoryMiB("gpu_memory_reserve", 0), 512u);
  EXPECT_EQ(agent.getComputeShare("default_compute", 1000), 250u);
  EXPECT_EQ(agent.getCpuMillis("cpus", 1000), 500u);
  auto labels = agent.getStringMap("labels");
  EXPECT_EQ(labels.at("rack"), "r1");
  EXPECT_EQ(labels.at("fabric"), "ib");
  std::vector<ConfigSection> nodes = root.sectionArray("node");
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[1].path(), "node[1]");
  EXPECT_EQ(nodes[0].requireString("name"), "gpu-01");
  EXPECT_EQ(nodes[1].requireString("name"), "gpu-02");
  EXPECT_TRUE(file->finish().isOk()) << file->finish().toString();
}

TEST_F(ConfigFileTest, MissingKeysAndSectionsGiveDefaults) {
  Result<ConfigFile> file = ConfigFile::parse("", "empty.toml");
  ASSERT_TRUE(file.ok());
  ConfigSection ctl = file->root().section("controller");
  EXPECT_FALSE(ctl.exists());
  EXPECT_EQ(ctl.getInt("listen_port", 6817, 1, 65535), 6817);
  EXPECT_EQ(ctl.getString("bind", "0.0.0.0"), "0.0.0.0");
  EXPECT_EQ(ctl.getDuration("timeout", 30), 30);
  EXPECT_EQ(ctl.getMemoryMiB("reserve", 64), 64u);
  EXPECT_TRUE(ctl.getStringList("x").empty());
  EXPECT_TRUE(file->root().sectionArray("node").empty());
  EXPECT_TRUE(file->finish().isOk());
}

TEST_F(ConfigFileTest, NamesFileLineAndKeyOfWrongTypes) {
  Result<ConfigFile> file = ConfigFile::parse(R"([controller]
name = "x"
listen_port = "6817"
tls = "yes"
heartbeat_interval = 5
reserve = 512
admins = ["a", 3]
)",
                                              "gpoold.toml");
  ASSERT_TRUE(file.ok());
  ConfigSection ctl = file->root().section("controller");
  ctl.getString("name");
  EXPECT_EQ(ctl.getInt("listen_port", 6817, 1, 65535), 6817);  // the default on error
  EXPECT_FALSE(ctl.getBool("tls", false));
  ctl.getDuration("heartbeat_interval", 5);
  ctl.getMemoryMiB("reserve", 0);
  ctl.getStringList("admins");
  Status s = file->finish();
  EXPECT_TRUE(hasError(s,
                       "gpoold.toml:3: key 'controller.listen_port': expected an integer, got "
                       "a string"));
  EXPECT_TRUE(hasError(s, "gpoold.toml:4: key 'controller.tls': expected a boolean"));
  EXPECT_TRUE(hasError(s,
                       "gpoold.toml:5: key 'controller.heartbeat_interval': expected a "
                       "duration string"));
  EXPECT_TRUE(hasError(s, "gpoold.toml:6: key 'controller.reserve': expected a memory size"));
  EXPECT_TRUE(hasError(s,
                       "gpoold.toml:7: key 'controller.admins[1]': expected a string, got an "
                       "integer"));
  EXPECT_EQ(file->errors().size(), 5u);
  // One problem per line, in file order.
  EXPECT_LT(s.message().find(":3:"), s.message().find(":7:"));
}

TEST_F(ConfigFileTest, RejectsOutOfRangeAndBadUnits) {
  Result<ConfigFile> file = ConfigFile::parse(R"(port = 70000
negative = -1
huge = 99999999999999999
timeout = "90x"
memory = "24X"
share = 1.5
cpus = 0
ratio = 2.0
)",
                                              "a.toml");
  ASSERT_TRUE(file.ok());
  ConfigSection r = file->root();
  r.getInt("port", 1, 1, 65535);
  r.getInt("negative", 0, 0, 10);
  r.getInt("huge", 0, 0, 1000);
  r.getDuration("timeout", 0);
  r.getMemoryMiB("memory", 0);
  r.getComputeShare("share", 1000);
  r.getCpuMillis("cpus", 1000);
  r.getDouble("ratio", 0, 0, 1);
  Status s = file->finish();
  EXPECT_TRUE(hasError(s, "a.toml:1: key 'port': value 70000 is out of range [1, 65535]"));
  EXPECT_TRUE(hasError(s, "a.toml:2: key 'negative': value -1 is out of range [0, 10]"));
  EXPECT_TRUE(hasError(s, "a.toml:3: key 'huge': value 99999999999999999 is out of range"));
  EXPECT_TRUE(hasError(s, "a.toml:4: key 'timeout': duration '90x' has unknown unit 'x'"));
  EXPECT_TRUE(hasError(s, "a.toml:5: key 'memory': memory size '24X' has unknown unit 'X'"));
  EXPECT_TRUE(hasError(s, "a.toml:6: key 'share': compute share '1.5' is out of range"));
  EXPECT_TRUE(hasError(s, "a.toml:7: key 'cpus': CPU count '0' is zero"));
  EXPECT_TRUE(hasError(s, "a.toml:8: key 'ratio': value 2 is out of range [0, 1]"));
}

TEST_F(ConfigFileTest, ReportsEveryUnknownKeyWithItsLine) {
  Result<ConfigFile> file = ConfigFile::parse(R"(name = "x"
colour = "red"

[controller]
listen_prot = 1
listen_port = 2

[typo_section]
a = 1

[[node]]
name = "n"
gpus = 8
)",
                                              "gpoold.toml");
  ASSERT_TRUE(file.ok());
  ConfigSection root = file->root();
  root.getString("name");
  root.section("controller").getInt("listen_port", 0);
  for (ConfigSection n : root.sectionArray("node"))
    n.getString("name");
  Status s = file->finish();
  EXPECT_TRUE(hasError(s, "gpoold.toml:2: unknown key 'colour'"));
  EXPECT_TRUE(hasError(s,
                       "gpoold.toml:5: unknown key 'controller.listen_prot' (did you mean "
                       "'listen_port'?)"));
  EXPECT_TRUE(hasError(s, "gpoold.toml:8: unknown key 'typo_section'"));
  EXPECT_TRUE(hasError(s, "gpoold.toml:13: unknown key 'node[0].gpus'"));
  // The keys of an unknown section are not listed one by one.
  EXPECT_EQ(s.message().find("typo_section.a"), std::string::npos);
}

TEST_F(ConfigFileTest, RequiredKeysAndCustomChecks) {
  Result<ConfigFile> file = ConfigFile::parse("[store]\nkind = \"oracle\"\n", "c.toml");
  ASSERT_TRUE(file.ok());
  ConfigSection store = file->root().section("store");
  std::string kind = store.requireString("kind");
  if (kind != "sqlite" && kind != "postgres") store.fail("kind", "expected sqlite or postgres");
  store.requireString("path");
  file->root().section("controller").requireInt("port", 1, 65535);
  Status s = file->finish();
  EXPECT_TRUE(hasError(s, "c.toml:2: key 'store.kind': expected sqlite or postgres"));
  EXPECT_TRUE(hasError(s, "c.toml:1: key 'store.path': required key is missing"));
  EXPECT_TRUE(hasError(s, "c.toml: key 'controller.port': required key is missing"));
}

TEST_F(ConfigFileTest, WrongSectionShapes) {
  Result<ConfigFile> file = ConfigFile::parse(R"(controller = 5
node = "x"
labels = ["a"]
)",
                                              "s.toml");
  ASSERT_TRUE(file.ok());
  ConfigSection root = file->root();
  EXPECT_FALSE(root.section("controller").exists());
  EXPECT_TRUE(root.sectionArray("node").empty());
  EXPECT_TRUE(root.getStringMap("labels").empty());
  Status s = file->finish();
  EXPECT_TRUE(hasError(s,
                       "s.toml:1: key 'controller': expected a table ([controller]), got an "
                       "integer"));
  EXPECT_TRUE(hasError(s, "s.toml:2: key 'node': expected an array of tables ([[node]])"));
  EXPECT_TRUE(hasError(s, "s.toml:3: key 'labels': expected a table of strings"));
}

TEST_F(ConfigFileTest, SyntaxErrorsNameLineAndColumn) {
  Result<ConfigFile> file = ConfigFile::load(write("bad.toml", "a = 1\nb = \"unterminated\n"));
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(file.status().message().find("bad.toml:2:"), std::string::npos)
      << file.status().message();
  file = ConfigFile::parse("a = 1\na = 2\n", "dup.toml");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("dup.toml:2:"), std::string::npos)
      << file.status().message();
}

// Messages quote what the file holds; control characters in it are escaped so that every
// problem stays one line that a terminal prints as it is (tests/fuzz config found toml++'s
// "expected 'true', saw 'tru<newline>'" spanning two lines).
TEST_F(ConfigFileTest, MessagesStayOneLineWhateverTheFileHolds) {
  Result<ConfigFile> bad = ConfigFile::parse("a = tru\n", "bool.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find('\n'), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("bool.toml:1:"), std::string::npos)
      << bad.status().message();

  Result<ConfigFile> file =
      ConfigFile::parse("\"we\\nird\\u001b[2J\" = 1\n[s]\nx = \"a\\tb\"\n", "keys.toml");
  ASSERT_TRUE(file.ok()) << file.status().toString();
  file->root().section("s").fail("x",
                                 "bad value '" + file->root().section("s").getString("x") + "'");
  Status s = file->finish();
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(),
            "keys.toml:1: unknown key 'we\\nird\\x1b[2J'\n"
            "keys.toml:3: key 's.x': bad value 'a\\tb'");
}

TEST_F(ConfigFileTest, MissingFile) {
  Result<ConfigFile> file = ConfigFile::load(dir_ + "/absent.toml");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kIoError);
  EXPECT_NE(file.status().message().find("absent.toml"), std::string::npos);
  file = ConfigFile::load(dir_ + "/absent.toml", MissingFile::kUseDefaults);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->root().getInt("x", 7), 7);
  EXPECT_TRUE(file->finish().isOk());
}

TEST_F(ConfigFileTest, ReadingASectionTwiceSharesItsKeys) {
  Result<ConfigFile> file = ConfigFile::parse("[a]\nx = 1\ny = 2\n", "t.toml");
  ASSERT_TRUE(file.ok());
  file->root().section("a").getInt("x", 0);
  file->root().section("a").getInt("y", 0);
  EXPECT_TRUE(file->finish().isOk());
}

}  // namespace
}  // namespace gpool::config
