#pragma once

#include <cassert>
#include <optional>
#include <type_traits>
#include <utility>

#include "common/status.h"

namespace gpool {

// Result<T> holds either a value of type T or a non-OK Status explaining why there is none
// (like Mesos's Try<T>; C++20 has no std::expected). Constructing a Result from an OK Status is
// a programming error and becomes an internal error.
//
// Accessing value() on an error is a bug and aborts in debug builds; callers test ok() first
// or use GPOOL_ASSIGN_OR_RETURN.
template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::decay_t<T>, Status>, "Result<Status> is meaningless");

 public:
  Result(const T& value) : value_(value) {}        // NOLINT: implicit by design
  Result(T&& value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  template <typename U, typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                                    !std::is_same_v<std::decay_t<U>, Status> &&
                                                    !std::is_same_v<std::decay_t<U>, Result<T>>>>
  Result(U&& value) : value_(T(std::forward<U>(value))) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {      // NOLINT: implicit by design
    if (status_.isOk()) status_ = Status::internal("Result constructed from an OK status");
  }

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }

  // OK when a value is held.
  const Status& status() const { return status_; }

  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T& value() & {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  T valueOr(T fallback) const& { return ok() ? *value_ : std::move(fallback); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace gpool

#define GPOOL_CONCAT_INNER_(a, b) a##b
#define GPOOL_CONCAT_(a, b) GPOOL_CONCAT_INNER_(a, b)

// GPOOL_ASSIGN_OR_RETURN(auto x, computeX()); returns the error Status from the enclosing
// function when computeX() failed, otherwise moves the value into `x`.
#define GPOOL_ASSIGN_OR_RETURN(lhs, expr) \
  GPOOL_ASSIGN_OR_RETURN_IMPL_(GPOOL_CONCAT_(gpool_result_, __LINE__), lhs, expr)
#define GPOOL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
