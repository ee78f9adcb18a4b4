// Streaming copy: the bytes go to memory with non-temporal stores, without
// the destination's lines being read first (no read-for-ownership) and
// without evicting what the caches hold. For outputs far larger than the
// caches (the last copy of a large collective) it saves a third of the
// memory traffic of memcpy's ordinary stores.
#include <cstdint>
#include <cstring>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/reduce.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define WEFT_COPY_AVX2 __attribute__((target("avx2")))
#endif

namespace weft {
namespace {

#if defined(__x86_64__) || defined(__i386__)
WEFT_COPY_AVX2 void streamAvx2(char* dst, const char* src, size_t n) {
  // Align the destination to 32 bytes with an ordinary copy of the head.
  size_t head = (32 - (reinterpret_cast<uintptr_t>(dst) & 31)) & 31;
  if (head > n) head = n;
  memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 64));
    __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 96), d);
  }
  _mm_sfence();
  memcpy(dst + i, src + i, n - i);
}
#endif

}  // namespace

void copyHostStreaming(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  if (bytes >= 4096 && cpu::hostIsaSupported(cpu::HostIsa::kAvx2)) {
    streamAvx2(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
    return;
  }
#endif
  memcpy(dst, src, bytes);
}

}  // namespace weft
