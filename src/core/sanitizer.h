// What weft tells the sanitizers (docs/sanitizers.md). Nothing in a build
// without them.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define WEFT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_ASAN 1
#endif
#endif

#ifdef WEFT_ASAN
#include <sanitizer/lsan_interface.h>
#endif

namespace weft {

// Memory weft gives up on purpose (local work that outlived its timeout may
// still write into it): not a leak for LeakSanitizer.
inline void leakOnPurpose(const void* p) {
#ifdef WEFT_ASAN
  if (p) __lsan_ignore_object(p);
#else
  (void)p;
#endif
}

}  // namespace weft
