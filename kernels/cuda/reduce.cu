// The CUDA reduction kernels behind kernels/cuda/reduce.h.
//
// One kernel template per (datatype, op): 66 instantiations (48 arithmetic,
// 18 bitwise on the six integer types), nothing more
// (the source count, the second destination and the copy-if-ok gate are run
// time parameters, uniform across the grid, so they cost no extra builds).
// A copy is the uint8 kernel with one source.
//
// Each thread walks a grid-stride loop over 16-byte vectors: every source's
// vector is loaded, widened to the accumulation type, combined with the
// functors of kernels/ops.h (the host executor's own), rounded once and
// stored as one vector. The unaligned head and the tail run as scalars
// (kernels/cuda/vector_plan.h says how a range splits).
#include <cuda_runtime.h>

#include <atomic>
#include <type_traits>

#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/vector_plan.h"
#include "kernels/ops.h"

namespace weft {
namespace cuda {
namespace {

constexpr int kThreads = 512;
// Enough resident blocks per SM to keep every load unit busy on a purely
// memory-bound loop; more only adds scheduling.
constexpr int kBlocksPerSm = 4;

struct ReduceParams {
  const void* srcs[kMaxReduceSources];
  void* dst0;
  void* dst1;                    // NULL unless reduce-and-copy
  const volatile int32_t* gate;  // NULL, or skip everything unless *gate == 0
  int nsrc;
  size_t head, vecs, tail;
};

template <typename T, int OP>
__global__ void __launch_bounds__(kThreads) reduceKernel(ReduceParams p) {
  using A = Arith<T>;
  using Acc = typename A::Acc;
  using F = cpu::OpFunctor<T, OP>;
  constexpr int kPer = static_cast<int>(kVectorBytes / sizeof(T));
  if (p.gate) {
    __shared__ int32_t gate;
    if (threadIdx.x == 0) gate = *p.gate;
    __syncthreads();
    if (gate != 0) return;
  }
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t nth = static_cast<size_t>(gridDim.x) * blockDim.x;
  T* d0 = static_cast<T*>(p.dst0);
  T* d1 = static_cast<T*>(p.dst1);

  // One source is a copy: the element as it is (no widening and rounding
  // back, which would saturate an fp8 infinity or quiet a NaN), as the host
  // executor does.
  auto scalar = [&](size_t i) {
    T r = static_cast<const T*>(p.srcs[0])[i];
    if (p.nsrc > 1) {
      Acc acc = A::toAcc(r);
      for (int k = 1; k < p.nsrc; ++k)
        acc = F::combine(acc, A::toAcc(static_cast<const T*>(p.srcs[k])[i]));
      r = A::fromAcc(acc);
    }
    d0[i] = r;
    if (d1) d1[i] = r;
  };
  for (size_t i = tid; i < p.head; i += nth) scalar(i);
  const size_t tailAt = p.head + p.vecs * kPer;
  for (size_t i = tid; i < p.tail; i += nth) scalar(tailAt + i);

  union Vec {
    uint4 raw;
    T e[kPer];
  };
  for (size_t v = tid; v < p.vecs; v += nth) {
    const size_t at = p.head + v * kPer;
    Vec in;
    in.raw = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.srcs[0]) + at);
    if (p.nsrc == 1) {
      *reinterpret_cast<uint4*>(d0 + at) = in.raw;
      if (d1) *reinterpret_cast<uint4*>(d1 + at) = in.raw;
      continue;
    }
    Acc acc[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) acc[j] = A::toAcc(in.e[j]);
    for (int k = 1; k < p.nsrc; ++k) {
      in.raw = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.srcs[k]) + at);
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[j] = F::combine(acc[j], A::toAcc(in.e[j]));
    }
    Vec out;
#pragma unroll
    for (int j = 0; j < kPer; ++j) out.e[j] = A::fromAcc(acc[j]);
    *reinterpret_cast<uint4*>(d0 + at) = out.raw;
    if (d1) *reinterpret_cast<uint4*>(d1 + at) = out.raw;
  }
}

