// The reference the schedule tests check against: int32 inputs in -3..3,
// so that SUM and PROD wrap around the same in any order (as the kernels
// do) and the expected value is exact whatever the reduction tree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft.h"

namespace wref {

inline int32_t value(int rank, size_t i, uint64_t salt) {
  return static_cast<int32_t>(((rank + 1) * 2654435761u + i * 40503u + salt) % 7) - 3;
}

inline int32_t combine(weft_op_t op, int32_t x, int32_t y) {
  switch (op) {
    case WEFT_SUM:
    case WEFT_AVG: return static_cast<int32_t>(static_cast<uint32_t>(x) + static_cast<uint32_t>(y));
    case WEFT_PROD: return static_cast<int32_t>(static_cast<uint32_t>(x) * static_cast<uint32_t>(y));
    case WEFT_MAX: return x > y ? x : y;
    case WEFT_MIN: return x < y ? x : y;
    default: return 0;
  }
}

// Element idx of the reduction over n ranks.
inline int32_t reduced(weft_op_t op, int n, size_t idx, uint64_t salt) {
  int32_t acc = value(0, idx, salt);
  for (int r = 1; r < n; ++r) acc = combine(op, acc, value(r, idx, salt));
  if (op == WEFT_AVG) acc /= n;
  return acc;
}

}  // namespace wref
