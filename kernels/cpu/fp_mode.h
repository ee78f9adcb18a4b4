// IEEE's default floating-point mode for the span of a scope: round to
// nearest even, subnormals neither flushed to zero nor read as zero. The
// reproducible modes' arithmetic (fold.h, exact_sum.h) is defined in that
// mode; a thread that set another (torch.set_flush_denormal(True), fesetround)
// would otherwise get other bits than its peers. x86: MXCSR's RC, FTZ and
// DAZ bits, restored on exit (two register writes, only when they differ).
// Elsewhere: nothing (the default is assumed).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace weft {

class DefaultFloatMode {
 public:
#if defined(__x86_64__) || defined(__i386__)
  DefaultFloatMode() : saved_(_mm_getcsr()) {
    if (saved_ & kModeBits) _mm_setcsr(saved_ & ~kModeBits);
  }
  ~DefaultFloatMode() {
    if (saved_ & kModeBits) _mm_setcsr(saved_);
  }

 private:
  static constexpr unsigned kModeBits = 0xe040u;  // FTZ, RC (2 bits), DAZ
  unsigned saved_;
#else
  DefaultFloatMode() = default;
#endif
  DefaultFloatMode(const DefaultFloatMode&) = delete;
  DefaultFloatMode& operator=(const DefaultFloatMode&) = delete;
};

}  // namespace weft
