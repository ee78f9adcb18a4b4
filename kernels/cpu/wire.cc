// Wire formats (wire.h): the portable kernels, the choice of the AVX2 ones
// and the entry points. Every entry point runs in IEEE's default
// floating-point mode (fp_mode.h): a rank whose thread flushes subnormals
// would otherwise narrow or widen them differently from its peers, and the
// ranks must agree bit for bit on what a message carries.
#include "kernels/cpu/wire.h"

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/fp_mode.h"
#include "kernels/cpu/wire_kernels.h"
#include "kernels/ops.h"

namespace weft {
namespace cpu {
namespace {

void narrowBf16(uint16_t* w, const float* src, size_t n, float* rounded) {
  for (size_t i = 0; i < n; ++i) {
    const bf16_t b = floatToBf16(src[i]);
    w[i] = b.bits;
    if (rounded) rounded[i] = bf16ToFloat(b);
  }
}

void widenBf16(float* dst, const uint16_t* w, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16ToFloat(bf16_t{w[i]});
}

void widenAddBf16(float* dst, const float* a, const uint16_t* w, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = a[i] + bf16ToFloat(bf16_t{w[i]});
}

void narrowFp16(uint16_t* w, const float* src, size_t n, float scale, float inv, float* rounded) {
  for (size_t i = 0; i < n; ++i) {
    const half_t h = floatToHalf(src[i] * scale);
    w[i] = h.bits;
    if (rounded) rounded[i] = halfToFloat(h) * inv;
  }
}

void widenFp16(float* dst, const uint16_t* w, size_t n, float inv) {
  for (size_t i = 0; i < n; ++i) dst[i] = halfToFloat(half_t{w[i]}) * inv;
}

void widenAddFp16(float* dst, const float* a, const uint16_t* w, size_t n, float inv) {
  for (size_t i = 0; i < n; ++i) {
    const float v = halfToFloat(half_t{w[i]}) * inv;  // exact: a power of two times 11 bits
    dst[i] = a[i] + v;
  }
}

float maxFiniteAbs(const float* src, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) {
    const float a = std::fabs(src[i]);
    if (a <= 3.40282347e38f && a > m) m = a;
  }
  return m;
}

struct Tables {
  WireKernels portable, vector;
  Tables() {
    fillPortableWireKernels(&portable);
    vector = portable;
    if (hostIsaSupported(HostIsa::kAvx2)) fillAvx2WireKernels(&vector);
  }
};

// The table of the instruction set in use (forceHostIsa switches it in tests).
const WireKernels& kernels() {
  static const Tables t;
  return activeHostIsa() == HostIsa::kPortable ? t.portable : t.vector;
}

}  // namespace

// 2^k, exact for the k of wireFp16ScaleExp.
float pow2(int k) { return std::ldexp(1.0f, k); }

void fillPortableWireKernels(WireKernels* k) {
  k->narrowBf16 = narrowBf16;
  k->widenBf16 = widenBf16;
  k->widenAddBf16 = widenAddBf16;
  k->narrowFp16 = narrowFp16;
  k->widenFp16 = widenFp16;
  k->widenAddFp16 = widenAddFp16;
  k->maxFiniteAbs = maxFiniteAbs;
}

#if !defined(__x86_64__) && !defined(__i386__)
bool fillAvx2WireKernels(WireKernels*) { return false; }
#endif

}  // namespace cpu

const char* wireName(Wire w) {
  switch (w) {
    case Wire::None:
      return "none";
    case Wire::Bf16:
      return "bf16";
    case Wire::Fp16:
      return "fp16";
  }
  return "?";
}

bool parseWire(const char* s, Wire* out) {
  const std::string v = s ? s : "";
  if (v.empty() || v == "none" || v == "0" || v == "off")
    *out = Wire::None;
  else if (v == "bf16" || v == "bfloat16")
    *out = Wire::Bf16;
  else if (v == "fp16" || v == "float16" || v == "half")
    *out = Wire::Fp16;
  else
    return false;
  return true;
}

int wireFp16ScaleExp(const float* src, size_t count) {
  DefaultFloatMode mode;
  const float m = cpu::kernels().maxFiniteAbs(src, count);
  if (m == 0) return 0;
  const uint32_t bits = floatBits(m);
  constexpr int kMax = 125, kMin = -114;
  if (bits < 0x00800000u) return kMax;  // a float subnormal: scale as far as allowed
  // The exponent of m rounded to 11 bits (fp16's precision, nearest even),
  // so that a message's widened values give back the same k.
  const uint32_t r = bits + 0xfffu + ((bits >> 13) & 1u);
  const int e = static_cast<int>(r >> 23) - 127;
  const int k = 14 - e;
  return k > kMax ? kMax : (k < kMin ? kMin : k);
}

void wireNarrow(void* wire, const float* src, size_t count, Wire w, float* rounded) {
  if (!count) return;
  if (w == Wire::None) {
    std::memcpy(wire, src, count * 4);
    return;
  }
  DefaultFloatMode mode;
  auto* p = static_cast<uint16_t*>(wire);
  if (w == Wire::Bf16) {
    cpu::kernels().narrowBf16(p, src, count, rounded);
    return;
  }
  const int32_t k = wireFp16ScaleExp(src, count);
  cpu::kernels().narrowFp16(p, src, count, cpu::pow2(k), cpu::pow2(-k), rounded);
  std::memcpy(p + count, &k, sizeof k);
}

void wireWiden(float* dst, const void* wire, size_t count, Wire w) {
  if (!count) return;
  if (w == Wire::None) {
    std::memcpy(dst, wire, count * 4);
    return;
  }
  DefaultFloatMode mode;
  const auto* p = static_cast<const uint16_t*>(wire);
  if (w == Wire::Bf16) {
    cpu::kernels().widenBf16(dst, p, count);
    return;
  }
  int32_t k = 0;
  std::memcpy(&k, p + count, sizeof k);
  cpu::kernels().widenFp16(dst, p, count, cpu::pow2(-k));
}

void wireWidenAdd(float* dst, const float* a, const void* wire, size_t count, Wire w) {
  if (!count) return;
  DefaultFloatMode mode;
  const auto* p = static_cast<const uint16_t*>(wire);
  if (w == Wire::None) {
    const auto* f = static_cast<const float*>(wire);
    for (size_t i = 0; i < count; ++i) dst[i] = a[i] + f[i];
  } else if (w == Wire::Bf16) {
    cpu::kernels().widenAddBf16(dst, a, p, count);
  } else {
    int32_t k = 0;
    std::memcpy(&k, p + count, sizeof k);
    cpu::kernels().widenAddFp16(dst, a, p, count, cpu::pow2(-k));
  }
}

}  // namespace weft
