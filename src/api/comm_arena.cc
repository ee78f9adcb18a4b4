// The communicator's agreement on the shm arena's single-copy mode: every
// rank probes whether it may read every other rank's memory
// (process_vm_readv; containers or a strict ptrace policy may forbid it),
// and the ranks take the smallest WEFT_SHM_DIRECT_MIN, or 0 if any probe
// failed: all ranks must run the same protocol.
//
// With more ranks than cores, single copy is limited to large allgathers
// (src/algo/arena_plan.cc says why), unless WEFT_SHM_DIRECT_MIN is set.
#include <algorithm>

#include "api/comm.h"
#include "api/init_blob.h"
#include "core/log.h"
#include "exec/arena_op.h"
#include "transports/shm/arena.h"

namespace weft {

Status Comm::agreeOnSingleCopy() {
  // arena_ is set on every rank or on none (all ranks on one host, shm on).
  if (!arena_) return Status();
  const bool ok = cfg_.shmDirectMin > 0 && arena_->probeDirect();
  // Each rank's bytes-from and whether it limits single copy.
  InitBlobWriter mine;
  mine.u64(ok ? cfg_.shmDirectMin : 0)
      .u64(arena_->oversubscribed() && !cfg_.shmDirectMinSet ? 1u : 0u);
  std::vector<std::string> all;
  WEFT_RETURN_IF_ERROR(boot_->allgather(mine.blob(), &all, cfg_.bootstrapTimeoutS));
  uint64_t agreed = UINT64_MAX;
  bool limited = false;
  for (const std::string& b : all) {
    InitBlobReader in(b);
    agreed = std::min(agreed, in.u64());  // a short blob reads 0: off
    limited = in.u64() != 0 || limited;
  }
  arena_->setDirectMin(agreed, limited);
  if (rank_ == 0)
    WEFT_INFO(kTransport, "shm arena: single-copy broadcast/allgather %s%s",
              agreed ? strFormat("from %llu bytes", static_cast<unsigned long long>(agreed)).c_str()
              : cfg_.shmDirectMin ? "off (a rank may not read another's memory)"
                                  : "off (WEFT_SHM_DIRECT_MIN=0)",
              agreed && limited ? ", large allgathers only (more ranks than cores)" : "");
  return Status();
}

const ArenaPlan* Comm::arenaPlanSlow(const CollArgs& args, weft_datatype_t dt, Status* st,
                                     std::shared_ptr<const ArenaPlan>* keep) {
  // Plans depend on the call's shape and the arena's figures, fixed after
  // init: kept in the shape cache as schedules are (Comm::fillOp).
  const ShapeEntry* e = cachedShape(args, dt, Algo::Shm, 0);
  if (!e) {
    ShapeEntry n;
    n.args = args;
    n.dt = dt;
    n.algo = Algo::Shm;
    auto plan = std::make_shared<ArenaPlan>();
    *st = buildArenaPlan(args, arenaShapeOf(*arena_), plan.get());
    if (st->isError()) return nullptr;
    n.plan = std::move(plan);
    e = &cacheShape(std::move(n));
  }
  lastPlan_ = e->plan;
  lastPlanArgs_ = args;
  lastPlanDt_ = dt;
  if (keep) *keep = e->plan;
  return e->plan.get();
}

}  // namespace weft
