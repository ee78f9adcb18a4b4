// The CUDA reduction executor, callable from host C++ (no CUDA header
// needed): kernels enqueued on a stream for every (datatype, op) of weft.h,
// with the arithmetic of kernels/ops.h, the same functors the host
// executor (kernels/cpu/reduce.h) runs.
//
// Every call only enqueues work: it returns once the kernel is launched, and
// the result is there when the stream reaches it. Buffers are device memory
// (or anything the device can address: managed, mapped pinned host memory),
// each aligned to its element size; any element offset and count work.
// Return values are cudaError_t codes (0 = cudaSuccess), turned into a
// message by cudaErrorText; a bad argument gives cudaErrorInvalidValue
// (1) and launches nothing. Built only when weft is built with CUDA.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "weft.h"

namespace weft {
namespace cuda {

// Sources of one n-ary reduction at most (kernel parameters carry them).
constexpr int kMaxReduceSources = 8;

// dst0[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]) for i < count, and the
// same value to dst1[i] when dst1 is not NULL (reduce-and-copy: a ring step
// that keeps its result and sends it on). Narrow floats are combined in
// float and rounded once. AVG reduces as SUM. A destination may equal a
// source (not partially overlap it). 1 <= nsrc <= kMaxReduceSources.
int reduceOnStream(void* dst0, void* dst1, const void* const* srcs, int nsrc, size_t count,
                   weft_datatype_t dt, weft_op_t op, void* stream);

// dst[0, bytes) = src[0, bytes) by a kernel (not the copy engine); the two
// must not overlap.
int copyOnStream(void* dst, const void* src, size_t bytes, void* stream);

// As copyOnStream, but only when *status is 0 when the kernel runs: a
// collective that failed on the host leaves the user's buffer untouched.
// `status` is device-addressable (mapped pinned host memory).
int copyIfOkOnStream(void* dst, const void* src, size_t bytes, const volatile int32_t* status,
                     void* stream);

// Holds the stream until *flag - value >= 0 (as signed 32-bit), by one
// spinning thread; after timeoutNs it gives up and sets *timedOut to 1.
// The fallback where the driver lacks stream memory operations.
int spinWaitOnStream(const volatile uint32_t* flag, uint32_t value, uint64_t timeoutNs,
                     volatile int32_t* timedOut, void* stream);

// dst[i] = dst[i] / n for i < count (AVG's last step), with the host
// executor's arithmetic (kernels/divide.h); nothing when n <= 1.
int divideOnStream(void* dst, size_t count, weft_datatype_t dt, uint64_t n, void* stream);

// Loads every kernel of this file and of divide.cu into the current
// device's context (cudaFuncGetAttributes on each). Under lazy module
// loading (CUDA_MODULE_LOADING=LAZY, CUDA 12's default) a kernel's first
// launch loads it, and loading may wait until the device is idle: with a
// stream held by a flag wait (spinWaitOnStream, cuStreamWaitValue32) that
// only this launch's work would release, that is a deadlock. So weft loads
// them once per device before it holds any stream (src/cuda/runtime.h,
// loadKernelsFor).
int loadKernels();
int loadDivideKernels();  // divide.cu's part of loadKernels
// cudaFuncGetAttributes on each of n kernels: the first error, or 0.
int loadFunctions(const void* const* fns, size_t n);

// The text of a cudaError_t code.
const char* cudaErrorText(int err);

}  // namespace cuda
}  // namespace weft
