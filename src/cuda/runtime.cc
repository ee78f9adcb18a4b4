// runtime.h over the CUDA runtime (linked statically, see runtime.h).
//
// Every failed runtime call is cleared from the runtime's sticky "last
// error" state by the call's own return value; messages carry
// cudaGetErrorString.
#include "cuda/runtime.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "core/clock.h"
#include "core/log.h"
#include "kernels/cuda/reduce.h"

namespace weft {
namespace cuda {
namespace {

Status cudaError(const char* what, cudaError_t e) {
  return Status(WEFT_ERR_CUDA, strFormat("%s: %s (cudaError %d)", what, cudaGetErrorString(e),
                                         static_cast<int>(e)));
}

struct Probe {
  bool usable = false;
  std::string why;
  // cuStreamWaitValue32, when the driver has it.
  CUresult (*waitValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int) = nullptr;
  // cuStreamWriteValue32, likewise.
  CUresult (*writeValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int) = nullptr;
};

const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      r.why = strFormat("no CUDA device: %s", cudaGetErrorString(e));
      cudaGetLastError();
      return r;
    }
    if (n == 0) {
      r.why = "no CUDA device: the driver reports none";
      return r;
    }
    r.usable = true;
    // A driver entry point of CUDA 12's ABI, or NULL where the driver lacks it.
    auto entry = [](const char* name) -> void* {
      void* fn = nullptr;
      cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
      if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) ==
              cudaSuccess &&
          q == cudaDriverEntryPointSuccess)
        return fn;
      cudaGetLastError();
      return nullptr;
    };
    r.waitValue32 = reinterpret_cast<decltype(r.waitValue32)>(entry("cuStreamWaitValue32"));
    r.writeValue32 = reinterpret_cast<decltype(r.writeValue32)>(entry("cuStreamWriteValue32"));
    WEFT_INFO(kInit, "CUDA: %d device(s); stream waits by %s", n,
              r.waitValue32 ? "cuStreamWaitValue32" : "a spinning kernel");
    return r;
  }();
  return p;
}

}  // namespace

bool cudaBuilt() { return true; }

bool driverLoaded(uint64_t now) {
  static std::atomic<bool> loaded{false};
  static std::atomic<uint64_t> nextCheckNs{0};
  if (loaded.load(std::memory_order_relaxed)) return true;
  if (!now) now = nowNs();
  if (now < nextCheckNs.load(std::memory_order_relaxed)) return false;
  nextCheckNs.store(now + 100000000ull, std::memory_order_relaxed);
  if (void* h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY)) {
    dlclose(h);
    loaded.store(true);
  }
  return loaded.load();
}

CudaState cudaState() {
  const Probe& p = probe();
  CudaState s;
  s.usable = p.usable;
  s.why = p.why;
  if (p.usable && cudaGetDevice(&s.device) != cudaSuccess) {
    cudaGetLastError();
    s.device = -1;
  }
  return s;
}

BufferDesc describePointer(const char* role, const void* p) {
  BufferDesc d;
  d.role = role;
  d.ptr = p;
  if (!p || !probe().usable) return d;
  cudaPointerAttributes a;
  memset(&a, 0, sizeof a);
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();  // not known to CUDA: pageable host memory
    return d;
  }
  d.device = a.device;
  d.devicePtr = a.devicePointer;
  switch (a.type) {
    case cudaMemoryTypeHost:
      d.kind = MemKind::Pinned;
      break;
    case cudaMemoryTypeDevice:
      d.kind = MemKind::Device;
      break;
    case cudaMemoryTypeManaged:
      d.kind = MemKind::Managed;
      break;
    default:
      d.kind = MemKind::Host;
      break;
  }
  return d;
}

Status pinnedAlloc(size_t bytes, void** p) {
  void* q = nullptr;
  cudaError_t e = cudaHostAlloc(&q, bytes ? bytes : 1, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess) return cudaError(strFormat("cudaHostAlloc(%zu)", bytes).c_str(), e);
  *p = q;
  return Status();
}

void pinnedFree(void* p) {
  if (p && cudaFreeHost(p) != cudaSuccess) cudaGetLastError();
}

Status deviceAlloc(size_t bytes, void** p) {
  void* q = nullptr;
  cudaError_t e = cudaMalloc(&q, bytes ? bytes : 1);
  if (e != cudaSuccess) return cudaError(strFormat("cudaMalloc(%zu)", bytes).c_str(), e);
  *p = q;
  return Status();
}

