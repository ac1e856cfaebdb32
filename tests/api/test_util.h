#pragma once

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "api/json_reader.h"
#include "common/status.h"

namespace gpool::api::testing {

// Parses JSON text in a test; fails the test on a syntax error.
inline nlohmann::json J(const std::string& text) {
  Result<nlohmann::json> r = parseJsonText(text, "test input");
  EXPECT_TRUE(r.ok()) << r.status().toString();
  return r.ok() ? *r : nlohmann::json();
}

// Decodes `j` into a T and returns the status.
template <typename T>
Status decode(const nlohmann::json& j, T* out = nullptr) {
  T value{};
  Status s = fromJson(j, &value);
  if (out != nullptr) *out = value;
  return s;
}

// Succeeds when `s` is InvalidArgument and its message contains `needle`.
inline ::testing::AssertionResult failsWith(const Status& s, const std::string& needle,
                                            StatusCode code = StatusCode::kInvalidArgument) {
  if (s.isOk()) return ::testing::AssertionFailure() << "succeeded, expected '" << needle << "'";
  if (s.code() != code) return ::testing::AssertionFailure() << "wrong code: " << s.toString();
  if (s.message().find(needle) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "message '" << s.message() << "' lacks '" << needle << "'";
  }
  return ::testing::AssertionSuccess();
}

// toJson -> text -> parse -> fromJson must give back an equal value, and the second encoding
// must be identical to the first (canonical output).
template <typename T>
::testing::AssertionResult roundTrips(const T& value) {
  nlohmann::json first = toJson(value);
  Result<nlohmann::json> reparsed = parseJsonText(dumpJson(first), "round trip");
  if (!reparsed.ok()) return ::testing::AssertionFailure() << reparsed.status().toString();
  T back{};
  Status s = fromJson(*reparsed, &back);
  if (!s.isOk()) {
    return ::testing::AssertionFailure() << s.toString() << " in " << dumpJson(first);
  }
  if (!(back == value)) {
    return ::testing::AssertionFailure()
           << "differs after round trip: " << dumpJson(first) << " vs " << dumpJson(toJson(back));
  }
  if (toJson(back) != first) return ::testing::AssertionFailure() << "output not canonical";
  return ::testing::AssertionSuccess();
}

}  // namespace gpool::api::testing
