#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/client_commands.h"

namespace gpool::cli {
namespace {

using Args = std::vector<std::string>;

TEST(SplitSubmitArguments, EverythingAfterTheScriptBelongsToIt) {
  GlobalOptions g;
  EXPECT_EQ(splitSubmitArguments({"--socket", "s", "submit", "--gpus", "2", "--time=4h", "train.sh",
                                  "--lr", "3", "--", "x"},
                                 &g),
            (Args{"--socket", "s", "submit", "--gpus", "2", "--time=4h"}));
  EXPECT_EQ(g.submit_args, (Args{"train.sh", "--lr", "3", "--", "x"}));
  EXPECT_FALSE(g.submit_command);
  EXPECT_TRUE(g.submit_error.empty());
}

// The remote options take a value wherever they stand, before submit or among its flags.
TEST(SplitSubmitArguments, RemoteGlobalOptionsTakeTheirValues) {
  GlobalOptions g;
  EXPECT_EQ(
      splitSubmitArguments({"--server", "h:1", "--ca", "ca.pem", "submit", "--token-file", "t",
                            "--gpus", "1", "train.sh", "--ca", "x"},
                           &g),
      (Args{"--server", "h:1", "--ca", "ca.pem", "submit", "--token-file", "t", "--gpus", "1"}));
  EXPECT_EQ(g.submit_args, (Args{"train.sh", "--ca", "x"}));
  EXPECT_TRUE(g.submit_error.empty());
}

TEST(SplitSubmitArguments, DoubleDashStartsACommand) {
  GlobalOptions g;
  EXPECT_EQ(splitSubmitArguments({"submit", "--json", "--preemptible", "--", "python", "-u"}, &g),
            (Args{"submit", "--json", "--preemptible"}));
  EXPECT_EQ(g.submit_args, (Args{"python", "-u"}));
  EXPECT_TRUE(g.submit_command);
}

TEST(SplitSubmitArguments, UnknownFlagsAreReportedBySubmit) {
  GlobalOptions g;
  EXPECT_EQ(splitSubmitArguments({"submit", "--gpu=2", "--", "true"}, &g), (Args{"submit"}));
  EXPECT_EQ(g.submit_error, "unknown flag '--gpu' (did you mean '--gpus'?)");
}

TEST(SplitSubmitArguments, OtherCommandsAreUntouched) {
  GlobalOptions g;
  Args args{"--json", "queue", "--all", "submit"};
  EXPECT_EQ(splitSubmitArguments(args, &g), args);
  EXPECT_TRUE(g.submit_args.empty());
}

}  // namespace
}  // namespace gpool::cli
