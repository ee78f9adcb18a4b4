// CUDA, only when the process already has it.
//
// The shim never links or loads a CUDA library: a CPU-only caller must not
// need one. When the process has loaded one (PyTorch, a CUDA application),
// the shim finds it with dlopen(RTLD_NOLOAD) and uses it for three things:
// telling device pointers from host pointers (device memory goes to weft
// with its stream, stream-ordered), waiting for a caller's stream before running
// on the host (so host memory the stream's earlier work wrote is complete),
// and ncclMemAlloc / ncclCommCuDevice. Found functions are published once
// and never unloaded.
#include <cuda.h>
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

#include "core/log.h"
#include "shim/shim.h"

namespace weft {
namespace shim {
namespace {

// The runtime's C entry points (cuda_runtime.h adds C++ template overloads
// of some names, so the types are spelled out).
using PointerGetAttributesFn = cudaError_t (*)(cudaPointerAttributes*, const void*);
using StreamSynchronizeFn = cudaError_t (*)(cudaStream_t);
using GetDeviceFn = cudaError_t (*)(int*);
using GetLastErrorFn = cudaError_t (*)();
using GetErrorStringFn = const char* (*)(cudaError_t);
using MallocFn = cudaError_t (*)(void**, size_t);
using FreeFn = cudaError_t (*)(void*);
// The driver's, for pointers: it creates no context and keeps no error state.
using CuPointerGetAttributeFn = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);

struct CudaApi {
  PointerGetAttributesFn pointerGetAttributes = nullptr;
  StreamSynchronizeFn streamSynchronize = nullptr;
  GetDeviceFn getDevice = nullptr;
  GetLastErrorFn getLastError = nullptr;
  GetErrorStringFn getErrorString = nullptr;
  MallocFn malloc = nullptr;
  FreeFn free = nullptr;
  CuPointerGetAttributeFn cuPointerGetAttribute = nullptr;
};

std::atomic<const CudaApi*> gApi{nullptr};
// Set when the runtime says there is no usable device (no driver, no GPU):
// every pointer is then host memory and every stream a plain handle.
std::atomic<bool> gNoDevice{false};
std::mutex gProbeMu;

// A loaded library whose file name contains `part` (PyTorch wheels ship
// the runtime under hashed names such as libcudart-1a2b3c.so.12).
int findLoaded(struct dl_phdr_info* info, size_t, void* data) {
  auto* want = static_cast<std::pair<const char*, std::string>*>(data);
  if (info->dlpi_name && strstr(info->dlpi_name, want->first)) {
    want->second = info->dlpi_name;
    return 1;
  }
  return 0;
}

void* openLoaded(const char* part, const char* const* sonames) {
  for (const char* const* n = sonames; *n; ++n)
    if (void* h = dlopen(*n, RTLD_NOLOAD | RTLD_LAZY)) return h;
  std::pair<const char*, std::string> want{part, ""};
  dl_iterate_phdr(findLoaded, &want);
  return want.second.empty() ? nullptr : dlopen(want.second.c_str(), RTLD_NOLOAD | RTLD_LAZY);
}

template <typename F>
void bind(void* lib, const char* name, F* out) {
  if (*out) return;
  void* f = lib ? dlsym(lib, name) : dlsym(RTLD_DEFAULT, name);
  if (f) *out = reinterpret_cast<F>(f);
}

const CudaApi* api() { return gNoDevice.load() ? nullptr : gApi.load(); }

// After a failed runtime call: clear the runtime's last error so that the
// application's own cudaGetLastError() does not report ours, and remember
// when there is no device at all.
void clearError(const CudaApi* a, cudaError_t e) {
  if (a->getLastError) a->getLastError();
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) gNoDevice = true;
}

}  // namespace

