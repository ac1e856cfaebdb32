// `gpool up --set KEY=VALUE`: parsing the argument into a TOML key and value, assembling the
// files, and naming the --set in the daemons' readers' errors (the readers themselves are
// tested in tests/config and through `gpool up` in up_test.cc).
#include "cli/up_config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpool::cli {
namespace {

TEST(UpConfigTest, ValuesBecomeTomlOfTheirKind) {
  struct Case {
    std::string arg;
    std::vector<std::string> path;
    std::string toml;
  };
  const std::vector<Case> cases = {
      {"controller.lease_duration=10s", {"controller", "lease_duration"}, "\"10s\""},
      {"controller.api_threads=8", {"controller", "api_threads"}, "8"},
      {"controller.schedule_min_gap_ms=-1", {"controller", "schedule_min_gap_ms"}, "-1"},
      {"agent.cpus=0.5", {"agent", "cpus"}, "0.5"},
      {"agent.cgroups=false", {"agent", "cgroups"}, "false"},
      {"agent.labels.rack=r1", {"agent", "labels", "rack"}, "\"r1\""},
      {"log.level=debug", {"log", "level"}, "\"debug\""},
      // Leading zeros are not TOML integers: kept as the text the user typed.
      {"agent.labels.slot=08", {"agent", "labels", "slot"}, "\"08\""},
      // Quoted, array and table values are passed through for the reader to check.
      {"agent.node_x=\"123\"", {"agent", "node_x"}, "\"123\""},
      {"controller.admins=[\"a\", \"b\"]", {"controller", "admins"}, "[\"a\", \"b\"]"},
      // Quotes, backslashes and control characters in plain text are escaped.
      {"log.file=a\"b\\c\td", {"log", "file"}, "\"a\\\"b\\\\c\\u0009d\""},
      {"log.file=", {"log", "file"}, "\"\""},
      // Only the first '=' separates key and value.
      {"agent.labels.eq=a=b", {"agent", "labels", "eq"}, "\"a=b\""},
  };
  for (const Case& c : cases) {
    Result<ConfigOverride> o = parseConfigOverride(c.arg);
    ASSERT_TRUE(o.ok()) << c.arg << ": " << o.status().toString();
    EXPECT_EQ(o->path, c.path) << c.arg;
    EXPECT_EQ(o->toml_value, c.toml) << c.arg;
    EXPECT_EQ(o->arg, c.arg);
  }
  EXPECT_TRUE(parseConfigOverride("agent.cpus=8")->forAgent());
  EXPECT_FALSE(parseConfigOverride("controller.lease_duration=1s")->forAgent());
  EXPECT_EQ(parseConfigOverride("agent.labels.rack=r1")->key(), "agent.labels.rack");
}

TEST(UpConfigTest, MalformedAndReservedKeysAreRefusedByName) {
  struct Case {
    std::string arg;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"controller.lease_duration", "expected KEY=VALUE"},
      {"lease_duration=10s", "names no section"},
      {"=10s", "no key before"},
      {"controller..lease=1", "is not SECTION.NAME"},
      {"controller.lease duration=1", "is not SECTION.NAME"},
      {"controller.=1", "is not SECTION.NAME"},
      {"controller.socket=/tmp/x.sock", "gpool up sets controller.socket itself"},
      {"agent.node=n9", "gpool up sets agent.node itself"},
      {"agent.state_dir=/tmp/s", "gpool up sets agent.state_dir itself"},
      {"agent.unix_socket=/tmp/s", "gpool up sets agent.unix_socket itself"},
  };
  for (const Case& c : cases) {
    Result<ConfigOverride> o = parseConfigOverride(c.arg);
    ASSERT_FALSE(o.ok()) << c.arg;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << c.arg;
    EXPECT_EQ(o.status().message().rfind("--set " + c.arg + ": ", 0), 0u) << o.status().message();
    EXPECT_NE(o.status().message().find(c.says), std::string::npos)
        << c.arg << ": " << o.status().message();
  }
}

TEST(UpConfigTest, DraftWritesTablesInOrderAndALaterValueReplaces) {
  TomlDraft d;
  d.set({"controller", "store"}, "\"/p/gpool.db\"");
  d.set({"controller", "schedule_interval"}, "\"2s\"");
  d.set({"log", "level"}, "\"debug\"", "log.level=debug");
  d.set({"controller", "schedule_interval"}, "\"1s\"", "controller.schedule_interval=1s");
  d.set({"agent", "labels", "rack"}, "\"r1\"", "agent.labels.rack=r1");
  EXPECT_EQ(d.text("first\nsecond"),
            "# first\n# second\n"
            "[controller]\nstore = \"/p/gpool.db\"\nschedule_interval = \"1s\"\n"
            "[log]\nlevel = \"debug\"\n"
            "[agent.labels]\nrack = \"r1\"\n");
}

TEST(UpConfigTest, ReaderErrorsNameTheSetThatCausedThem) {
  TomlDraft d;
  const std::string comment = "c";                    // line 1; [controller] is line 2
  d.set({"controller", "store"}, "\"/p/gpool.db\"");  // line 3
  d.set({"controller", "lease_duratoin"}, "\"10s\"", "controller.lease_duratoin=10s");  // 4
  d.set({"bogus", "x"}, "1", "bogus.x=1");  // [bogus] on line 5, x on line 6
  ASSERT_EQ(
      d.text(comment),
      "# c\n[controller]\nstore = \"/p/gpool.db\"\nlease_duratoin = \"10s\"\n[bogus]\nx = 1\n");
  const std::string message =
      "/d/gpoold.toml.new:4: unknown key 'controller.lease_duratoin' (did you mean "
      "'lease_duration'?)\n"
      "/d/gpoold.toml.new:5: unknown key 'bogus'\n"
      "/d/gpoold.toml.new:3: key 'controller.store': cannot open\n"
      "/d/gpoold.toml.new:6:5: expected a value\n"
      "/d/gpoold.toml.new: key 'store.path': required key is missing";
  EXPECT_EQ(d.explain(message, "/d/gpoold.toml.new", comment),
            "--set controller.lease_duratoin=10s: unknown key 'controller.lease_duratoin' (did "
            "you mean 'lease_duration'?)\n"
            // a whole unknown section is reported on its header: its first --set
            "--set bogus.x=1: unknown key 'bogus'\n"
            // gpool up's own key keeps its file and line
            "/d/gpoold.toml.new:3: key 'controller.store': cannot open\n"
            // a syntax error's line and column
            "--set bogus.x=1: expected a value\n"
            "/d/gpoold.toml.new: key 'store.path': required key is missing");
}

}  // namespace
}  // namespace gpool::cli
