// The node's lease file (src/agent/lease_file.h): what the agent renews, every mapping of it
// sees at once; a restarted agent keeps the lease; anything else is refused. No root needed.
#include "agent/lease_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "agent_test_util.h"

namespace gpool::agent {
namespace {

TEST(LeaseFileTest, RenewalsAreSeenByEveryReaderAndSurviveAReopen) {
  testing::TempDir dir;
  const std::string path = dir.file("lease");
  Result<LeaseFile> writer = LeaseFile::create(path);
  ASSERT_TRUE(writer.ok()) << writer.status().toString();
  EXPECT_EQ(writer->read().expires_boot_us, 0);  // never granted: already over
  Result<LeaseFile> reader = LeaseFile::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().toString();

  const int64_t end = bootTimeMicros() + 60'000'000;
  writer->renew({end, 5000});
  EXPECT_EQ(reader->read().expires_boot_us, end);
  EXPECT_EQ(reader->read().fence_grace_ms, 5000);
  writer->renew({end + 5'000'000, 2000});
  EXPECT_EQ(reader->read().expires_boot_us, end + 5'000'000);
  EXPECT_EQ(reader->read().fence_grace_ms, 2000);

  // A restarted agent opens the same file: the lease its predecessor granted stays.
  writer = Status::internal("closed");
  Result<LeaseFile> again = LeaseFile::create(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->read().expires_boot_us, end + 5'000'000);
  EXPECT_EQ(reader->read().expires_boot_us, end + 5'000'000);
}

TEST(LeaseFileTest, OnlyALeaseFileIsAccepted) {
  testing::TempDir dir;
  EXPECT_EQ(LeaseFile::open(dir.file("missing")).status().code(), StatusCode::kNotFound);
  std::ofstream(dir.file("other")) << "not a lease";
  Result<LeaseFile> other = LeaseFile::open(dir.file("other"));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("is not a lease file"), std::string::npos)
      << other.status().toString();
  EXPECT_FALSE(LeaseFile::create(dir.file("no-such-dir/lease")).ok());
}

TEST(LeaseFileTest, BootTimeMovesForward) {
  int64_t a = bootTimeMicros();
  int64_t b = bootTimeMicros();
  EXPECT_GT(a, 0);
  EXPECT_GE(b, a);
}

}  // namespace
}  // namespace gpool::agent
