// divideOne (kernels/divide.h), the element the CUDA divide kernel runs,
// gives the host executor's divideByCount bits for every datatype, on random
// bit patterns (NaNs, infinities and integer extremes included) and divisors
// from 2 to 2^64 - 1 (divideByCount leaves n <= 1 alone; so does the kernel).
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/reduce.h"
#include "kernels/divide.h"

using namespace weft;

namespace {

template <typename T>
void compareAll(weft_datatype_t dt) {
  std::mt19937_64 rng(1234 + static_cast<uint64_t>(dt));
  std::vector<T> in(4096);
  for (size_t i = 0; i < in.size(); ++i) {
    uint64_t bits = rng();
    if (i < 8) bits = i & 1 ? ~uint64_t{0} >> (i / 2) : uint64_t{1} << (63 - i);  // extremes
    memcpy(&in[i], &bits, sizeof(T));
  }
  for (uint64_t n : {uint64_t{2}, uint64_t{3}, uint64_t{7}, uint64_t{1000}, uint64_t{1} << 31,
                     uint64_t{1} << 63, ~uint64_t{0}}) {
    std::vector<T> want = in;
    divideByCount(want.data(), want.size(), dt, n);
    for (size_t i = 0; i < in.size(); ++i) {
      const T got = divideOne<T>(in[i], n);
      INFO(datatypeName(dt) << " n=" << n << " element " << i);
      REQUIRE(memcmp(&got, &want[i], sizeof(T)) == 0);
    }
  }
}

}  // namespace

TEST_CASE("divideOne matches divideByCount for every datatype", "[kernels][divide]") {
  compareAll<int8_t>(WEFT_INT8);
  compareAll<uint8_t>(WEFT_UINT8);
  compareAll<int32_t>(WEFT_INT32);
  compareAll<uint32_t>(WEFT_UINT32);
  compareAll<int64_t>(WEFT_INT64);
  compareAll<uint64_t>(WEFT_UINT64);
  compareAll<half_t>(WEFT_FLOAT16);
  compareAll<float>(WEFT_FLOAT32);
  compareAll<double>(WEFT_FLOAT64);
  compareAll<bf16_t>(WEFT_BFLOAT16);
  compareAll<fp8e4m3_t>(WEFT_FP8_E4M3);
  compareAll<fp8e5m2_t>(WEFT_FP8_E5M2);
}
