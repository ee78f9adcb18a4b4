// runtime.h for a weft built without CUDA: nothing is usable, every pointer
// is host memory, and every stream call says why it cannot run.
#include "cuda/runtime.h"

namespace weft {
namespace cuda {
namespace {

Status off() { return Status(WEFT_ERR_CUDA, "this weft was built without CUDA"); }

}  // namespace

bool cudaBuilt() { return false; }
bool driverLoaded(uint64_t) { return false; }

CudaState cudaState() {
  CudaState s;
  s.why = "this weft was built without CUDA";
  return s;
}

BufferDesc describePointer(const char* role, const void* p) {
  BufferDesc d;
  d.role = role;
  d.ptr = p;
  return d;
}

Status pinnedAlloc(size_t, void**) { return off(); }
void pinnedFree(void*) {}
Status deviceAlloc(size_t, void**) { return off(); }
void deviceFree(void*) {}
Status ipcHandle(void*, std::string*) { return off(); }
Status ipcOpen(const std::string&, void**) { return off(); }
void ipcClose(void*) {}
Status setCurrentDevice(int) { return off(); }
Status streamCreate(void**) { return off(); }
void streamDestroy(void*) {}
Status copyAsync(void*, const void*, size_t, void*) { return off(); }
Status eventCreate(void**) { return off(); }
void eventDestroy(void*) {}
Status eventRecord(void*, void*) { return off(); }
Status eventDone(void*, bool*) { return off(); }
Status loadKernelsFor(void*) { return off(); }
bool streamWritesFlags() { return false; }
Status streamWriteFlag(volatile uint32_t*, uint32_t, void*) { return off(); }
Status streamWaitFlag(volatile uint32_t*, uint32_t, volatile int32_t*, double, void*) {
  return off();
}
Status copyIfOk(void*, const void*, size_t, const volatile int32_t*, void*) { return off(); }

}  // namespace cuda
}  // namespace weft
