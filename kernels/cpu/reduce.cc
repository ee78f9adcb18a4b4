// The host reduction executor: portable kernels, the per-ISA kernel tables
// (built once, on first use) and the entry points of reduce.h. The vector
// kernels live in reduce_avx2.cc / reduce_avx512.cc.
#include "kernels/cpu/reduce.h"

#include <atomic>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/dispatch.h"
#include "kernels/ops.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace weft {
namespace cpu {
namespace {

// ---- Portable kernels -------------------------------------------------------

template <typename T, int OP>
void portable2(void* dst, const void* a, const void* b, size_t count) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  const OpFunctor<T, OP> f;
  for (size_t i = 0; i < count; ++i) d[i] = f(x[i], y[i]);
}

// Blocked so that every source streams through once while the accumulators
// of a block stay in L1. Reads a whole block of every source before writing
// it, so dst may equal any source.
template <typename T, int OP>
void portableN(void* dst, const void* const* srcs, int nsrc, size_t count) {
  using A = Arith<T>;
  using Acc = typename A::Acc;
  using F = OpFunctor<T, OP>;
  constexpr size_t kBlock = 512;
  Acc acc[kBlock];
  T* d = static_cast<T*>(dst);
  for (size_t i = 0; i < count; i += kBlock) {
    const size_t m = count - i < kBlock ? count - i : kBlock;
    const T* s0 = static_cast<const T*>(srcs[0]) + i;
    for (size_t j = 0; j < m; ++j) acc[j] = A::toAcc(s0[j]);
    for (int k = 1; k < nsrc; ++k) {
      const T* s = static_cast<const T*>(srcs[k]) + i;
      for (size_t j = 0; j < m; ++j) acc[j] = F::combine(acc[j], A::toAcc(s[j]));
    }
    for (size_t j = 0; j < m; ++j) d[i + j] = A::fromAcc(acc[j]);
  }
}

template <typename T>
void portableDivide(void* dst, size_t count, uint64_t n) {
  T* d = static_cast<T*>(dst);
  if constexpr (std::is_integral<T>::value) {
    if constexpr (std::is_signed<T>::value) {
      if (n > static_cast<uint64_t>(INT64_MAX)) {
        // |x| <= 2^63 <= n: only INT64_MIN / 2^63 is not 0.
        for (size_t i = 0; i < count; ++i) {
          d[i] =
              (static_cast<int64_t>(d[i]) == INT64_MIN && n == (uint64_t{1} << 63)) ? T(-1) : T(0);
        }
        return;
      }
      if (sizeof(T) <= 4 && n <= static_cast<uint64_t>(INT32_MAX)) {
        const int32_t dv = static_cast<int32_t>(n);
        for (size_t i = 0; i < count; ++i) d[i] = static_cast<T>(static_cast<int32_t>(d[i]) / dv);
        return;
      }
      const int64_t dv = static_cast<int64_t>(n);
      for (size_t i = 0; i < count; ++i) d[i] = static_cast<T>(static_cast<int64_t>(d[i]) / dv);
    } else {
      if (sizeof(T) <= 4 && n <= UINT32_MAX) {
        const uint32_t dv = static_cast<uint32_t>(n);
        for (size_t i = 0; i < count; ++i) d[i] = static_cast<T>(static_cast<uint32_t>(d[i]) / dv);
        return;
      }
      for (size_t i = 0; i < count; ++i) d[i] = static_cast<T>(static_cast<uint64_t>(d[i]) / n);
    }
  } else {
    using A = Arith<T>;
    using Acc = typename A::Acc;
    const Acc dv = static_cast<Acc>(n);
    for (size_t i = 0; i < count; ++i) d[i] = A::fromAcc(A::toAcc(d[i]) / dv);
  }
}

template <typename T, int OP>
void fillPortableOp(HostKernels* k, int dt) {
  if constexpr (kHasKernel<T, OP>) {
    k->reduce2[dt][OP] = &portable2<T, OP>;
    k->reduceN[dt][OP] = &portableN<T, OP>;
  } else {
    k->reduce2[dt][OP] = nullptr;
    k->reduceN[dt][OP] = nullptr;
  }
}

template <typename T, int... OPS>
void fillPortableType(HostKernels* k, int dt, std::integer_sequence<int, OPS...>) {
  (fillPortableOp<T, OPS>(k, dt), ...);
  k->divide[dt] = &portableDivide<T>;
}

template <typename T>
void fillPortableType(HostKernels* k, int dt) {
  fillPortableType<T>(k, dt, std::make_integer_sequence<int, kNumKernelOps>());
}

// ---- Dispatch ---------------------------------------------------------------

constexpr int kNumIsas = 3;

// What the CPU and the OS (saved register state) allow: AVX2 + F16C + FMA,
// and AVX-512 F + BW on top. Read with cpuid / xgetbv, which GCC and Clang both
// know (Clang's __builtin_cpu_supports lacks "f16c").
void cpuFeatures(bool* avx2, bool* avx512) {
  *avx2 = *avx512 = false;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28),
             f16c = c & (1u << 29);
  if (!osxsave || !avx) return;
  unsigned xcr0lo, xcr0hi;
  __asm__ volatile("xgetbv" : "=a"(xcr0lo), "=d"(xcr0hi) : "c"(0));
  if ((xcr0lo & 0x6u) != 0x6u) return;  // the OS saves XMM and YMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
  *avx2 = (b & (1u << 5)) && fma && f16c;
  // AVX-512 F and BW, and the OS saves opmask and ZMM state.
  *avx512 = *avx2 && (b & (1u << 16)) && (b & (1u << 30)) && (xcr0lo & 0xe0u) == 0xe0u;
#endif
}

