// Groups: ncclGroupStart / ncclGroupEnd over weft_group_start / _end, plus
// what the shim itself must hold until the outermost end:
//  - communicator creations called inside the group (NCCL lets one thread
//    create several ranks that way): they run together, one thread each, at
//    the outermost end, after the group's operations were issued;
//  - the first call the shim refused, which fails the whole group as weft
//    does for the calls it refuses itself.
// State is per thread, as weft's.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "shim/shim.h"

namespace weft {
namespace shim {
namespace {

struct Creation {
  CommRef comm;  // NULL: a split's NCCL_SPLIT_NOCOLOR side
  CreateFn fn;
  bool async;  // nonblocking config: left running after ncclGroupEnd
};

struct ShimGroup {
  int depth = 0;
  std::vector<Creation> creations;
  ncclResult_t refused = ncclSuccess;
  std::string refusedMsg;
};

ShimGroup& group() {
  thread_local ShimGroup g;
  return g;
}

// Runs the creations recorded by the group: nonblocking ones on their
// comm's worker thread, the others on threads of their own, joined here.
ncclResult_t runCreations(std::vector<Creation>& cs, std::string* err) {
  bool anyAsync = false;
  std::vector<size_t> sync;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (cs[i].async && cs[i].comm) {
      startCreationThread(cs[i].comm.get(), cs[i].fn);
      anyAsync = true;
    } else {
      if (cs[i].comm) cs[i].comm->state = ncclComm::kCreating;
      sync.push_back(i);
    }
  }
  std::vector<ncclResult_t> results(sync.size(), ncclSuccess);
  std::vector<std::string> errs(sync.size());
  if (sync.size() == 1) {
    results[0] = runCreation(cs[sync[0]].comm.get(), cs[sync[0]].fn, &errs[0]);
  } else {
    std::vector<std::thread> threads;
    for (size_t k = 0; k < sync.size(); ++k)
      threads.emplace_back(
          [&, k] { results[k] = runCreation(cs[sync[k]].comm.get(), cs[sync[k]].fn, &errs[k]); });
    for (auto& t : threads) t.join();
  }
  for (size_t k = 0; k < sync.size(); ++k) {
    if (results[k] != ncclSuccess) {
      *err = errs[k];
      return results[k];
    }
  }
  return anyAsync ? ncclInProgress : ncclSuccess;
}

}  // namespace

bool inGroup() { return group().depth > 0; }

void deferCreation(ncclComm* c, CreateFn fn, bool async) {
  if (c) c->state = ncclComm::kDeferred;
  group().creations.push_back(Creation{lookup(c), std::move(fn), async});
}

ncclResult_t groupRefused(ncclResult_t r) {
  if (r == ncclSuccess || r == ncclInProgress) return r;
  ShimGroup& g = group();
  if (g.depth == 0) return r;
  if (g.refused == ncclSuccess) {
    g.refused = r;
    g.refusedMsg = threadLastError();
    // weft has no call to drop a recorded group, so make weft's group fail
    // too: a call weft refuses (a NULL comm) marks it, and the outermost
    // weft_group_end then issues nothing.
    weft_barrier(nullptr, nullptr);
  }
  return r;
}

}  // namespace shim
}  // namespace weft

using namespace weft::shim;

extern "C" {

ncclResult_t pncclGroupStart() {
  group().depth++;
  return fromWeft(nullptr, weft_group_start(), "ncclGroupStart");
}
WEFT_NCCL_ALIAS(ncclGroupStart)

ncclResult_t pncclGroupEnd() {
  ShimGroup& g = group();
  if (g.depth == 0)
    return setError(nullptr, ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart is open");
  if (--g.depth > 0) return fromWeft(nullptr, weft_group_end(), "ncclGroupEnd");
  // Outermost: issue and complete the operations, then create the comms
  // (every rank does both in this order).
  weft_result_t w = weft_group_end();
  ncclResult_t r = ncclSuccess;
  std::string msg;
  if (g.refused != ncclSuccess) {
    r = g.refused;
    msg = "ncclGroupEnd: a call in the group was refused, so nothing ran: " + g.refusedMsg;
  } else if (w != WEFT_SUCCESS) {
    r = toNccl(w);
    msg = std::string("ncclGroupEnd: ") + weft_get_last_error(nullptr);
  }
  std::vector<Creation> creations;
  creations.swap(g.creations);
  g.refused = ncclSuccess;
  g.refusedMsg.clear();
  if (r != ncclSuccess) {
    // The creations were refused with the group: their comms fail.
    for (Creation& c : creations) {
      if (!c.comm) continue;
      c.comm->createResult = r;
      c.comm->createError = msg;
      c.comm->state = ncclComm::kFailed;
    }
    return setError(nullptr, r, msg);
  }
  if (creations.empty()) return ncclSuccess;
  std::string err;
  r = runCreations(creations, &err);
  if (r != ncclSuccess && r != ncclInProgress) return setError(nullptr, r, "ncclGroupEnd: " + err);
  return r;
}
WEFT_NCCL_ALIAS(ncclGroupEnd)

ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  (void)simInfo;
  return unsupported(nullptr, "ncclGroupSimulateEnd",
                     "weft has no cost model to simulate a group with yet; the group stays "
                     "open (end it with ncclGroupEnd)");
}
WEFT_NCCL_ALIAS(ncclGroupSimulateEnd)

}  // extern "C"
