#include "core/status.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace weft {

std::string strFormat(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) vsnprintf(out.data(), out.size() + 1, fmt, ap2);
  va_end(ap2);
  return out;
}

Status systemError(const std::string& what, int err) {
  char buf[128];
  const char* s = strerror_r(err, buf, sizeof buf);
  return Status(WEFT_ERR_SYSTEM, what + ": " + s);
}

}  // namespace weft