struct Dispatch {
  HostKernels tables[kNumIsas];
  bool supported[kNumIsas] = {true, false, false};
  int best = 0;
  std::atomic<int> active{0};

  Dispatch() {
    bool cpuAvx2 = false, cpuAvx512 = false;
    cpuFeatures(&cpuAvx2, &cpuAvx512);
    fillPortableKernels(&tables[0]);
    tables[1] = tables[0];
    supported[1] = fillAvx2Kernels(&tables[1]) && cpuAvx2;
    tables[2] = tables[1];  // AVX-512 falls back to AVX2 for what it lacks
    supported[2] = supported[1] && fillAvx512Kernels(&tables[2]) && cpuAvx512;
    best = supported[2] ? 2 : supported[1] ? 1 : 0;
    active.store(best);
  }
};

Dispatch& dispatch() {
  static Dispatch d;
  return d;
}

const HostKernels& kernels() {
  Dispatch& d = dispatch();
  return d.tables[d.active.load(std::memory_order_relaxed)];
}

bool validDtype(weft_datatype_t dt) { return dt >= 0 && dt < WEFT_NUM_DATATYPES; }

// The kernel op index of `op` (AVG reduces as SUM); -1 when out of range.
int kernelOp(weft_op_t op) {
  if (op == WEFT_AVG) return WEFT_SUM;
  return (op >= 0 && op < kNumKernelOps) ? static_cast<int>(op) : -1;
}

// The table's kernel for (dt, op), or null: a bitwise op on a floating type,
// or either out of range. Callers are checked before (opSupported), so null
// here only guards against a bug reaching a null call.
template <typename Fn>
Fn pick(Fn const (&table)[WEFT_NUM_DATATYPES][kNumKernelOps], weft_datatype_t dt, weft_op_t op) {
  const int k = kernelOp(op);
  if (k < 0 || !validDtype(dt)) return nullptr;
  return table[dt][k];
}

}  // namespace

