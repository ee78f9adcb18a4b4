// Wire formats: float32 data that travels as bfloat16 or float16 while every
// reduction stays in float32 (docs/compression.md). The engine narrows a
// step's float32 bytes into wire bytes before a send and widens them after a
// receive (src/exec/op_steps.cc); these are its kernels.
//
// bf16 has float32's exponent range, so it needs nothing but rounding. fp16
// tops out at 65504, so every fp16 message carries its own power-of-two
// scale: 2^k with k chosen from the message's largest finite magnitude so
// that it lands in [2^14, 2^15) after scaling (k clamped to [-114, 125]).
// Scaling by a power of two is exact, so no finite value ever overflows, small
// values keep fp16's 11 bits, and the receiver needs no agreement with the
// sender beyond the 4-byte k after the payload. k is computed from the
// largest magnitude rounded to 11 bits, so narrowing values that were widened
// from a message picks the same k and reproduces that message bit for bit
// (a rank that forwards a result sends exactly what it received).
//
// Rounding is to nearest even; NaN stays NaN (quieted, top payload bits
// kept), infinities stay infinite, signed zeros keep their sign. The AVX2 +
// F16C kernels give the same bits as the portable ones (tests/kernels).
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft {

enum class Wire : uint8_t { None = 0, Bf16 = 1, Fp16 = 2 };
const char* wireName(Wire w);  // "none", "bf16", "fp16"
// Parses "none" ("", "0", "off"), "bf16" ("bfloat16"), "fp16" ("float16",
// "half"); false for anything else.
bool parseWire(const char* s, Wire* out);

// Bytes on the wire for `count` float32 elements: 2 per element, plus fp16's
// 4-byte scale exponent when count > 0.
inline size_t wireBytes(Wire w, size_t count) {
  if (w == Wire::None) return count * 4;
  return count * 2 + (w == Wire::Fp16 && count ? 4 : 0);
}

// Writes wireBytes(w, count) bytes at `wire` for src[0..count). When
// `rounded` is not null it also receives the widened value of every element
// (what a receiver will hold); it may equal src.
void wireNarrow(void* wire, const float* src, size_t count, Wire w, float* rounded);
// dst[i] = the value element i of the message at `wire` carries.
void wireWiden(float* dst, const void* wire, size_t count, Wire w);
// dst[i] = a[i] + widened element i, one float32 rounding; dst may equal a.
void wireWidenAdd(float* dst, const float* a, const void* wire, size_t count, Wire w);

// fp16's scale exponent k for src[0..count) (0 when no element is finite and
// nonzero). Exposed for the tests.
int wireFp16ScaleExp(const float* src, size_t count);

}  // namespace weft
