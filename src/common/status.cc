#include "common/status.h"

namespace gpool {

std::string_view statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kAlreadyExists: return "already_exists";
    case StatusCode::kPermissionDenied: return "permission_denied";
    case StatusCode::kUnauthenticated: return "unauthenticated";
    case StatusCode::kFailedPrecondition: return "failed_precondition";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kOutOfRange: return "out_of_range";
    case StatusCode::kAborted: return "aborted";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kDeadlineExceeded: return "deadline_exceeded";
    case StatusCode::kIoError: return "io_error";
    case StatusCode::kUnimplemented: return "unimplemented";
    case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

Status::Status(StatusCode code, std::string_view message) {
  if (code != StatusCode::kOk) {
    state_ = std::make_unique<State>(State{code, std::string(message)});
  }
}

Status::Status(const Status& other)
    : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) {
    state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
  }
  return *this;
}

const std::string& Status::message() const {
  static const std::string* const kEmpty = new std::string();
  return state_ ? state_->message : *kEmpty;
}

Status Status::withContext(std::string_view context) const {
  if (isOk()) return Status();
  std::string msg(context);
  msg += ": ";
  msg += state_->message;
  return Status(state_->code, msg);
}

std::string Status::toString() const {
  if (isOk()) return "ok";
  std::string out(statusCodeName(state_->code));
  out += ": ";
  out += state_->message;
  return out;
}

int httpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kOutOfRange: return 400;
    case StatusCode::kAborted: return 409;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kDeadlineExceeded: return 504;
    case StatusCode::kIoError: return 500;
    case StatusCode::kUnimplemented: return 501;
    case StatusCode::kInternal: return 500;
  }
  return 500;
}

int exitCodeFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument: return 2;
    case StatusCode::kOutOfRange: return 2;
    case StatusCode::kNotFound: return 3;
    case StatusCode::kPermissionDenied: return 4;
    case StatusCode::kUnauthenticated: return 4;
    case StatusCode::kAlreadyExists: return 5;
    case StatusCode::kFailedPrecondition: return 5;
    case StatusCode::kAborted: return 5;
    case StatusCode::kResourceExhausted: return 6;
    case StatusCode::kUnavailable: return 7;
    case StatusCode::kDeadlineExceeded: return 7;
    case StatusCode::kIoError: return 1;
    case StatusCode::kUnimplemented: return 1;
    case StatusCode::kInternal: return 1;
  }
  return 1;
}

}  // namespace gpool
