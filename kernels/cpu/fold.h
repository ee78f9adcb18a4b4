// The reproducible reductions' arithmetic (WEFT_REPRO, docs/reproducibility.md):
// every element of a result is computed from the n ranks' values at that
// element alone, in one call, so that no algorithm, chunking or transport
// can change it.
//
//  * ordered: the serial fold x0 op x1 op ... op x(n-1) in rank order, in
//    the type's accumulation precision (float for float16, bfloat16 and
//    fp8; the type itself for float and double), rounded to the type once
//    at the end; AVG divides the fold by n in that precision before that
//    one rounding.
//  * exact: SUM and AVG of a float type are the exact real sum (AVG: over
//    n) rounded once to the type (kernels/cpu/exact_sum.h); PROD as
//    ordered.
// Integer types and MIN / MAX do not depend on order: both modes compute
// them as reduceHostN does.
#pragma once

#include <cstddef>

#include "weft.h"

namespace weft {

// Whether rank order can change (dt, op)'s result: a float type with SUM,
// AVG or PROD.
bool orderSensitive(weft_datatype_t dt, weft_op_t op);

// dst[i] = the fold of srcs[0][i], ..., srcs[n-1][i] as above (exact:
// `exact`), AVG's division by n included. dst may be identical to any of
// the srcs (not partially overlap them).
void foldHost(void* dst, const void* const* srcs, int n, size_t count, weft_datatype_t dt,
              weft_op_t op, bool exact);

}  // namespace weft