void deviceFree(void* p) {
  if (p && cudaFree(p) != cudaSuccess) cudaGetLastError();
}

static_assert(sizeof(cudaIpcMemHandle_t) == kIpcHandleBytes, "cudaIpcMemHandle_t size");

Status ipcHandle(void* base, std::string* handle) {
  cudaIpcMemHandle_t h;
  cudaError_t e = cudaIpcGetMemHandle(&h, base);
  if (e != cudaSuccess) return cudaError("cudaIpcGetMemHandle", e);
  handle->assign(reinterpret_cast<const char*>(&h), sizeof h);
  return Status();
}

Status ipcOpen(const std::string& handle, void** p) {
  if (handle.size() != sizeof(cudaIpcMemHandle_t))
    return invalidArgument("cudaIpcOpenMemHandle: a handle of the wrong size");
  cudaIpcMemHandle_t h;
  memcpy(&h, handle.data(), sizeof h);
  void* q = nullptr;
  cudaError_t e = cudaIpcOpenMemHandle(&q, h, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) return cudaError("cudaIpcOpenMemHandle", e);
  *p = q;
  return Status();
}

void ipcClose(void* p) {
  if (p && cudaIpcCloseMemHandle(p) != cudaSuccess) cudaGetLastError();
}

Status setCurrentDevice(int dev) {
  cudaError_t e = cudaSetDevice(dev);
  if (e != cudaSuccess) return cudaError("cudaSetDevice", e);
  return Status();
}

Status streamCreate(void** stream) {
  cudaStream_t s = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return cudaError("cudaStreamCreate", e);
  *stream = s;
  return Status();
}

void streamDestroy(void* stream) {
  if (stream && cudaStreamDestroy(static_cast<cudaStream_t>(stream)) != cudaSuccess)
    cudaGetLastError();
}

Status copyAsync(void* dst, const void* src, size_t bytes, void* stream) {
  if (!bytes) return Status();
  cudaError_t e =
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream));
  return e == cudaSuccess ? Status() : cudaError("cudaMemcpyAsync", e);
}

Status eventCreate(void** ev) {
  cudaEvent_t e = nullptr;
  cudaError_t r = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  if (r != cudaSuccess) return cudaError("cudaEventCreate", r);
  *ev = e;
  return Status();
}

void eventDestroy(void* ev) {
  if (ev && cudaEventDestroy(static_cast<cudaEvent_t>(ev)) != cudaSuccess) cudaGetLastError();
}

Status eventRecord(void* ev, void* stream) {
  cudaError_t r = cudaEventRecord(static_cast<cudaEvent_t>(ev), static_cast<cudaStream_t>(stream));
  return r == cudaSuccess ? Status() : cudaError("cudaEventRecord", r);
}

Status eventDone(void* ev, bool* done) {
  cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(ev));
  *done = r == cudaSuccess;
  if (r == cudaSuccess || r == cudaErrorNotReady) return Status();
  return cudaError("work queued on the stream before the collective failed", r);
}

namespace {

// One copy of each kind weft issues behind held streams (device to device,
// device to pinned host, pinned host to device), on a private stream, polled
// to completion: whatever the driver sets up for them on first use is set
// up before any stream is held. Its buffers and stream are kept (a few
// hundred bytes per device): freeing would wait for the device, which
// another thread's batch may already hold.
Status warmCopies() {
  constexpr size_t kBytes = 256;
  void *d = nullptr, *h = nullptr, *s = nullptr;
  Status st = deviceAlloc(2 * kBytes, &d);
  if (st.isOk()) st = pinnedAlloc(kBytes, &h);
  if (st.isOk()) st = streamCreate(&s);
  uint8_t* dd = static_cast<uint8_t*>(d);
  if (st.isOk()) st = copyAsync(h, dd, kBytes, s);
  if (st.isOk()) st = copyAsync(dd + kBytes, dd, kBytes, s);
  if (st.isOk()) st = copyAsync(dd, h, kBytes, s);
  const uint64_t end = nowNs() + 10000000000ull;
  while (s) {
    const cudaError_t q = cudaStreamQuery(static_cast<cudaStream_t>(s));
    if (q == cudaSuccess) break;
    if (q != cudaErrorNotReady) {
      if (st.isOk()) st = cudaError("the first copies", q);
      break;
    }
    if (nowNs() > end) {
      if (st.isOk()) st = Status(WEFT_ERR_TIMEOUT, "CUDA: the first copies took over 10 s");
      break;
    }
  }
  return st;
}

}  // namespace

