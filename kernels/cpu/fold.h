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
// MIN / MAX of floats depend on order only through NaN payloads (two NaNs
// give the first, kernels/ops.h): both modes fold them in rank order too,
// so the lowest rank's NaN wins everywhere. Integer types do not depend on
// order at all (wrap-around arithmetic): the modes leave them alone.
#pragma once

#include <cstddef>

#include "weft.h"

namespace weft {

// Whether rank order can change (dt, op)'s result: a float type with SUM,
// AVG, PROD, MIN or MAX.
bool orderSensitive(weft_datatype_t dt, weft_op_t op);

// dst[i] = the fold of srcs[0][i], ..., srcs[n-1][i] as above (exact:
// `exact`), AVG's division by n included. dst may be identical to any of
// the srcs (not partially overlap them).
void foldHost(void* dst, const void* const* srcs, int n, size_t count, weft_datatype_t dt,
              weft_op_t op, bool exact);

}  // namespace weft
