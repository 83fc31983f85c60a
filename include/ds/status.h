// Status and Result<T>: how expected failures travel (a bad file, bad JSON, no KV room).
// Messages are written for the user who must act on them: name the file, the field, the
// value. Programmer errors are asserts, not Status.
#pragma once
#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace ds {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message), true); }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return message_; }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) { assert(!status_.is_ok()); }  // NOLINT

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  const std::string& message() const { return status_.message(); }

  T& value() & { assert(value_); return *value_; }
  const T& value() const& { assert(value_); return *value_; }
  T&& value() && { assert(value_); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

// Propagate a failed Status from an expression returning Status.
#define DS_RETURN_IF_ERROR(expr)          \
  do {                                    \
    ::ds::Status ds_status_ = (expr);     \
    if (!ds_status_.is_ok()) return ds_status_; \
  } while (0)

}  // namespace ds
