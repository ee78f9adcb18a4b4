// foldHost: the reproducible modes' element arithmetic (fold.h).
#include "kernels/cpu/fold.h"

#include <cstring>

#include "kernels/cpu/exact_sum.h"
#include "kernels/cpu/fp_mode.h"
#include "kernels/cpu/reduce.h"
#include "kernels/ops.h"

namespace weft {
namespace {

bool isFloat(weft_datatype_t dt) {
  return dt == WEFT_FLOAT16 || dt == WEFT_FLOAT32 || dt == WEFT_FLOAT64 || dt == WEFT_BFLOAT16 ||
         dt == WEFT_FP8_E4M3 || dt == WEFT_FP8_E5M2;
}

// AVG of a narrow type: the fold in float, divided in float, rounded once
// (reduceHostN followed by divideByCount would round twice). In blocks, so
// the accumulator stays in the cache; dst is written after every source of
// the block was read, so it may alias one.
template <typename T>
void narrowAverage(void* dst, const void* const* srcs, int n, size_t count) {
  using A = Arith<T>;
  constexpr size_t kBlock = 1024;
  float acc[kBlock];
  T* d = static_cast<T*>(dst);
  const float divisor = static_cast<float>(n);
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t m = count - base < kBlock ? count - base : kBlock;
    const T* s0 = static_cast<const T*>(srcs[0]) + base;
    for (size_t i = 0; i < m; ++i) acc[i] = A::toAcc(s0[i]);
    for (int k = 1; k < n; ++k) {
      const T* s = static_cast<const T*>(srcs[k]) + base;
      for (size_t i = 0; i < m; ++i) acc[i] += A::toAcc(s[i]);
    }
    for (size_t i = 0; i < m; ++i) d[base + i] = A::fromAcc(acc[i] / divisor);
  }
}

}  // namespace

bool orderSensitive(weft_datatype_t dt, weft_op_t op) {
  return isFloat(dt) &&
         (op == WEFT_SUM || op == WEFT_AVG || op == WEFT_PROD || op == WEFT_MIN || op == WEFT_MAX);
}

void foldHost(void* dst, const void* const* srcs, int n, size_t count, weft_datatype_t dt,
              weft_op_t op, bool exact) {
  if (count == 0 || n < 1) return;
  const DefaultFloatMode ieee;  // the same bits whatever mode the caller's thread set
  if (exact && (op == WEFT_SUM || op == WEFT_AVG) &&
      exactSumHost(dst, srcs, n, count, dt, op == WEFT_AVG))
    return;  // (not a float type: the fold below, which is order-free)
  if (op == WEFT_AVG && n > 1) {
    switch (dt) {
      case WEFT_FLOAT16:
        return narrowAverage<half_t>(dst, srcs, n, count);
      case WEFT_BFLOAT16:
        return narrowAverage<bf16_t>(dst, srcs, n, count);
      case WEFT_FP8_E4M3:
        return narrowAverage<fp8e4m3_t>(dst, srcs, n, count);
      case WEFT_FP8_E5M2:
        return narrowAverage<fp8e5m2_t>(dst, srcs, n, count);
      default:
        break;
    }
  }
  // Float and double accumulate in themselves: the fold, then the division
  // in the same precision, is the one rounding the mode asks for.
  reduceHostN(dst, srcs, n, count, dt, op);
  if (op == WEFT_AVG) divideByCount(dst, count, dt, static_cast<uint64_t>(n));
}

}  // namespace weft
