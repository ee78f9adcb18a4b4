#include "perf/device.h"

#include <cuda_runtime.h>

namespace weftperf {
namespace {

bool ok(cudaError_t e, const char* what, std::string* err) {
  if (e == cudaSuccess) return true;
  *err = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}

}  // namespace

bool deviceOpen(int rank, size_t bytes, DeviceBufs* d, std::string* err) {
  int n = 0;
  if (!ok(cudaGetDeviceCount(&n), "cudaGetDeviceCount", err)) return false;
  if (n <= 0) {
    *err = "no CUDA device";
    return false;
  }
  cudaStream_t s = nullptr;
  if (!ok(cudaSetDevice(rank % n), "cudaSetDevice", err) ||
      !ok(cudaMalloc(reinterpret_cast<void**>(&d->send), bytes), "cudaMalloc", err) ||
      !ok(cudaMalloc(reinterpret_cast<void**>(&d->recv), bytes), "cudaMalloc", err) ||
      !ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate", err))
    return false;
  d->stream = s;
  return ok(cudaMemset(d->send, 0, bytes), "cudaMemset", err) &&
         ok(cudaMemset(d->recv, 0, bytes), "cudaMemset", err);
}

void deviceClose(DeviceBufs* d) {
  if (d->stream) cudaStreamDestroy(static_cast<cudaStream_t>(d->stream));
  cudaFree(d->send);
  cudaFree(d->recv);
  *d = DeviceBufs();
}

bool deviceUpload(void* dst, const void* src, size_t bytes, std::string* err) {
  return ok(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D", err);
}

bool deviceDownload(void* dst, const void* src, size_t bytes, std::string* err) {
  return ok(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H", err);
}

bool deviceSync(const DeviceBufs& d, std::string* err) {
  return ok(cudaStreamSynchronize(static_cast<cudaStream_t>(d.stream)), "cudaStreamSynchronize",
            err);
}

}  // namespace weftperf
