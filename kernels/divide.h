// One element of AVG's last step, x / n, as the host executor computes it
// (kernels/cpu/reduce.cc, divideByCount), written once for the host and the
// device: the CUDA divide kernel (kernels/cuda/divide.cu) calls it, and a CPU
// test compares it with divideByCount for every datatype, so the CPU covers
// the arithmetic the GPU runs.
//
//  * integers: C++ division of the value (truncation toward zero); a signed
//    value divided by n > INT64_MAX is 0, except INT64_MIN / 2^63 = -1;
//  * floats: widened to the accumulation type, divided, rounded once.
#pragma once

#include <stdint.h>

#include <type_traits>

#include "kernels/ops.h"

namespace weft {

template <typename T>
WEFT_HD inline T divideOne(T x, uint64_t n) {
  if constexpr (std::is_integral<T>::value) {
    if constexpr (std::is_signed<T>::value) {
      if (n > static_cast<uint64_t>(INT64_MAX))
        return (static_cast<int64_t>(x) == INT64_MIN && n == (uint64_t{1} << 63)) ? T(-1) : T(0);
      return static_cast<T>(static_cast<int64_t>(x) / static_cast<int64_t>(n));
    } else {
      return static_cast<T>(static_cast<uint64_t>(x) / n);
    }
  } else {
    using A = Arith<T>;
    return A::fromAcc(A::toAcc(x) / static_cast<typename A::Acc>(n));
  }
}

}  // namespace weft
