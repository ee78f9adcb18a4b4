// The CUDA runtime as weft uses it, behind plain C++ (callers need no CUDA
// header). Built from runtime.cc when weft is built with CUDA, else from
// runtime_off.cc, whose functions report "built without CUDA".
//
// Linking: libweft.so links the CUDA runtime statically (cudart_static), so
// it has no libcudart.so dependency and loads on machines without the
// toolkit or a driver. The static runtime opens the driver (libcuda.so.1)
// on first use; without one, cudaState() says so and every stream call is
// refused with that reason, while host-memory calls work as before.
//
// Streams and events are passed as void* (a cudaStream_t / cudaEvent_t).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>

#include "core/status.h"
#include "cuda/mem_rules.h"

namespace weft {
namespace cuda {

// True when this weft was built with CUDA.
bool cudaBuilt();
// True when the process has loaded the CUDA driver (libcuda.so.1): only
// then can a pointer be device memory. Asking costs no CUDA call, so host
// calls of a CPU-only process never initialize CUDA (which would break
// CUDA in children it forks later). Rechecked at most every 100 ms until true.
// `now`: the clock (nowNs) if the caller has read it, else 0.
bool driverLoaded(uint64_t now = 0);
// Whether CUDA is usable (probed once per process: driver, device count),
// and the calling thread's current device.
CudaState cudaState();
// What CUDA knows about p: pageable host memory when it knows nothing (or
// is not usable). `role` goes into messages.
BufferDesc describePointer(const char* role, const void* p);

// Pinned host memory, mapped into the device's address space (UVA: the
// same address on both sides). Owned by the caller: pinnedFree.
Status pinnedAlloc(size_t bytes, void** p);
void pinnedFree(void* p);

// Device memory of the current device (cudaMalloc / cudaFree).
Status deviceAlloc(size_t bytes, void** p);
void deviceFree(void* p);
// CUDA IPC: the handle of an allocation's base (kIpcHandleBytes bytes), and
// the mapping of a peer process's handle into this one (ipcClose undoes it).
constexpr size_t kIpcHandleBytes = 64;
Status ipcHandle(void* base, std::string* handle);
Status ipcOpen(const std::string& handle, void** p);
void ipcClose(void* p);
// Makes `dev` the calling thread's current device (cudaSetDevice): a
// comm's progress thread works on the comm's device, so that its CUDA calls
// create no context on device 0. An error when CUDA refuses.
Status setCurrentDevice(int dev);
// A non-blocking stream of the current device, for a transport's copies.
Status streamCreate(void** stream);
void streamDestroy(void* stream);

// cudaMemcpyAsync(cudaMemcpyDefault) on `stream`.
Status copyAsync(void* dst, const void* src, size_t bytes, void* stream);

Status eventCreate(void** ev);
void eventDestroy(void* ev);
Status eventRecord(void* ev, void* stream);
// *done when everything before the record has finished; an error of the
// stream's work is returned as WEFT_ERR_CUDA.
Status eventDone(void* ev, bool* done);

// Loads weft's kernels into the context of `stream`'s device (NULL: the
// current device), once per device and process, before weft holds any
// stream there: under lazy module loading a first launch behind a held
// stream can deadlock (kernels/cuda/reduce.h, loadKernels).
Status loadKernelsFor(void* stream);
// Holds `stream` until the host makes *flag - value >= 0 (as int32). The
// flag lives in pinned memory (pinnedAlloc). Uses the driver's stream wait
// (cuStreamWaitValue32: no SM is held) when it has one, else a one-thread
// kernel that gives up after timeoutS and sets *timedOut.
Status streamWaitFlag(volatile uint32_t* flag, uint32_t value, volatile int32_t* timedOut,
                      double timeoutS, void* stream);
// Whether the driver has stream memory writes (cuStreamWriteValue32); then
// streamWriteFlag makes `stream` store `value` into *flag (pinned memory)
// once its earlier work is done and visible: the host learns it by reading
// memory, with no CUDA call.
bool streamWritesFlags();
Status streamWriteFlag(volatile uint32_t* flag, uint32_t value, void* stream);
// Copies src to dst on `stream` by a kernel, only if *status == 0 then.
Status copyIfOk(void* dst, const void* src, size_t bytes, const volatile int32_t* status,
                void* stream);

}  // namespace cuda
}  // namespace weft
