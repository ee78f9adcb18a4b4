// Test data for every (datatype, op): inputs that depend on rank and index
// and are small integers, so every partial result is exact in every type
// (fp8 included) and the expected value is known exactly, whatever order the
// algorithm reduces in. Integer overflow is only reached by PROD, whose
// wrap-around is order independent.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/ops.h"
#include "weft.h"

namespace wtest {

inline size_t eltSize(weft_datatype_t dt) {
  switch (dt) {
    case WEFT_INT8: case WEFT_UINT8: case WEFT_FP8_E4M3: case WEFT_FP8_E5M2: return 1;
    case WEFT_FLOAT16: case WEFT_BFLOAT16: return 2;
    case WEFT_INT32: case WEFT_UINT32: case WEFT_FLOAT32: return 4;
    default: return 8;
  }
}

inline bool isUnsigned(weft_datatype_t dt) {
  return dt == WEFT_UINT8 || dt == WEFT_UINT32 || dt == WEFT_UINT64;
}

// The input of `rank` (of n) at index i.
inline int64_t inputValue(weft_datatype_t dt, weft_op_t op, int rank, int n, size_t i) {
  const int64_t h = static_cast<int64_t>((i * 2654435761u) >> 7);
  switch (op) {
    case WEFT_SUM:
      if (dt == WEFT_FP8_E5M2) return (rank + h) % 2;  // sums <= 8: exact in e5m2
      return isUnsigned(dt) ? (rank * 7 + h) % 4 : (rank * 7 + h) % 5 - 2;
    case WEFT_PROD: {
      int64_t k = (rank + h) % 3;
      if (isUnsigned(dt)) return k == 0 ? 2 : 1;
      return k == 0 ? 2 : (k == 1 ? 1 : -1);
    }
    case WEFT_MIN:
    case WEFT_MAX: return isUnsigned(dt) ? (rank * 5 + h) % 7 : (rank * 5 + h) % 7 - 3;
    case WEFT_AVG: {
      // A base value plus +1/-1 pairs that cancel, so the mean is exact.
      int64_t base = isUnsigned(dt) ? 1 + h % 3 : h % 3 - 1;
      if (n % 2 == 1 && rank == n - 1) return base;
      return base + (rank % 2 == 0 ? 1 : -1);
    }
    case WEFT_BAND:
    case WEFT_BOR:
    case WEFT_BXOR:
      // 7 bits, so every integer type holds them; each rank sets and clears
      // different bits.
      return ((rank * 37 + h) % 128) | (int64_t{1} << (rank % 7));
    default: return 0;
  }
}

inline int64_t expectedValue(weft_datatype_t dt, weft_op_t op, int n, size_t i) {
  int64_t acc = inputValue(dt, op, 0, n, i);
  for (int r = 1; r < n; ++r) {
    int64_t v = inputValue(dt, op, r, n, i);
    switch (op) {
      case WEFT_SUM: case WEFT_AVG: acc += v; break;
      case WEFT_PROD: acc *= v; break;
      case WEFT_MIN: acc = v < acc ? v : acc; break;
      case WEFT_MAX: acc = v > acc ? v : acc; break;
      case WEFT_BAND: acc &= v; break;
      case WEFT_BOR: acc |= v; break;
      case WEFT_BXOR: acc ^= v; break;
      default: break;
    }
  }
  if (op == WEFT_AVG) acc /= n;
  return acc;
}

inline void store(void* buf, size_t i, weft_datatype_t dt, int64_t v) {
  using namespace weft;
  switch (dt) {
    case WEFT_INT8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case WEFT_UINT8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case WEFT_INT32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case WEFT_UINT32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v); break;
    case WEFT_INT64: static_cast<int64_t*>(buf)[i] = v; break;
    case WEFT_UINT64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(v); break;
    case WEFT_FLOAT16: static_cast<half_t*>(buf)[i] = floatToHalf(static_cast<float>(v)); break;
    case WEFT_FLOAT32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case WEFT_FLOAT64: static_cast<double*>(buf)[i] = static_cast<double>(v); break;
    case WEFT_BFLOAT16: static_cast<bf16_t*>(buf)[i] = floatToBf16(static_cast<float>(v)); break;
    case WEFT_FP8_E4M3: static_cast<fp8e4m3_t*>(buf)[i] = floatToFp8e4m3(static_cast<float>(v)); break;
    case WEFT_FP8_E5M2: static_cast<fp8e5m2_t*>(buf)[i] = floatToFp8e5m2(static_cast<float>(v)); break;
    default: break;
  }
}

// The element as stored, compared bit for bit with what `v` stores as.
inline bool equals(const void* buf, size_t i, weft_datatype_t dt, int64_t v) {
  unsigned char want[8] = {0};
  store(want, 0, dt, v);
  return memcmp(static_cast<const unsigned char*>(buf) + i * eltSize(dt), want, eltSize(dt)) == 0;
}

inline const weft_datatype_t kAllTypes[] = {WEFT_INT8,    WEFT_UINT8,    WEFT_INT32,
                                            WEFT_UINT32,  WEFT_INT64,    WEFT_UINT64,
                                            WEFT_FLOAT16, WEFT_FLOAT32,  WEFT_FLOAT64,
                                            WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_FP8_E5M2};
inline const weft_op_t kAllOps[] = {WEFT_SUM, WEFT_PROD, WEFT_MAX, WEFT_MIN,
                                    WEFT_AVG, WEFT_BAND, WEFT_BOR, WEFT_BXOR};

inline bool isBitwise(weft_op_t op) { return op == WEFT_BAND || op == WEFT_BOR || op == WEFT_BXOR; }
inline bool isInteger(weft_datatype_t dt) { return dt <= WEFT_UINT64; }
// Whether weft reduces dt with op: bitwise ops take integer types only.
inline bool opApplies(weft_datatype_t dt, weft_op_t op) { return !isBitwise(op) || isInteger(dt); }

}  // namespace wtest
