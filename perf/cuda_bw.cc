// weft-cuda-bw: the CUDA reduce kernel's bandwidth against cudaMemcpy
// device-to-device, measured in the same run on the same buffers.
//
//   weft-cuda-bw [bytes per buffer, default 1G] [iterations, default 20]
//
// Bandwidth counts bytes read plus bytes written: a copy of N bytes moves
// 2N, a 2-input reduce 3N. The target (issue 5) is reduce >= 90% of copy.
// Also checks a sample of the reduction's result. Exit 0 when the runs
// succeed (the ratio is reported, not enforced), 1 on a CUDA error or a
// wrong result, 2 without a device.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cuda/reduce.h"
#include "kernels/ops.h"

namespace {

#define CK(call)                                                                     \
  do {                                                                               \
    cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "weft-cuda-bw: %s: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

struct Kind {
  weft_datatype_t dt;
  const char* name;
  size_t size;
};

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{1} << 30;
  int iters = 20;
  if (argc > 1) bytes = std::strtoull(argv[1], nullptr, 0);
  if (argc > 2) iters = std::atoi(argv[2]);
  if (bytes < 1024 || iters < 1) {
    std::fprintf(stderr, "usage: weft-cuda-bw [bytes >= 1024] [iterations >= 1]\n");
    return 1;
  }
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    std::printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "none");
    return 2;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# device 0: %s, %d SMs; %zu bytes per buffer, %d iterations\n", prop.name,
              prop.multiProcessorCount, bytes, iters);
  char *a = nullptr, *b = nullptr, *d = nullptr;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMalloc(&d, bytes));
  CK(cudaMemset(a, 0x3c, bytes));  // small positive values in every float format
  CK(cudaMemset(b, 0x38, bytes));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));

  CK(cudaMemcpyAsync(d, a, bytes, cudaMemcpyDeviceToDevice, s));  // warm-up
  CK(cudaEventRecord(t0, s));
  for (int i = 0; i < iters; ++i) CK(cudaMemcpyAsync(d, a, bytes, cudaMemcpyDeviceToDevice, s));
  CK(cudaEventRecord(t1, s));
  CK(cudaEventSynchronize(t1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, t0, t1));
  const double copyGBs = 2.0 * static_cast<double>(bytes) * iters / (ms * 1e-3) / 1e9;
  std::printf("memcpy D2D          %8.1f GB/s (read + write)\n", copyGBs);

  const Kind kinds[] = {{WEFT_FLOAT32, "float", 4}, {WEFT_BFLOAT16, "bfloat16", 2},
                        {WEFT_FLOAT16, "half", 2},  {WEFT_FP8_E4M3, "f8e4m3", 1},
                        {WEFT_INT32, "int32", 4},   {WEFT_FLOAT64, "double", 8}};
  bool ok = true;
  double floatRatio = 0;
  for (const Kind& k : kinds) {
    const size_t count = bytes / k.size;
    const void* srcs[2] = {a, b};
    int r = weft::cuda::reduceOnStream(d, nullptr, srcs, 2, count, k.dt, WEFT_SUM, s);
    if (r != 0) {
      std::fprintf(stderr, "weft-cuda-bw: reduce %s: %s\n", k.name, weft::cuda::cudaErrorText(r));
      return 1;
    }
    CK(cudaEventRecord(t0, s));
    for (int i = 0; i < iters; ++i)
      weft::cuda::reduceOnStream(d, nullptr, srcs, 2, count, k.dt, WEFT_SUM, s);
    CK(cudaEventRecord(t1, s));
    CK(cudaEventSynchronize(t1));
    CK(cudaGetLastError());
    CK(cudaEventElapsedTime(&ms, t0, t1));
    const double gbs = 3.0 * static_cast<double>(count * k.size) * iters / (ms * 1e-3) / 1e9;
    // Check the first and last elements against the host functors.
    unsigned char ha[8], hb[8], hd[8], want[8];
    bool right = true;
    for (size_t at : {size_t{0}, count - 1}) {
      CK(cudaMemcpy(ha, a + at * k.size, k.size, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hb, b + at * k.size, k.size, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hd, d + at * k.size, k.size, cudaMemcpyDeviceToHost));
      switch (k.dt) {
        case WEFT_FLOAT32: {
          float x, y;
          std::memcpy(&x, ha, 4);
          std::memcpy(&y, hb, 4);
          float z = weft::Sum<float>()(x, y);
          std::memcpy(want, &z, 4);
          break;
        }
        case WEFT_BFLOAT16: {
          weft::bf16_t x, y;
          std::memcpy(&x, ha, 2);
          std::memcpy(&y, hb, 2);
          weft::bf16_t z = weft::Sum<weft::bf16_t>()(x, y);
          std::memcpy(want, &z, 2);
          break;
        }
        case WEFT_FLOAT16: {
          weft::half_t x, y;
          std::memcpy(&x, ha, 2);
          std::memcpy(&y, hb, 2);
          weft::half_t z = weft::Sum<weft::half_t>()(x, y);
          std::memcpy(want, &z, 2);
          break;
        }
        case WEFT_FP8_E4M3: {
          weft::fp8e4m3_t x{ha[0]}, y{hb[0]};
          want[0] = weft::Sum<weft::fp8e4m3_t>()(x, y).bits;
          break;
        }
        case WEFT_INT32: {
          int32_t x, y;
          std::memcpy(&x, ha, 4);
          std::memcpy(&y, hb, 4);
          int32_t z = weft::Sum<int32_t>()(x, y);
          std::memcpy(want, &z, 4);
          break;
        }
        default: {
          double x, y;
          std::memcpy(&x, ha, 8);
          std::memcpy(&y, hb, 8);
          double z = weft::Sum<double>()(x, y);
          std::memcpy(want, &z, 8);
          break;
        }
      }
      right = right && std::memcmp(hd, want, k.size) == 0;
    }
    ok = ok && right;
    if (k.dt == WEFT_FLOAT32) floatRatio = gbs / copyGBs;
    std::printf("reduce 2 x %-8s %8.1f GB/s (2 reads + write) = %5.1f%% of memcpy  result %s\n",
                k.name, gbs, 100.0 * gbs / copyGBs, right ? "ok" : "WRONG");
  }
  std::printf("# target: float reduce >= 90%% of memcpy: %s (%.1f%%)\n",
              floatRatio >= 0.9 ? "MET" : "NOT MET", 100.0 * floatRatio);
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  return ok ? 0 : 1;
}
