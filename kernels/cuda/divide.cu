// AVG's last step on the device: dst[i] = divideOne(dst[i], n)
// (kernels/divide.h, the host executor's arithmetic). One scalar kernel per
// datatype (12 instantiations); it runs once per AVG, after the reductions,
// so a grid-stride loop of plain loads is enough.
#include <cuda_runtime.h>

#include "kernels/cuda/reduce.h"
#include "kernels/divide.h"

namespace weft {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 1024;

template <typename T>
__global__ void __launch_bounds__(kThreads) divideKernel(T* d, size_t count, uint64_t n) {
  const size_t nth = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += nth)
    d[i] = divideOne<T>(d[i], n);
}

template <typename T>
int launch(void* dst, size_t count, uint64_t n, cudaStream_t s) {
  if (reinterpret_cast<uintptr_t>(dst) % sizeof(T)) return cudaErrorInvalidValue;
  size_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  divideKernel<T>
      <<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(static_cast<T*>(dst), count, n);
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
const void* fn() {
  return reinterpret_cast<const void*>(divideKernel<T>);
}

}  // namespace

int loadDivideKernels() {
  const void* fns[] = {fn<int8_t>(),  fn<uint8_t>(),  fn<int32_t>(),   fn<uint32_t>(),
                       fn<int64_t>(), fn<uint64_t>(), fn<half_t>(),    fn<float>(),
                       fn<double>(),  fn<bf16_t>(),   fn<fp8e4m3_t>(), fn<fp8e5m2_t>()};
  return loadFunctions(fns, sizeof fns / sizeof fns[0]);
}

int divideOnStream(void* dst, size_t count, weft_datatype_t dt, uint64_t n, void* stream) {
  if (!dst && count) return cudaErrorInvalidValue;
  if (count == 0 || n <= 1) return cudaSuccess;  // as divideByCount
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dt) {
    case WEFT_INT8:
      return launch<int8_t>(dst, count, n, s);
    case WEFT_UINT8:
      return launch<uint8_t>(dst, count, n, s);
    case WEFT_INT32:
      return launch<int32_t>(dst, count, n, s);
    case WEFT_UINT32:
      return launch<uint32_t>(dst, count, n, s);
    case WEFT_INT64:
      return launch<int64_t>(dst, count, n, s);
    case WEFT_UINT64:
      return launch<uint64_t>(dst, count, n, s);
    case WEFT_FLOAT16:
      return launch<half_t>(dst, count, n, s);
    case WEFT_FLOAT32:
      return launch<float>(dst, count, n, s);
    case WEFT_FLOAT64:
      return launch<double>(dst, count, n, s);
    case WEFT_BFLOAT16:
      return launch<bf16_t>(dst, count, n, s);
    case WEFT_FP8_E4M3:
      return launch<fp8e4m3_t>(dst, count, n, s);
    case WEFT_FP8_E5M2:
      return launch<fp8e5m2_t>(dst, count, n, s);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace cuda
}  // namespace weft
