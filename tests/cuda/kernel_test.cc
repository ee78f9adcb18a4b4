// [cuda] The CUDA kernels against the host executor, bit for bit (NaN for
// NaN: a NaN's payload and sign may differ): every (datatype, op), 1 to 3 sources, reduce-and-copy,
// offsets that exercise the scalar head and tail, the vector body, and copy-if-ok. Skipped (with
// the reason) without a device; the split the kernels use is tested on the CPU in rules_test.cc,
// the arithmetic in tests/kernels.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/reduce.h"
#include "kernels/ops.h"
#include "tests/cuda/device_util.h"

#if WEFT_HAS_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/reduce.h"
using namespace weft::cuda;
#endif

using namespace weft;

#if WEFT_HAS_CUDA
namespace {

// Random bytes, with integer-like floats kept finite for the narrow types by
// using every bit pattern: NaNs and infinities included on purpose, since
// the two executors must agree on them too.
std::vector<uint8_t> randomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

bool isNanAt(const uint8_t* p, weft_datatype_t dt) {
  auto ld = [p](auto v) {
    memcpy(&v, p, sizeof v);
    return v;
  };
  switch (dt) {
    case WEFT_FLOAT16:
      return std::isnan(halfToFloat(ld(half_t{})));
    case WEFT_BFLOAT16:
      return std::isnan(bf16ToFloat(ld(bf16_t{})));
    case WEFT_FP8_E4M3:
      return std::isnan(fp8e4m3ToFloat(ld(fp8e4m3_t{})));
    case WEFT_FP8_E5M2:
      return std::isnan(fp8e5m2ToFloat(ld(fp8e5m2_t{})));
    case WEFT_FLOAT32:
      return std::isnan(ld(0.0f));
    case WEFT_FLOAT64:
      return std::isnan(ld(0.0));
    default:
      return false;
  }
}

std::string hex(const uint8_t* p, size_t n) {
  std::string s = "0x";
  char b[3];
  for (size_t i = n; i-- > 0;) {  // little-endian: the element's value
    snprintf(b, sizeof b, "%02x", p[i]);
    s += b;
  }
  return s;
}

// "" when got equals want element for element, NaN for NaN: a NaN's payload
// and sign are not part of the contract (x86 propagates an operand's, the
// GPU gives its canonical NaN; widening a signalling NaN quiets it). Else
// the first element that differs, with the sources'.
std::string compareElems(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                         const std::vector<std::vector<uint8_t>>& src, weft_datatype_t dt,
                         size_t elt) {
  for (size_t i = 0; i < want.size(); i += elt) {
    if (memcmp(&got[i], &want[i], elt) == 0) continue;
    if (isNanAt(&got[i], dt) && isNanAt(&want[i], dt)) continue;
    std::string m = "element " + std::to_string(i / elt) + ": got " + hex(&got[i], elt) +
                    ", want " + hex(&want[i], elt) + ", sources";
    for (const auto& s : src) m += " " + hex(&s[i], elt);
    return m;
  }
  return "";
}

}  // namespace

