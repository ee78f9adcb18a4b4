// The communicator's agreement on the shm arena's single-copy mode: every
// rank probes whether it may read every other rank's memory
// (process_vm_readv; containers or a strict ptrace policy may forbid it),
// and the ranks take the smallest WEFT_SHM_DIRECT_MIN, or 0 if any probe
// failed: all ranks must run the same protocol.
//
// Off by default with more ranks than cores: a single-copy round ends only
// when every reader has read the owners' buffers, so a broadcast root
// cannot run ahead, and readers sharing a core take turns. 4 ranks on 2
// cores, staged rounds against single copy: broadcast 64-256 KiB 10.9-34.7
// us against 18.9-51.2, 16 MiB 2.7 ms against 4.7; allgather and alltoall
// 256 KiB 29-32 us against 51-53, 16 MiB 3.1-4.2 ms against 4.5-6.1; even
// at the other sizes. A WEFT_SHM_DIRECT_MIN that is set still applies.
#include <algorithm>

#include "api/comm.h"
#include "core/log.h"

namespace weft {

Status Comm::agreeOnSingleCopy() {
  // arena_ is set on every rank or on none (all ranks on one host, shm on).
  if (!arena_) return Status();
  const bool shared = arena_->oversubscribed() && !cfg_.shmDirectMinSet;
  const bool ok = cfg_.shmDirectMin > 0 && !shared && arena_->probeDirect();
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
  if (rank_ == 0) {
    const char* off = !cfg_.shmDirectMin ? "off (WEFT_SHM_DIRECT_MIN=0)"
                      : shared ? "off (more ranks than cores; WEFT_SHM_DIRECT_MIN turns it on)"
                               : "off (a rank may not read another's memory)";
    WEFT_INFO(kTransport, "shm arena: single-copy broadcast/allgather %s",
              agreed ? strFormat("from %llu bytes", static_cast<unsigned long long>(agreed)).c_str()
                     : off);
  }
  return Status();
}

}  // namespace weft
