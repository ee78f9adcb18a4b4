// The exact-sum kernel behind WEFT_REPRO=exact: each element of a float SUM
// (or AVG) is the exact real sum of every source's value (AVG: divided by
// the number of sources), rounded once to the datatype, nearest-even. The
// result does not depend on the order, the grouping or the number of the
// sources that held the values, only on the multiset of values.
//
// Special values: any NaN, or +inf and -inf together, give the type's
// canonical quiet NaN (positive); infinities of one sign give that infinity;
// an exact zero is -0 only when every input is -0. fp8 saturates overflow and
// infinities to the largest finite value (kernels/ops.h), as the other
// kernels do. docs/reproducibility.md, "The exact mode's arithmetic", has the
// design and the proof sketch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft.h"

namespace weft {

// dst[i] = the exact sum over k < nsrc of srcs[k][i] (average: divided by
// nsrc), rounded once to dt (nearest-even). Float types only: FLOAT16,
// FLOAT32, FLOAT64, BFLOAT16, FP8_E4M3, FP8_E5M2; any other type, or
// nsrc < 1, returns false and touches nothing. dst may be identical to any
// srcs[k] (not partially overlap them).
bool exactSumHost(void* dst, const void* const* srcs, int nsrc, size_t count, weft_datatype_t dt,
                  bool average);

// Elements this thread's calls finished on a fast path (a float or double
// sum that was exact) and on the exact slow path (the superaccumulator);
// floatFast counts those of `fast` that the narrow types (f16, bf16, fp8)
// finished in float lanes, without the double path. For tests and
// benchmarks: a regression to "always slow" shows here.
struct ExactSumCounters {
  uint64_t fast = 0;
  uint64_t slow = 0;
  uint64_t floatFast = 0;
};
ExactSumCounters& exactSumCounters();

}  // namespace weft