__device__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spinWaitKernel(const volatile uint32_t* flag, uint32_t value, uint64_t timeoutNs,
                               volatile int32_t* timedOut) {
  const uint64_t start = globalTimerNs();
  while (static_cast<int32_t>(*flag - value) < 0) {
    if (globalTimerNs() - start > timeoutNs) {
      *timedOut = 1;
      return;
    }
    __nanosleep(2000);
  }
}

// Multiprocessors per device, read once per device (0 = not read yet).
std::atomic<int> gSmCount[64];

int gridFor(size_t work) {
  int dev = 0;
  int sms = 0;
  if (cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < 64) {
    sms = gSmCount[dev].load(std::memory_order_relaxed);
    if (sms == 0 &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess)
      gSmCount[dev].store(sms, std::memory_order_relaxed);
  }
  if (sms <= 0) sms = 1;
  const size_t want = (work + kThreads - 1) / kThreads;
  const size_t cap = static_cast<size_t>(sms) * kBlocksPerSm;
  return static_cast<int>(want < 1 ? 1 : want < cap ? want : cap);
}

template <typename T, int OP>
int launch(ReduceParams p, size_t count, cudaStream_t stream) {
  uintptr_t addrs[kMaxReduceSources + 2];
  int n = 0;
  for (int k = 0; k < p.nsrc; ++k) addrs[n++] = reinterpret_cast<uintptr_t>(p.srcs[k]);
  addrs[n++] = reinterpret_cast<uintptr_t>(p.dst0);
  if (p.dst1) addrs[n++] = reinterpret_cast<uintptr_t>(p.dst1);
  for (int i = 0; i < n; ++i)
    if (addrs[i] % sizeof(T)) return cudaErrorInvalidValue;  // a misaligned element
  const VecPlan plan = planVectors(addrs, n, count, sizeof(T));
  p.head = plan.head;
  p.vecs = plan.vecs;
  p.tail = plan.tail;
  const size_t work = plan.vecs > plan.head + plan.tail ? plan.vecs : plan.head + plan.tail;
  reduceKernel<T, OP><<<gridFor(work), kThreads, 0, stream>>>(p);
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int launchOp(ReduceParams p, size_t count, weft_op_t op, cudaStream_t s) {
  switch (op) {
    case WEFT_SUM:
    case WEFT_AVG:
      return launch<T, WEFT_SUM>(p, count, s);
    case WEFT_PROD:
      return launch<T, WEFT_PROD>(p, count, s);
    case WEFT_MAX:
      return launch<T, WEFT_MAX>(p, count, s);
    case WEFT_MIN:
      return launch<T, WEFT_MIN>(p, count, s);
    default:
      break;
  }
  if constexpr (std::is_integral<T>::value) {
    switch (op) {
      case WEFT_BAND:
        return launch<T, WEFT_BAND>(p, count, s);
      case WEFT_BOR:
        return launch<T, WEFT_BOR>(p, count, s);
      case WEFT_BXOR:
        return launch<T, WEFT_BXOR>(p, count, s);
      default:
        break;
    }
  }
  return cudaErrorInvalidValue;  // a bitwise op on a floating type, or no op at all
}

int dispatch(ReduceParams p, size_t count, weft_datatype_t dt, weft_op_t op, cudaStream_t s) {
  switch (dt) {
    case WEFT_INT8:
      return launchOp<int8_t>(p, count, op, s);
    case WEFT_UINT8:
      return launchOp<uint8_t>(p, count, op, s);
    case WEFT_INT32:
      return launchOp<int32_t>(p, count, op, s);
    case WEFT_UINT32:
      return launchOp<uint32_t>(p, count, op, s);
    case WEFT_INT64:
      return launchOp<int64_t>(p, count, op, s);
    case WEFT_UINT64:
      return launchOp<uint64_t>(p, count, op, s);
    case WEFT_FLOAT16:
      return launchOp<half_t>(p, count, op, s);
    case WEFT_FLOAT32:
      return launchOp<float>(p, count, op, s);
    case WEFT_FLOAT64:
      return launchOp<double>(p, count, op, s);
    case WEFT_BFLOAT16:
      return launchOp<bf16_t>(p, count, op, s);
    case WEFT_FP8_E4M3:
      return launchOp<fp8e4m3_t>(p, count, op, s);
    case WEFT_FP8_E5M2:
      return launchOp<fp8e5m2_t>(p, count, op, s);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

int reduceOnStream(void* dst0, void* dst1, const void* const* srcs, int nsrc, size_t count,
                   weft_datatype_t dt, weft_op_t op, void* stream) {
  if (nsrc < 1 || nsrc > kMaxReduceSources || !srcs || !dst0) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  ReduceParams p{};
  for (int k = 0; k < nsrc; ++k) {
    if (!srcs[k]) return cudaErrorInvalidValue;
    p.srcs[k] = srcs[k];
  }
  p.nsrc = nsrc;
  p.dst0 = dst0;
  p.dst1 = dst1;
  return dispatch(p, count, dt, op, static_cast<cudaStream_t>(stream));
}

int copyIfOkOnStream(void* dst, const void* src, size_t bytes, const volatile int32_t* status,
                     void* stream) {
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return cudaErrorInvalidValue;
  ReduceParams p{};
  p.srcs[0] = src;
  p.nsrc = 1;
  p.dst0 = dst;
  p.gate = status;
  return dispatch(p, bytes, WEFT_UINT8, WEFT_SUM, static_cast<cudaStream_t>(stream));
}

int copyOnStream(void* dst, const void* src, size_t bytes, void* stream) {
  return copyIfOkOnStream(dst, src, bytes, nullptr, stream);
}

int spinWaitOnStream(const volatile uint32_t* flag, uint32_t value, uint64_t timeoutNs,
                     volatile int32_t* timedOut, void* stream) {
  if (!flag || !timedOut) return cudaErrorInvalidValue;
  spinWaitKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(flag, value, timeoutNs, timedOut);
  return static_cast<int>(cudaGetLastError());
}

namespace {

template <typename T>
int loadReduceKernels() {
  const void* fns[] = {reinterpret_cast<const void*>(reduceKernel<T, WEFT_SUM>),
                       reinterpret_cast<const void*>(reduceKernel<T, WEFT_PROD>),
                       reinterpret_cast<const void*>(reduceKernel<T, WEFT_MAX>),
                       reinterpret_cast<const void*>(reduceKernel<T, WEFT_MIN>)};
  if (int e = loadFunctions(fns, 4)) return e;
  if constexpr (std::is_integral<T>::value) {
    const void* bit[] = {reinterpret_cast<const void*>(reduceKernel<T, WEFT_BAND>),
                         reinterpret_cast<const void*>(reduceKernel<T, WEFT_BOR>),
                         reinterpret_cast<const void*>(reduceKernel<T, WEFT_BXOR>)};
    return loadFunctions(bit, 3);
  }
  return cudaSuccess;
}

}  // namespace

int loadFunctions(const void* const* fns, size_t n) {
  cudaFuncAttributes a;
  for (size_t i = 0; i < n; ++i)
    if (cudaError_t e = cudaFuncGetAttributes(&a, fns[i])) return static_cast<int>(e);
  return cudaSuccess;
}

int loadKernels() {
  const int errs[] = {loadReduceKernels<int8_t>(),
                      loadReduceKernels<uint8_t>(),
                      loadReduceKernels<int32_t>(),
                      loadReduceKernels<uint32_t>(),
                      loadReduceKernels<int64_t>(),
                      loadReduceKernels<uint64_t>(),
                      loadReduceKernels<half_t>(),
                      loadReduceKernels<float>(),
                      loadReduceKernels<double>(),
                      loadReduceKernels<bf16_t>(),
                      loadReduceKernels<fp8e4m3_t>(),
                      loadReduceKernels<fp8e5m2_t>(),
                      loadDivideKernels()};
  for (int x : errs)
    if (x) return x;
  const void* spin = reinterpret_cast<const void*>(spinWaitKernel);
  return loadFunctions(&spin, 1);
}

const char* cudaErrorText(int err) { return cudaGetErrorString(static_cast<cudaError_t>(err)); }

}  // namespace cuda
}  // namespace weft
