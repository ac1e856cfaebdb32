#include "common/status.h"

#include <gtest/gtest.h>

#include <string>

#include "common/result.h"

namespace gpool {
namespace {

TEST(StatusTest, DefaultIsOkAndCheap) {
  Status s;
  EXPECT_TRUE(s.isOk());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.toString(), "ok");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = Status::notFound("job 42");
  EXPECT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "job 42");
  EXPECT_EQ(s.toString(), "not_found: job 42");
}

TEST(StatusTest, ConstructingWithOkCodeIsOk) {
  Status s(StatusCode::kOk, "ignored");
  EXPECT_TRUE(s.isOk());
}

TEST(StatusTest, CopyAndMoveKeepContents) {
  Status a = Status::invalidArgument("bad");
  Status b = a;
  EXPECT_EQ(a, b);
  Status c = std::move(b);
  EXPECT_EQ(c.message(), "bad");
  a = Status::ok();
  EXPECT_TRUE(a.isOk());
  EXPECT_FALSE(c.isOk());
}

TEST(StatusTest, WithContextPrefixes) {
  Status s = Status::ioError("disk full").withContext("Failed to write job 7");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.message(), "Failed to write job 7: disk full");
  EXPECT_TRUE(Status::ok().withContext("x").isOk());
}

TEST(StatusTest, EveryCodeHasNameHttpAndExitCode) {
  for (int i = 0; i <= static_cast<int>(StatusCode::kInternal); ++i) {
    auto code = static_cast<StatusCode>(i);
    EXPECT_NE(statusCodeName(code), "unknown") << i;
    int http = httpStatusFor(code);
    EXPECT_TRUE(http == 200 || (http >= 400 && http < 600)) << i;
    if (code == StatusCode::kOk) {
      EXPECT_EQ(exitCodeFor(code), 0);
    } else {
      EXPECT_GT(exitCodeFor(code), 0) << i;
    }
  }
  EXPECT_EQ(httpStatusFor(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(httpStatusFor(StatusCode::kNotFound), 404);
  EXPECT_EQ(httpStatusFor(StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(httpStatusFor(StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(exitCodeFor(StatusCode::kInvalidArgument), 2);
}

Status failIfNegative(int v) {
  if (v < 0) return Status::outOfRange("negative");
  return Status::ok();
}

Status chain(int v) {
  GPOOL_RETURN_IF_ERROR(failIfNegative(v));
  return Status::alreadyExists("reached the end");
}

TEST(StatusTest, ReturnIfErrorPropagates) {
  EXPECT_EQ(chain(-1).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(chain(1).code(), StatusCode::kAlreadyExists);
}

Result<int> half(int v) {
  if (v % 2 != 0) return Status::invalidArgument("odd");
  return v / 2;
}

Result<int> quarter(int v) {
  GPOOL_ASSIGN_OR_RETURN(int h, half(v));
  GPOOL_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

TEST(ResultTest, HoldsValueOrError) {
  Result<int> ok = half(8);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 4);
  EXPECT_TRUE(ok.status().isOk());
  Result<int> err = half(3);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(err.valueOr(-1), -1);
}

TEST(ResultTest, AssignOrReturnChains) {
  EXPECT_EQ(*quarter(8), 2);
  EXPECT_FALSE(quarter(6).ok());
  EXPECT_EQ(quarter(6).status().message(), "odd");
}

TEST(ResultTest, OkStatusBecomesInternalError) {
  Result<std::string> r{Status::ok()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(ResultTest, MovesOutValue) {
  Result<std::string> r{std::string("payload")};
  std::string s = std::move(r).value();
  EXPECT_EQ(s, "payload");
}

}  // namespace
}  // namespace gpool
