// ncclCommSuspend / ncclCommResume / ncclCommMemStats (NCCL 2.30).
//
// A suspended communicator refuses operations (ncclInvalidUsage, naming
// the suspension) until ncclCommResume. NCCL_SUSPEND_MEM also lets go of
// the memory weft keeps for later operations on this communicator: its
// engine's spare scratch buffers (host memory, and a GPU backend's device
// scratch, which returns to weft's process-wide cache). weft's pinned
// staging and device scratch caches are per process, not per communicator
// (cudaFree could deadlock behind weft's own stream waits: docs/cuda.md),
// so they stay. Resume needs nothing back: scratch is taken again on
// demand. MemStats reports the GPU memory this communicator holds of its
// own: the device scratch kept for later operations (what suspension
// frees), no persistent GPU memory, and whether it is suspended.
#include <string>

#include "api/api_state.h"
#include "shim/shim.h"

using namespace weft::shim;

namespace weft {
namespace shim {

ncclResult_t refuseIfSuspended(ncclComm* c, const char* fn) {
  if (!c->suspended.load(std::memory_order_acquire)) return ncclSuccess;
  return setError(c, ncclInvalidUsage,
                  std::string(fn) + ": the communicator is suspended (ncclCommSuspend); call "
                                    "ncclCommResume first");
}

}  // namespace shim
}  // namespace weft

#if NCCL_VERSION_CODE >= 23000

namespace {

std::shared_ptr<weft::Comm> weftComm(ncclComm* c) {
  weft::Status ignored;
  return weft::lookupComm(c->wc.load(), &ignored);
}

}  // namespace

extern "C" {

ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags) {
  const char* fn = "ncclCommSuspend";
  CommRef c;
  if (ncclResult_t r = acquire(comm, fn, &c); r != ncclSuccess) return r;
  if (flags & ~NCCL_SUSPEND_MEM)
    return setError(c.get(), ncclInvalidArgument,
                    std::string(fn) + ": flags " + std::to_string(flags) +
                        " has bits other than NCCL_SUSPEND_MEM");
  if (c->suspended.exchange(true))
    return setError(c.get(), ncclInvalidUsage,
                    std::string(fn) + ": the communicator is already suspended");
  if (flags & NCCL_SUSPEND_MEM) {
    if (auto w = weftComm(c.get())) w->releaseSpareMemory();
  }
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommSuspend)

ncclResult_t pncclCommResume(ncclComm_t comm) {
  const char* fn = "ncclCommResume";
  CommRef c;
  if (ncclResult_t r = acquire(comm, fn, &c); r != ncclSuccess) return r;
  if (!c->suspended.exchange(false))
    return setError(c.get(), ncclInvalidUsage,
                    std::string(fn) + ": the communicator is not suspended");
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommResume)

ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  const char* fn = "ncclCommMemStats";
  CommRef c;
  if (ncclResult_t r = acquire(comm, fn, &c); r != ncclSuccess) return r;
  if (!value) return setError(c.get(), ncclInvalidArgument, std::string(fn) + ": value is NULL");
  auto w = weftComm(c.get());
  const uint64_t device = w ? w->spareMemoryBytes(true) : 0;
  switch (stat) {
    case ncclStatGpuMemSuspend:
    case ncclStatGpuMemTotal:
      *value = device;
      return ncclSuccess;
    case ncclStatGpuMemSuspended:
      *value = c->suspended.load() ? 1 : 0;
      return ncclSuccess;
    case ncclStatGpuMemPersist:
      *value = 0;
      return ncclSuccess;
  }
  return setError(c.get(), ncclInvalidArgument,
                  std::string(fn) + ": stat " + std::to_string(static_cast<int>(stat)) +
                      " is not an ncclCommMemStat_t");
}
WEFT_NCCL_ALIAS(ncclCommMemStats)

}  // extern "C"

#endif  // NCCL_VERSION_CODE >= 23000