TEST_CASE("CUDA kernels match the host executor for every (datatype, op)", "[cuda]") {
  if (!haveDevice()) return;
  const size_t kCount = 4099;  // odd: a tail for every element size
  const size_t kMaxBytes = (kCount + 32) * 8;
  uint8_t* dev = nullptr;
  REQUIRE(cudaMalloc(&dev, 5 * kMaxBytes) == cudaSuccess);
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  for (int dt = 0; dt < WEFT_NUM_DATATYPES; ++dt) {
    const size_t elt = datatypeSize(static_cast<weft_datatype_t>(dt));
    for (int op = 0; op < WEFT_NUM_OPS; ++op) {
      if (!opSupported(static_cast<weft_datatype_t>(dt), static_cast<weft_op_t>(op))) {
        // A bitwise op on a floating type: the kernel refuses it too.
        const void* one[1] = {dev};
        CHECK(reduceOnStream(dev, nullptr, one, 1, 1, static_cast<weft_datatype_t>(dt),
                             static_cast<weft_op_t>(op), stream) != 0);
        continue;
      }
      for (int nsrc = 1; nsrc <= 3; ++nsrc) {
        for (size_t off : {size_t{0}, size_t{1}, size_t{3}}) {  // in elements
          INFO(datatypeName(static_cast<weft_datatype_t>(dt))
               << " " << opName(static_cast<weft_op_t>(op)) << " nsrc " << nsrc << " offset "
               << off);
          const size_t bytes = kCount * elt;
          std::vector<std::vector<uint8_t>> src;
          const void* dsrc[3];
          const void* hsrc[3];
          for (int k = 0; k < nsrc; ++k) {
            src.push_back(randomBytes(bytes, static_cast<uint32_t>(dt * 1000 + op * 10 + k)));
            uint8_t* d = dev + k * kMaxBytes + off * elt;
            REQUIRE(cudaMemcpy(d, src[k].data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
            dsrc[k] = d;
          }
          for (int k = 0; k < nsrc; ++k) hsrc[k] = src[k].data();
          uint8_t* d0 = dev + 3 * kMaxBytes + off * elt;
          uint8_t* d1 = dev + 4 * kMaxBytes + off * elt;
          REQUIRE(reduceOnStream(d0, d1, dsrc, nsrc, kCount, static_cast<weft_datatype_t>(dt),
                                 static_cast<weft_op_t>(op), stream) == 0);
          REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
          std::vector<uint8_t> want(bytes), got0(bytes), got1(bytes);
          reduceHostN(want.data(), hsrc, nsrc, kCount, static_cast<weft_datatype_t>(dt),
                      static_cast<weft_op_t>(op));
          REQUIRE(cudaMemcpy(got0.data(), d0, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
          REQUIRE(cudaMemcpy(got1.data(), d1, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
          const auto dtype = static_cast<weft_datatype_t>(dt);
          CHECK(compareElems(got0, want, src, dtype, elt) == "");
          CHECK(compareElems(got1, want, src, dtype, elt) == "");
        }
      }
    }
  }
  cudaStreamDestroy(stream);
  cudaFree(dev);
}

TEST_CASE("CUDA copy kernels: any offset, and copy-if-ok leaves the buffer on a failure",
          "[cuda]") {
  if (!haveDevice()) return;
  const size_t n = 1 << 20;
  std::vector<uint8_t> a = randomBytes(n, 7), back(n);
  uint8_t *src = nullptr, *dst = nullptr;
  int32_t* status = nullptr;
  REQUIRE(cudaMalloc(&src, n + 64) == cudaSuccess);
  REQUIRE(cudaMalloc(&dst, n + 64) == cudaSuccess);
  REQUIRE(cudaHostAlloc(&status, sizeof(int32_t), cudaHostAllocMapped) == cudaSuccess);
  for (size_t so : {0, 1, 5}) {
    for (size_t dso : {0, 1, 7}) {
      REQUIRE(cudaMemcpy(src + so, a.data(), n - 13, cudaMemcpyHostToDevice) == cudaSuccess);
      REQUIRE(cudaMemset(dst, 0, n + 64) == cudaSuccess);
      REQUIRE(copyOnStream(dst + dso, src + so, n - 13, nullptr) == 0);
      REQUIRE(cudaMemcpy(back.data(), dst + dso, n - 13, cudaMemcpyDeviceToHost) == cudaSuccess);
      CHECK(memcmp(back.data(), a.data(), n - 13) == 0);
    }
  }
  // The copies below read src from offset 0.
  REQUIRE(cudaMemcpy(src, a.data(), n, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemset(dst, 0x5a, n) == cudaSuccess);
  *status = 1;  // the collective failed: nothing may be written
  REQUIRE(copyIfOkOnStream(dst, src, n, status, nullptr) == 0);
  REQUIRE(cudaMemcpy(back.data(), dst, n, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == std::vector<uint8_t>(n, 0x5a));
  *status = 0;
  REQUIRE(copyIfOkOnStream(dst, src, n, status, nullptr) == 0);
  REQUIRE(cudaMemcpy(back.data(), dst, n, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(memcmp(back.data(), a.data(), n - 13) == 0);
  // Bad arguments launch nothing.
  CHECK(reduceOnStream(dst, nullptr, nullptr, 1, 4, WEFT_FLOAT32, WEFT_SUM, nullptr) != 0);
  const void* one[1] = {src + 1};
  CHECK(reduceOnStream(dst, nullptr, one, 1, 4, WEFT_FLOAT32, WEFT_SUM, nullptr) !=
        0);  // misaligned
  cudaFree(src);
  cudaFree(dst);
  cudaFreeHost(status);
}
#else
TEST_CASE("CUDA kernels match the host executor for every (datatype, op)", "[cuda]") {
  WARN("SKIP [cuda]: this weft was built without CUDA");
}
#endif