void fillPortableKernels(HostKernels* k) {
  fillPortableType<int8_t>(k, WEFT_INT8);
  fillPortableType<uint8_t>(k, WEFT_UINT8);
  fillPortableType<int32_t>(k, WEFT_INT32);
  fillPortableType<uint32_t>(k, WEFT_UINT32);
  fillPortableType<int64_t>(k, WEFT_INT64);
  fillPortableType<uint64_t>(k, WEFT_UINT64);
  fillPortableType<half_t>(k, WEFT_FLOAT16);
  fillPortableType<float>(k, WEFT_FLOAT32);
  fillPortableType<double>(k, WEFT_FLOAT64);
  fillPortableType<bf16_t>(k, WEFT_BFLOAT16);
  fillPortableType<fp8e4m3_t>(k, WEFT_FP8_E4M3);
  fillPortableType<fp8e5m2_t>(k, WEFT_FP8_E5M2);
  fillPortableExactSum(k);
}

const HostKernels& activeHostKernels() { return kernels(); }

bool hostIsaSupported(HostIsa isa) {
  const int i = static_cast<int>(isa);
  return i >= 0 && i < kNumIsas && dispatch().supported[i];
}

HostIsa activeHostIsa() { return static_cast<HostIsa>(dispatch().active.load()); }

bool forceHostIsa(HostIsa isa) {
  if (!hostIsaSupported(isa)) return false;
  dispatch().active.store(static_cast<int>(isa));
  return true;
}

void resetHostIsa() {
  Dispatch& d = dispatch();
  d.active.store(d.best);
}

}  // namespace cpu

bool opSupported(weft_datatype_t dt, weft_op_t op) {
  return cpu::pick(cpu::kernels().reduce2, dt, op) != nullptr;
}

void reduceHost(void* dst, const void* a, const void* b, size_t count, weft_datatype_t dt,
                weft_op_t op) {
  const cpu::Reduce2Fn f = cpu::pick(cpu::kernels().reduce2, dt, op);
  if (count == 0 || !f) return;
  f(dst, a, b, count);
}

void reduceHostN(void* dst, const void* const* srcs, int nsrc, size_t count, weft_datatype_t dt,
                 weft_op_t op) {
  const cpu::HostKernels& kern = cpu::kernels();
  const cpu::Reduce2Fn f2 = cpu::pick(kern.reduce2, dt, op);
  if (count == 0 || nsrc < 1 || !f2) return;
  if (nsrc == 1) {
    if (dst != srcs[0]) std::memmove(dst, srcs[0], count * datatypeSize(dt));
    return;
  }
  if (nsrc == 2) {
    f2(dst, srcs[0], srcs[1], count);  // same rounding: once
  } else {
    cpu::pick(kern.reduceN, dt, op)(dst, srcs, nsrc, count);
  }
}

void scaleHost(void* dst, const void* src, size_t count, weft_datatype_t dt, const void* scalar) {
  const size_t elt = datatypeSize(dt);
  if (count == 0 || elt == 0) return;
  // A block of copies of the scalar, multiplied against the input block by
  // block with PROD's kernel (the vector one where the CPU has it).
  constexpr size_t kBlock = 512;
  alignas(64) unsigned char scalars[kBlock * 8];
  for (size_t i = 0; i < kBlock; ++i) std::memcpy(scalars + i * elt, scalar, elt);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (size_t done = 0; done < count; done += kBlock) {
    const size_t n = count - done < kBlock ? count - done : kBlock;
    reduceHost(d + done * elt, s + done * elt, scalars, n, dt, WEFT_PROD);
  }
}

void divideByCount(void* dst, size_t count, weft_datatype_t dt, uint64_t n) {
  if (count == 0 || n <= 1 || !cpu::validDtype(dt)) return;  // n == 0: nothing to divide by
  cpu::kernels().divide[dt](dst, count, n);
}

const char* hostReduceIsa() {
  switch (cpu::activeHostIsa()) {
    case cpu::HostIsa::kAvx512:
      return "avx512";
    case cpu::HostIsa::kAvx2:
      return "avx2";
    default:
      return "portable";
  }
}

}  // namespace weft
