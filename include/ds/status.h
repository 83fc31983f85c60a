// Status and Result<T>: how expected failures travel (a bad file, bad JSON, no KV room).
// Messages are written for the user who must act on them: name the file, the field, the
// value. Programmer errors are asserts, not Status.
#pragma once
#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ds {

// What kind of failure a Status reports, for callers that answer differently by kind (the
// command line's exit codes, the HTTP layer's status codes). Most failures are kError.
enum class StatusCode {
  kOk,
  kError,            // an expected failure with no more specific kind (a bad file, no KV room)
  kInvalidArgument,  // the caller's own input is malformed: a command line, a request field
  kOutOfRange,       // well-formed input that exceeds a limit of this instance (the context size)
  kTooLarge,         // input larger than this instance accepts at all (a request body)
  kUnauthorized,     // missing or wrong credentials
  kNotFound,         // no such resource (an HTTP route, a model name)
  kUnimplemented,    // a feature this build or configuration does not serve
  kUnavailable,      // retry later: busy, loading, shutting down
  kInternal,         // a bug or an invariant broken at run time
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(StatusCode::kError, std::move(message)); }
  static Status error(StatusCode code, std::string message) {
    assert(code != StatusCode::kOk);
    return Status(code, std::move(message));
  }
  static Status invalid_argument(std::string message) {
    return Status(StatusCode::kInvalidArgument, std::move(message));
  }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Named numbers behind the message (a prompt's token count, the context size), for callers
  // that report a failure as data as well as text. Status::error(...).with_detail("n_ctx", 4096).
  Status with_detail(std::string key, int64_t value) && {
    details_.emplace_back(std::move(key), value);
    return std::move(*this);
  }
  const std::vector<std::pair<std::string, int64_t>>& details() const { return details_; }

 private:
  Status(StatusCode code, std::string message) : message_(std::move(message)), code_(code) {}
  std::string message_;
  StatusCode code_ = StatusCode::kOk;
  std::vector<std::pair<std::string, int64_t>> details_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}                                     // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) { assert(!status_.is_ok()); }  // NOLINT

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  const std::string& message() const { return status_.message(); }

  T& value() & {
    assert(value_);
    return *value_;
  }
  const T& value() const& {
    assert(value_);
    return *value_;
  }
  T&& value() && {
    assert(value_);
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

// Propagate a failed Status from an expression returning Status.
#define DS_RETURN_IF_ERROR(expr)                \
  do {                                          \
    ::ds::Status ds_status_ = (expr);           \
    if (!ds_status_.is_ok()) return ds_status_; \
  } while (0)

}  // namespace ds
