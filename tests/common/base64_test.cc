#include "common/base64.h"

#include <string>

#include <gtest/gtest.h>

namespace gpool {
namespace {

TEST(Base64Test, KnownAnswersOfRfc4648) {
  // RFC 4648 section 10 test vectors.
  EXPECT_EQ(base64Encode(""), "");
  EXPECT_EQ(base64Encode("f"), "Zg==");
  EXPECT_EQ(base64Encode("fo"), "Zm8=");
  EXPECT_EQ(base64Encode("foo"), "Zm9v");
  EXPECT_EQ(base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64Encode("\xfb\xff"), "+/8=");
  EXPECT_EQ(base64UrlEncode(""), "");
  EXPECT_EQ(base64UrlEncode("f"), "Zg");
  EXPECT_EQ(base64UrlEncode("fo"), "Zm8");
  EXPECT_EQ(base64UrlEncode("foo"), "Zm9v");
  EXPECT_EQ(base64UrlEncode("\xfb\xff"), "-_8");
}

TEST(Base64Test, DecodeInvertsEncodeForEveryByteAndLength) {
  std::string all;
  for (int b = 0; b < 256; ++b)
    all.push_back(static_cast<char>(b));
  for (size_t len = 0; len <= all.size(); len += 1 + len / 8) {
    std::string bytes = all.substr(all.size() - len);
    Result<std::string> back = base64Decode(base64Encode(bytes));
    ASSERT_TRUE(back.ok()) << back.status().toString();
    EXPECT_EQ(*back, bytes) << "length " << len;
  }
}

TEST(Base64Test, BadInputNamesWhere) {
  Result<std::string> r = base64Decode("Zm9");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("multiple of 4"), std::string::npos);
  r = base64Decode("Zm9v!mFy");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("character 4"), std::string::npos) << r.status().toString();
  r = base64Decode("Zm=v");  // padding inside
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace gpool
