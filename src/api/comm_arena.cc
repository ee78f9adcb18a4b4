// The communicator's agreement on the shm arena's single-copy mode: every
// rank probes whether it may read every other rank's memory
// (process_vm_readv; containers or a strict ptrace policy may forbid it),
// and the ranks take the smallest WEFT_SHM_DIRECT_MIN, or 0 if any probe
// failed: all ranks must run the same protocol.
#include <algorithm>

#include "api/comm.h"
#include "core/log.h"

namespace weft {

Status Comm::agreeOnSingleCopy() {
  // arena_ is set on every rank or on none (all ranks on one host, shm on).
  if (!arena_) return Status();
  const bool ok = cfg_.shmDirectMin > 0 && arena_->probeDirect();
  const uint64_t mine = ok ? cfg_.shmDirectMin : 0;
  std::string blob(reinterpret_cast<const char*>(&mine), sizeof mine);
  std::vector<std::string> all;
  WEFT_RETURN_IF_ERROR(boot_->allgather(blob, &all, cfg_.bootstrapTimeoutS));
  uint64_t agreed = mine;
  for (const std::string& b : all) {
    uint64_t v = 0;
    if (b.size() == sizeof v) std::copy(b.begin(), b.end(), reinterpret_cast<char*>(&v));
    agreed = std::min(agreed, v);
  }
  arena_->setDirectMin(agreed);
  if (rank_ == 0)
    WEFT_INFO(kTransport, "shm arena: single-copy broadcast/allgather %s",
              agreed ? strFormat("from %llu bytes", static_cast<unsigned long long>(agreed)).c_str()
                     : (cfg_.shmDirectMin ? "off (a rank may not read another's memory)"
                                          : "off (WEFT_SHM_DIRECT_MIN=0)"));
  return Status();
}

}  // namespace weft