Status loadKernelsFor(void* stream) {
  static std::atomic<uint64_t> loaded{0};  // a bit per device below 64
  static std::mutex loading;
  int dev = -1;
  cudaError_t e =
      stream ? cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &dev) : cudaGetDevice(&dev);
  if (e != cudaSuccess) return cudaError("the stream's device", e);
  const uint64_t bit = dev >= 0 && dev < 64 ? uint64_t{1} << dev : 0;
  if (bit && (loaded.load(std::memory_order_acquire) & bit)) return Status();
  // One thread loads; the others wait for it here, not in CUDA calls made
  // after its first batch may already hold a stream.
  std::lock_guard<std::mutex> lk(loading);
  if (bit && (loaded.load(std::memory_order_acquire) & bit)) return Status();
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
  if (prev != dev && (e = cudaSetDevice(dev)) != cudaSuccess) return cudaError("cudaSetDevice", e);
  const int r = loadKernels();
  Status warm = r ? Status() : warmCopies();
  if (prev >= 0 && prev != dev) cudaSetDevice(prev);
  if (r) return cudaError("loading weft's kernels", static_cast<cudaError_t>(r));
  WEFT_RETURN_IF_ERROR(warm);
  loaded.fetch_or(bit, std::memory_order_release);
  WEFT_INFO(kInit, "CUDA: weft's kernels loaded on device %d", dev);
  return Status();
}

Status streamWaitFlag(volatile uint32_t* flag, uint32_t value, volatile int32_t* timedOut,
                      double timeoutS, void* stream) {
  const Probe& p = probe();
  void* dflag = nullptr;
  cudaError_t e = cudaHostGetDevicePointer(&dflag, const_cast<uint32_t*>(flag), 0);
  if (e != cudaSuccess) return cudaError("cudaHostGetDevicePointer", e);
  if (p.waitValue32) {
    CUresult r = p.waitValue32(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(dflag),
                               value, CU_STREAM_WAIT_VALUE_GEQ);
    if (r == CUDA_SUCCESS) return Status();
    return Status(WEFT_ERR_CUDA, strFormat("cuStreamWaitValue32 failed (CUresult %d)", r));
  }
  void* dflagOut = nullptr;
  e = cudaHostGetDevicePointer(&dflagOut, const_cast<int32_t*>(timedOut), 0);
  if (e != cudaSuccess) return cudaError("cudaHostGetDevicePointer", e);
  const int r = spinWaitOnStream(static_cast<const volatile uint32_t*>(dflag), value,
                                 static_cast<uint64_t>(timeoutS * 1e9),
                                 static_cast<volatile int32_t*>(dflagOut), stream);
  return r == 0 ? Status()
                : cudaError("launching the stream wait kernel", static_cast<cudaError_t>(r));
}

bool streamWritesFlags() { return probe().writeValue32 != nullptr; }

Status streamWriteFlag(volatile uint32_t* flag, uint32_t value, void* stream) {
  const Probe& p = probe();
  if (!p.writeValue32)
    return Status(WEFT_ERR_CUDA, "cuStreamWriteValue32: the driver does not have it");
  void* dflag = nullptr;
  cudaError_t e = cudaHostGetDevicePointer(&dflag, const_cast<uint32_t*>(flag), 0);
  if (e != cudaSuccess) return cudaError("cudaHostGetDevicePointer", e);
  // Default flags: a memory barrier first, so the stream's earlier writes
  // (the copies into staging) are visible before the value is.
  CUresult r =
      p.writeValue32(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(dflag), value, 0);
  if (r == CUDA_SUCCESS) return Status();
  return Status(WEFT_ERR_CUDA, strFormat("cuStreamWriteValue32 failed (CUresult %d)", r));
}

Status copyIfOk(void* dst, const void* src, size_t bytes, const volatile int32_t* status,
                void* stream) {
  void* dsrc = nullptr;
  void* dstatus = nullptr;
  cudaError_t e = cudaHostGetDevicePointer(&dsrc, const_cast<void*>(src), 0);
  if (e == cudaSuccess) e = cudaHostGetDevicePointer(&dstatus, const_cast<int32_t*>(status), 0);
  if (e != cudaSuccess) return cudaError("cudaHostGetDevicePointer", e);
  const int r =
      copyIfOkOnStream(dst, dsrc, bytes, static_cast<const volatile int32_t*>(dstatus), stream);
  return r == 0 ? Status() : cudaError("launching the copy kernel", static_cast<cudaError_t>(r));
}

}  // namespace cuda
}  // namespace weft