void probeCuda() {
  std::lock_guard<std::mutex> lk(gProbeMu);
  const CudaApi* old = gApi.load();
  if (old && old->pointerGetAttributes && old->cuPointerGetAttribute) return;
  static const char* const kRuntime[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                                         "libcudart.so", nullptr};
  static const char* const kDriver[] = {"libcuda.so.1", nullptr};
  CudaApi a = old ? *old : CudaApi();
  // Bound from the global scope when the runtime is there, else from the
  // loaded library itself (Python loads extension modules RTLD_LOCAL).
  const bool global = dlsym(RTLD_DEFAULT, "cudaPointerGetAttributes") != nullptr;
  void* rt = global ? nullptr : openLoaded("libcudart", kRuntime);
  if (global || rt) {
    bind(rt, "cudaPointerGetAttributes", &a.pointerGetAttributes);
    bind(rt, "cudaStreamSynchronize", &a.streamSynchronize);
    bind(rt, "cudaGetDevice", &a.getDevice);
    bind(rt, "cudaGetLastError", &a.getLastError);
    bind(rt, "cudaGetErrorString", &a.getErrorString);
    bind(rt, "cudaMalloc", &a.malloc);
    bind(rt, "cudaFree", &a.free);
  }
  if (void* drv = openLoaded("libcuda.so", kDriver))
    bind(drv, "cuPointerGetAttribute", &a.cuPointerGetAttribute);
  if (!a.pointerGetAttributes && !a.cuPointerGetAttribute) return;
  if (old && memcmp(old, &a, sizeof a) == 0) return;
  WEFT_INFO(kInit, "NCCL shim: CUDA found in the process (runtime %s, driver %s)",
            a.pointerGetAttributes ? "yes" : "no", a.cuPointerGetAttribute ? "yes" : "no");
  gApi.store(new CudaApi(a));  // published for good: readers hold no lock
}

bool isDeviceMemory(const void* p) {
  const CudaApi* a = api();
  if (!a || !p) return false;
  if (a->cuPointerGetAttribute) {
    CUmemorytype type = CU_MEMORYTYPE_HOST;
    CUresult r = a->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                          reinterpret_cast<CUdeviceptr>(p));
    if (r == CUDA_SUCCESS) return type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_ARRAY;
    if (r == CUDA_ERROR_INVALID_VALUE) return false;  // not known to CUDA: host memory
  }
  if (a->pointerGetAttributes) {
    cudaPointerAttributes attr;
    memset(&attr, 0, sizeof attr);
    cudaError_t e = a->pointerGetAttributes(&attr, p);
    if (e != cudaSuccess) {
      clearError(a, e);
      return false;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  }
  return false;
}

ncclResult_t syncStream(ncclComm* c, const char* fn, cudaStream_t stream) {
  if (!stream) return ncclSuccess;
  if (!gApi.load()) probeCuda();  // a stream suggests CUDA was loaded since
  const CudaApi* a = api();
  if (!a || !a->streamSynchronize) return ncclSuccess;
  cudaError_t e = a->streamSynchronize(stream);
  if (e == cudaSuccess) return ncclSuccess;
  std::string why = a->getErrorString ? a->getErrorString(e) : std::to_string(static_cast<int>(e));
  clearError(a, e);
  if (gNoDevice.load()) return ncclSuccess;  // no GPU: the stream is just a handle
  return setError(
      c, ncclUnhandledCudaError,
      std::string(fn) + ": cudaStreamSynchronize on the caller's stream failed: " + why);
}

int currentCudaDevice() {
  const CudaApi* a = api();
  int dev = 0;
  if (a && a->getDevice) {
    cudaError_t e = a->getDevice(&dev);
    if (e != cudaSuccess) {
      clearError(a, e);
      dev = 0;
    }
  }
  return dev;
}

int cudaAlloc(void** ptr, size_t size, std::string* err) {
  const CudaApi* a = api();
  if (!a || !a->malloc) return 0;
  cudaError_t e = a->malloc(ptr, size);
  if (e == cudaSuccess) return 1;
  *err = a->getErrorString ? a->getErrorString(e) : std::to_string(static_cast<int>(e));
  clearError(a, e);
  return gNoDevice.load() ? 0 : -1;
}

bool cudaRelease(void* ptr) {
  const CudaApi* a = api();
  if (!a || !a->free) return false;
  cudaError_t e = a->free(ptr);
  if (e != cudaSuccess) {
    clearError(a, e);
    return false;
  }
  return true;
}

}  // namespace shim
}  // namespace weft
