#include "logging/logging.h"

#include "config/config.h"
#include "logging/log_config.h"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

namespace gpool::logging {
namespace {

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpool-logging-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/test.log";
  }
  void TearDown() override {
    // Point the default logger away from the file before removing it.
    ASSERT_TRUE(initLogging(LogOptions{}).isOk());
    std::remove(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  std::vector<std::string> lines() const {
    std::ifstream in(path_);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);)
      out.push_back(line);
    return out;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(LoggingTest, JsonLinesAreValidJsonWithEscapedMessages) {
  LogOptions options;
  options.level = "debug";
  options.format = LogFormat::kJson;
  options.file = path_;
  options.process_name = "gpoold";
  ASSERT_TRUE(initLogging(options).isOk());
  spdlog::trace("dropped below the level");
  spdlog::debug("node {} joined", "gpu-01");
  spdlog::warn("quote \" backslash \\ newline \n tab \t bell \a bad \xff utf8 ok \xc3\xa9");
  std::vector<std::string> got = lines();
  ASSERT_EQ(got.size(), 2u);
  nlohmann::json first = nlohmann::json::parse(got[0]);
  EXPECT_EQ(first.at("level"), "debug");
  EXPECT_EQ(first.at("process"), "gpoold");
  EXPECT_EQ(first.at("msg"), "node gpu-01 joined");
  EXPECT_EQ(first.at("pid"), static_cast<int>(::getpid()));
  const std::string ts = first.at("ts");
  ASSERT_EQ(ts.size(), 27u) << ts;
  EXPECT_EQ(ts[10], 'T');
  EXPECT_EQ(ts.back(), 'Z');
  nlohmann::json second = nlohmann::json::parse(got[1]);
  EXPECT_EQ(second.at("level"), "warn");
  EXPECT_EQ(second.at("msg"),
            "quote \" backslash \\ newline \n tab \t bell \a bad \xef\xbf\xbd utf8 ok \xc3\xa9");
}

TEST_F(LoggingTest, TextLinesNameTheProcessAndLevel) {
  LogOptions options;
  options.file = path_;
  options.process_name = "gpool-agent";
  ASSERT_TRUE(initLogging(options).isOk());
  spdlog::debug("not shown at info");
  spdlog::info("hello {}", 42);
  spdlog::error("broken");
  std::vector<std::string> got = lines();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(got[0].find(" info gpool-agent[" + std::to_string(::getpid()) + "]: hello 42"),
            std::string::npos)
      << got[0];
  EXPECT_NE(got[1].find(" error gpool-agent["), std::string::npos) << got[1];
  EXPECT_EQ(got[0][10], 'T');
}

TEST_F(LoggingTest, SetLogLevelChangesFilteringAtRunTime) {
  LogOptions options;
  options.file = path_;
  options.level = "error";
  ASSERT_TRUE(initLogging(options).isOk());
  spdlog::info("hidden");
  ASSERT_TRUE(setLogLevel("info").isOk());
  spdlog::info("shown");
  EXPECT_FALSE(setLogLevel("chatty").isOk());
  spdlog::info("still shown");
  std::vector<std::string> got = lines();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(got[0].find("shown"), std::string::npos);
}

TEST_F(LoggingTest, RejectsBadOptionsAndKeepsThePreviousLogger) {
  LogOptions options;
  options.file = path_;
  ASSERT_TRUE(initLogging(options).isOk());
  LogOptions bad = options;
  bad.level = "loud";
  Status s = initLogging(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("unknown log level 'loud'"), std::string::npos);
  bad = options;
  // spdlog creates missing directories, so block the path with a regular file instead.
  bad.file = path_ + "/x.log";
  s = initLogging(bad);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("test.log/x.log"), std::string::npos);
  spdlog::info("still to the old file");
  EXPECT_EQ(lines().size(), 1u);
}

TEST(LogFormatTest, ParsesNamesAndLevels) {
  EXPECT_EQ(*parseLogFormat("json"), LogFormat::kJson);
  EXPECT_EQ(*parseLogFormat("text"), LogFormat::kText);
  EXPECT_FALSE(parseLogFormat("xml").ok());
  for (const char* level :
       {"trace", "debug", "info", "warn", "warning", "error", "critical", "off"}) {
    EXPECT_TRUE(validateLogLevel(level).isOk()) << level;
  }
  EXPECT_FALSE(validateLogLevel("INFO ").isOk());
  EXPECT_FALSE(validateLogLevel("").isOk());
}

TEST(EscapeJsonStringTest, EscapesControlAndInvalidBytes) {
  EXPECT_EQ(escapeJsonString("plain"), "plain");
  EXPECT_EQ(escapeJsonString("a\"b\\c"), "a\\\"b\\\\c");
  EXPECT_EQ(escapeJsonString(std::string("\x01\x7f", 2)), "\\u0001\\u007f");
  EXPECT_EQ(escapeJsonString("\xc0\xaf"), "\\ufffd\\ufffd");             // overlong '/'
  EXPECT_EQ(escapeJsonString("\xed\xa0\x80"), "\\ufffd\\ufffd\\ufffd");  // a surrogate
  EXPECT_EQ(escapeJsonString("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");   // U+1F600
  EXPECT_EQ(escapeJsonString("\xe2\x82"), "\\ufffd\\ufffd");             // truncated
}

TEST(LogConfigTest, ReadsTheLogSection) {
  Result<config::ConfigFile> file = config::ConfigFile::parse(
      "[log]\nlevel = \"debug\"\nformat = \"json\"\nfile = \"/var/log/gpool/a.log\"\n",
      "gpoold.toml");
  ASSERT_TRUE(file.ok());
  LogOptions options = readLogOptions(file->root().section("log"), "gpoold");
  EXPECT_EQ(options.level, "debug");
  EXPECT_EQ(options.format, LogFormat::kJson);
  EXPECT_EQ(options.file, "/var/log/gpool/a.log");
  EXPECT_EQ(options.process_name, "gpoold");
  EXPECT_TRUE(file->finish().isOk());
}

TEST(LogConfigTest, BadValuesAreConfigErrorsAndDefaultsRemain) {
  Result<config::ConfigFile> file = config::ConfigFile::parse(
      "[log]\nlevel = \"loud\"\nformat = \"xml\"\nrotate = true\n", "agent.toml");
  ASSERT_TRUE(file.ok());
  LogOptions options = readLogOptions(file->root().section("log"), "gpool-agent");
  EXPECT_EQ(options.level, "info");
  EXPECT_EQ(options.format, LogFormat::kText);
  Status s = file->finish();
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("agent.toml:2: key 'log.level': unknown log level 'loud'"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("agent.toml:3: key 'log.format': unknown log format 'xml'"),
            std::string::npos);
  EXPECT_NE(s.message().find("agent.toml:4: unknown key 'log.rotate'"), std::string::npos);
}

}  // namespace
}  // namespace gpool::logging
