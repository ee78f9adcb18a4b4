// Status: the one error type inside weft. A code from weft_result_t plus a
// sentence that names what went wrong (the argument, the peer rank and host,
// the op and its sequence number). No exceptions cross the C boundary: every
// internal function that can fail returns a Status, and the C API turns it
// into a weft_result_t plus the last-error string.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "weft.h"

namespace weft {

// Transport post calls may also answer "no resource now, retry later".
constexpr weft_result_t kNoResource = static_cast<weft_result_t>(100);

class Status {
 public:
  Status() = default;  // success
  Status(weft_result_t code, std::string msg)
      : code_(code), msg_(msg.empty() ? nullptr : new std::string(std::move(msg))) {}
  Status(const Status& o) : code_(o.code_), msg_(o.msg_ ? new std::string(*o.msg_) : nullptr) {}
  Status(Status&& o) noexcept : code_(o.code_), msg_(std::move(o.msg_)) {}
  Status& operator=(const Status& o) {
    if (this != &o) {
      code_ = o.code_;
      msg_.reset(o.msg_ ? new std::string(*o.msg_) : nullptr);
    }
    return *this;
  }
  Status& operator=(Status&& o) noexcept {
    code_ = o.code_;
    msg_ = std::move(o.msg_);
    return *this;
  }

  static Status ok() { return Status(); }
  static Status inProgress() { return Status(WEFT_IN_PROGRESS, std::string()); }
  static Status noResource() { return Status(kNoResource, std::string()); }

  bool isOk() const { return code_ == WEFT_SUCCESS; }
  // True for a real failure (not success, in-progress or no-resource).
  bool isError() const {
    return code_ != WEFT_SUCCESS && code_ != WEFT_IN_PROGRESS && code_ != kNoResource;
  }
  weft_result_t code() const { return code_; }
  const std::string& message() const { return msg_ ? *msg_ : emptyMessage(); }

  // Prepends context: "while connecting to rank 3: <message>".
  Status withContext(const std::string& ctx) const {
    return Status(code_, ctx + ": " + message());
  }

 private:
  static const std::string& emptyMessage() {
    static const std::string empty;
    return empty;
  }
  // The sentence lives on the heap, only for failures: a successful Status
  // (every call of the hot path returns several) is a code and a null
  // pointer, with nothing to construct or destroy.
  weft_result_t code_ = WEFT_SUCCESS;
  std::unique_ptr<std::string> msg_;
};

// printf-style formatting into std::string (used for error messages and logs).
std::string strFormat(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// A Status for a failed system call: "<what>: <strerror(errno)>".
Status systemError(const std::string& what, int err);

inline Status invalidArgument(const std::string& msg) {
  return Status(WEFT_ERR_INVALID_ARGUMENT, msg);
}
inline Status invalidUsage(const std::string& msg) { return Status(WEFT_ERR_INVALID_USAGE, msg); }

#define WEFT_RETURN_IF_ERROR(expr)      \
  do {                                  \
    ::weft::Status _st = (expr);        \
    if (_st.isError()) return _st;      \
  } while (0)

}  // namespace weft
