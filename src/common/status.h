#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace gpool {

// The error codes shared by every component. Each maps to one HTTP status and one CLI exit
// code (see `httpStatusFor` and `exitCodeFor`), so that an error keeps its meaning from the
// store up to the user's terminal.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,     // bad input from a user, a file or the network
  kNotFound,            // the named thing does not exist
  kAlreadyExists,       // a create collided with an existing thing
  kPermissionDenied,    // the caller is known but may not do this
  kUnauthenticated,     // the caller could not be identified
  kFailedPrecondition,  // the system is not in a state that allows this (e.g. illegal transition)
  kResourceExhausted,   // a quota or capacity limit was hit
  kOutOfRange,          // a value outside what the system can represent or serve
  kAborted,             // a concurrency conflict; retrying may succeed
  kUnavailable,         // a peer or service cannot be reached right now
  kDeadlineExceeded,    // the operation took too long
  kIoError,             // the local OS or file system failed
  kUnimplemented,       // not supported by this build or backend
  kInternal,            // a bug: an invariant broke
};

// Returns the stable lower_snake name of `code`, as used in JSON error bodies.
std::string_view statusCodeName(StatusCode code);

// Status is the result of an operation that returns no value. OK is a null pointer (as in
// LevelDB) so that the success path costs one pointer test and no allocation. Messages name
// what was wrong and where, carry no trailing period, and gain context at each hop through
// `withContext`.
//
// Thread-safety: a Status is a value; distinct objects may be used from distinct threads.
class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  Status(StatusCode code, std::string_view message);
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&& other) noexcept = default;
  Status& operator=(Status&& other) noexcept = default;
  ~Status() = default;

  static Status ok() { return Status(); }
  static Status invalidArgument(std::string_view msg) {
    return {StatusCode::kInvalidArgument, msg};
  }
  static Status notFound(std::string_view msg) { return {StatusCode::kNotFound, msg}; }
  static Status alreadyExists(std::string_view msg) { return {StatusCode::kAlreadyExists, msg}; }
  static Status permissionDenied(std::string_view msg) {
    return {StatusCode::kPermissionDenied, msg};
  }
  static Status unauthenticated(std::string_view msg) {
    return {StatusCode::kUnauthenticated, msg};
  }
  static Status failedPrecondition(std::string_view msg) {
    return {StatusCode::kFailedPrecondition, msg};
  }
  static Status resourceExhausted(std::string_view msg) {
    return {StatusCode::kResourceExhausted, msg};
  }
  static Status outOfRange(std::string_view msg) { return {StatusCode::kOutOfRange, msg}; }
  static Status aborted(std::string_view msg) { return {StatusCode::kAborted, msg}; }
  static Status unavailable(std::string_view msg) { return {StatusCode::kUnavailable, msg}; }
  static Status deadlineExceeded(std::string_view msg) {
    return {StatusCode::kDeadlineExceeded, msg};
  }
  static Status ioError(std::string_view msg) { return {StatusCode::kIoError, msg}; }
  static Status unimplemented(std::string_view msg) { return {StatusCode::kUnimplemented, msg}; }
  static Status internal(std::string_view msg) { return {StatusCode::kInternal, msg}; }

  bool isOk() const { return state_ == nullptr; }
  explicit operator bool() const { return isOk(); }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  // Empty for OK.
  const std::string& message() const;

  // Returns a copy whose message is "<context>: <message>". OK stays OK.
  Status withContext(std::string_view context) const;

  // "ok", or "<code name>: <message>".
  std::string toString() const;

  bool operator==(const Status& other) const {
    return code() == other.code() && message() == other.message();
  }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<State> state_;
};

// The HTTP status a REST handler answers with for `code` (400, 404, 409, 403, 401, 409, 429,
// 400, 409, 503, 504, 500, 501, 500).
int httpStatusFor(StatusCode code);

// The process exit code the CLI uses for `code`. 0 is success, 1 a generic failure, 2 bad
// usage/input; the rest are documented in docs/cli-exit-codes.md.
int exitCodeFor(StatusCode code);

}  // namespace gpool

// Evaluates `expr` (a Status) and returns it from the current function if it is not OK.
#define GPOOL_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    ::gpool::Status gpool_status_ = (expr);          \
    if (!gpool_status_.isOk()) return gpool_status_; \
  } while (0)
