// Memory: ncclMemAlloc / ncclMemFree and buffer registration (weft needs
// none: a handle that remembers the buffer). Windows: window.cc.
//
// ncclMemAlloc returns what its caller can use: CUDA device memory from the
// process's CUDA runtime when there is one (a CUDA caller expects device
// memory; weft's collectives refuse it until weft's CUDA support lands), and
// page-aligned host memory otherwise (CPU-only callers, this machine).
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_set>

#include "shim/shim.h"

using namespace weft::shim;

namespace {

std::mutex gHostMu;
std::unordered_set<void*> gHostBlocks;  // host memory from ncclMemAlloc

}  // namespace

extern "C" {

ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  const char* fn = "ncclMemAlloc";
  if (!ptr || size == 0)
    return setError(nullptr, ncclInvalidArgument, std::string(fn) + ": ptr is NULL or size is 0");
  probeCuda();
  std::string err;
  int dev = cudaAlloc(ptr, size, &err);
  if (dev == 1) return ncclSuccess;
  if (dev < 0)
    return setError(
        nullptr, ncclUnhandledCudaError,
        std::string(fn) + ": cudaMalloc of " + std::to_string(size) + " bytes failed: " + err);
  void* p = nullptr;
  if (posix_memalign(&p, 4096, size) != 0)
    return setError(nullptr, ncclSystemError,
                    std::string(fn) + ": no memory for " + std::to_string(size) + " bytes");
  std::lock_guard<std::mutex> lk(gHostMu);
  gHostBlocks.insert(p);
  *ptr = p;
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclMemAlloc)

ncclResult_t pncclMemFree(void* ptr) {
  const char* fn = "ncclMemFree";
  if (!ptr) return setError(nullptr, ncclInvalidArgument, std::string(fn) + ": ptr is NULL");
  {
    std::lock_guard<std::mutex> lk(gHostMu);
    if (gHostBlocks.erase(ptr)) {
      free(ptr);
      return ncclSuccess;
    }
  }
  if (cudaRelease(ptr)) return ncclSuccess;
  return setError(nullptr, ncclInvalidArgument,
                  std::string(fn) + ": ptr was not allocated by ncclMemAlloc");
}
WEFT_NCCL_ALIAS(ncclMemFree)

ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  const char* fn = "ncclCommRegister";
  CommRef c;
  if (ncclResult_t r = acquire(comm, fn, &c); r != ncclSuccess) return r;
  if (!handle) return setError(c.get(), ncclInvalidArgument, std::string(fn) + ": handle is NULL");
  // weft's transports copy through their own buffers: nothing to register.
  auto* reg = new ShimRegistration{buff, size};
  std::lock_guard<std::mutex> lk(c->mu);
  c->regs.push_back(reg);
  *handle = reg;
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommRegister)

ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  const char* fn = "ncclCommDeregister";
  CommRef c;
  if (ncclResult_t r = acquire(comm, fn, &c, true); r != ncclSuccess) return r;
  std::lock_guard<std::mutex> lk(c->mu);
  auto it = std::find(c->regs.begin(), c->regs.end(), static_cast<ShimRegistration*>(handle));
  if (!handle || it == c->regs.end()) {
    c->lastError = std::string(fn) + ": handle was not returned by ncclCommRegister on this comm";
    return setError(nullptr, ncclInvalidArgument, c->lastError);
  }
  delete *it;
  c->regs.erase(it);
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommDeregister)

}  // extern "C"
