// What the reproducible modes' tests share (docs/reproducibility.md): data
// chosen to expose summation order, and the serial reference of the
// ordered mode, written from the definition (a plain left fold over ranks
// in the accumulation type, AVG divided there, one rounding) rather than
// with the kernels it checks.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "weft.h"

namespace repro {

inline const weft_datatype_t kFloatTypes[] = {WEFT_FLOAT32,  WEFT_FLOAT64,  WEFT_FLOAT16,
                                              WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_FP8_E5M2};

// A finite value of T from a double, through the type's own rounding.
template <typename T>
T fromDouble(double x) {
  using A = weft::Arith<T>;
  return A::fromAcc(static_cast<typename A::Acc>(x));
}

// Order-exposing values: magnitudes over a wide exponent range (wider for
// wider types), both signs, exact zeros of both signs, and cancelling
// pairs (rank r gets x where rank r+1 gets -x), so that any change in
// grouping changes some sums. Finite only (NaN and infinity rules are the
// kernels' tests' business). For PROD, values near 1.
template <typename T>
void fillOrderExposing(T* out, size_t count, int rank, uint64_t seed, bool forProd) {
  std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(rank) * 7919u);
  const int span = sizeof(T) >= 4 ? 40 : sizeof(T) == 2 ? 12 : 4;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t u = rng();
    double x;
    if (forProd) {
      x = 1.0 + (static_cast<double>(u % 2001) - 1000.0) / 8000.0;
    } else {
      const int e = static_cast<int>(u % static_cast<uint64_t>(2 * span + 1)) - span;
      x = std::ldexp(1.0 + static_cast<double>((u >> 16) % 4096) / 4096.0, e);
      if ((u >> 40) & 1) x = -x;
      switch ((u >> 44) % 16) {
        case 0:
          x = 0.0;
          break;
        case 1:
          x = -0.0;
          break;
        case 2: {  // the same element on every rank: big, alternating in sign
          std::mt19937_64 g(seed + i);
          x = std::ldexp(1.0 + static_cast<double>(g() % 1024) / 1024.0, span / 2);
          if (rank % 2) x = -x;
          break;
        }
        default:
          break;
      }
    }
    out[i] = fromDouble<T>(x);
  }
}

// The ordered mode's value of one element from the n ranks' values.
template <typename T>
T orderedFold(const T* vals, int n, weft_op_t op) {
  using A = weft::Arith<T>;
  using Acc = typename A::Acc;
  Acc acc = A::toAcc(vals[0]);
  for (int k = 1; k < n; ++k) {
    const Acc x = A::toAcc(vals[k]);
    acc = op == WEFT_PROD ? acc * x : acc + x;
  }
  if (op == WEFT_AVG) acc = acc / static_cast<Acc>(n);
  return A::fromAcc(acc);
}

// Calls f.template operator()<T>() with the storage type of dt.
template <typename F>
void withType(weft_datatype_t dt, F&& f) {
  switch (dt) {
    case WEFT_FLOAT32:
      f(float{});
      break;
    case WEFT_FLOAT64:
      f(double{});
      break;
    case WEFT_FLOAT16:
      f(weft::half_t{});
      break;
    case WEFT_BFLOAT16:
      f(weft::bf16_t{});
      break;
    case WEFT_FP8_E4M3:
      f(weft::fp8e4m3_t{});
      break;
    case WEFT_FP8_E5M2:
      f(weft::fp8e5m2_t{});
      break;
    default:
      break;
  }
}

}  // namespace repro
