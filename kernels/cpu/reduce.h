// The host reduction executor: element-wise reductions for every
// (datatype, op) of the API, vectorized (AVX2 / F16C / AVX-512 where the CPU
// has them, portable loops otherwise), chosen once at run time.
//
// Arithmetic: integer SUM/PROD wrap around (two's complement); float16,
// bfloat16 and fp8 are widened to float, combined, and rounded back to
// nearest-even (fp8 saturates to the largest finite value, as CUDA's
// __NV_SATFINITE does for NCCL); MIN/MAX follow IEEE fmin/fmax (a NaN loses
// to a number). AVG reduces as SUM; divideByCount finishes it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft.h"

namespace weft {

size_t datatypeSize(weft_datatype_t dt);
const char* datatypeName(weft_datatype_t dt);  // "float", "half", ... (nccl-tests names)
const char* opName(weft_op_t op);  // "sum", "prod", "max", "min", "avg", "band", "bor", "bxor"

// Whether (dt, op) is a reduction weft computes: every datatype with SUM,
// PROD, MAX, MIN and AVG; BAND, BOR and BXOR on integer types only.
bool opSupported(weft_datatype_t dt, weft_op_t op);

// dst[i] = op(a[i], b[i]) for i < count. dst may equal a or b (not partially
// overlap). AVG acts as SUM.
void reduceHost(void* dst, const void* a, const void* b, size_t count, weft_datatype_t dt,
                weft_op_t op);
// dst[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]), nsrc >= 1, left to right,
// rounding narrow types once at the end (accumulated in float). dst may
// equal srcs[0].
void reduceHostN(void* dst, const void* const* srcs, int nsrc, size_t count, weft_datatype_t dt,
                 weft_op_t op);
// dst[i] = src[i] * scalar (one element of dt), PROD's arithmetic. dst may
// equal src (not partially overlap).
void scaleHost(void* dst, const void* src, size_t count, weft_datatype_t dt, const void* scalar);
// dst[i] /= n (integer division for integer types, rounded for narrow floats).
void divideByCount(void* dst, size_t count, weft_datatype_t dt, uint64_t n);

// memcpy with non-temporal stores (AVX2), for outputs far larger than the
// caches: no read of the destination first, nothing evicted. The buffers
// must not overlap.
void copyHostStreaming(void* dst, const void* src, size_t bytes);

// The instruction set chosen at run time: "avx512", "avx2", or "portable".
const char* hostReduceIsa();

}  // namespace weft
