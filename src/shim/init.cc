// Unique ids and communicator creation: ncclGetUniqueId, ncclCommInitRank,
// ...InitRankConfig, ...InitRankScalable, ...InitAll, ncclCommSplit and
// ncclCommShrink, each onto weft_get_unique_id / weft_comm_init_rank /
// weft_comm_init_all / weft_comm_split.
//
// Nonblocking configs (blocking = 0) create on a worker thread and return
// ncclInProgress; ncclCommGetAsyncError says when the comm is ready. Inside
// a group, creations run together at the outermost ncclGroupEnd (one
// thread may so create several ranks of one communicator). Splits and
// shrinks always finish before returning (or at ncclGroupEnd).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "shim/shim.h"

using namespace weft::shim;

namespace {

ncclResult_t invalid(const char* fn, const std::string& what) {
  return groupRefused(setError(nullptr, ncclInvalidArgument, std::string(fn) + ": " + what));
}

ncclResult_t initRank(const char* fn, ncclComm_t* comm, int nranks, const ncclUniqueId& commId,
                      int rank, const ncclConfig_t* config) {
  prepareProcess();
  probeCuda();
  if (!comm) return invalid(fn, "comm (the output pointer) is NULL");
  if (nranks < 1) return invalid(fn, "nranks is " + std::to_string(nranks) + "; it must be >= 1");
  if (rank < 0 || rank >= nranks)
    return invalid(
        fn, "rank " + std::to_string(rank) + " is outside [0, " + std::to_string(nranks) + ")");
  CommSettings defaults, s;
  defaults.blocking = defaultBlocking();
  if (ncclResult_t r = parseConfig(fn, config, defaults, &s); r != ncclSuccess)
    return groupRefused(r);
  weft_unique_id_t id;
  memcpy(&id, &commId, sizeof id);
  ncclComm* c = newComm(s, currentCudaDevice());
  const std::string name = fn;
  CreateFn f = [id, nranks, rank, name](weft_comm_t* out, std::string* err) -> ncclResult_t {
    if (ncclResult_t r = startCommIdRoot(id, rank, err); r != ncclSuccess) {
      *err = name + ": " + *err;
      return r;
    }
    weft_result_t w = weft_comm_init_rank(out, nranks, id, rank);
    if (w != WEFT_SUCCESS) {
      *err = name + ": " + weft_get_last_error(nullptr);
      return toNccl(w);
    }
    return ncclSuccess;
  };
  return groupRefused(create(comm, c, std::move(f), !s.blocking));
}

// ncclCommShrink: weft_comm_shrink, which the survivors agree on among
// themselves (the parent may have failed: a dead rank, a revoke).
ncclResult_t shrinkCreate(weft_comm_t parent, const std::vector<int>& excluded, bool abortFirst,
                          weft_comm_t* out, std::string* err) {
  if (abortFirst) weft_comm_revoke(parent);
  weft_result_t w = weft_comm_shrink(parent, excluded.data(), static_cast<int>(excluded.size()), out);
  if (w != WEFT_SUCCESS) {
    *err = std::string("ncclCommShrink: ") + weft_get_last_error(parent);
    return toNccl(w);
  }
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  const char* fn = "ncclGetUniqueId";
  prepareProcess();
  if (!uniqueId)
    return setError(nullptr, ncclInvalidArgument, std::string(fn) + ": uniqueId is NULL");
  weft_unique_id_t id;
  std::string err;
  if (idFromCommIdEnv(&id, &err)) {
    // As NCCL: every rank derives the same id; rank 0 starts the root when
    // it joins (startCommIdRoot).
    memcpy(uniqueId, &id, sizeof id);
    return ncclSuccess;
  }
  if (!err.empty()) return setError(nullptr, ncclInvalidArgument, std::string(fn) + ": " + err);
  weft_result_t w = weft_get_unique_id(&id);
  if (w != WEFT_SUCCESS) return fromWeft(nullptr, w, fn);
  memcpy(uniqueId, &id, sizeof id);
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclGetUniqueId)

ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return initRank("ncclCommInitRank", comm, nranks, commId, rank, nullptr);
}
WEFT_NCCL_ALIAS(ncclCommInitRank)

ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config) {
  return initRank("ncclCommInitRankConfig", comm, nranks, commId, rank, config);
}
WEFT_NCCL_ALIAS(ncclCommInitRankConfig)

ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config) {
  const char* fn = "ncclCommInitRankScalable";
  if (nId < 1 || !commIds)
    return invalid(fn, "needs nId >= 1 unique ids in commIds (nId is " + std::to_string(nId) + ")");
  // weft's rendezvous root serves any number of ranks, so the first id is
  // enough; the roots of the others go unused (they exit after
  // WEFT_BOOTSTRAP_TIMEOUT_S).
  return initRank(fn, newcomm, nranks, commIds[0], myrank, config);
}
WEFT_NCCL_ALIAS(ncclCommInitRankScalable)

ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  const char* fn = "ncclCommInitAll";
  prepareProcess();
  probeCuda();
  if (!comms) return invalid(fn, "comms is NULL");
  if (ndev < 1) return invalid(fn, "ndev is " + std::to_string(ndev) + "; it must be >= 1");
  if (devlist) {
    for (int i = 0; i < ndev; ++i) {
      if (devlist[i] < 0) return invalid(fn, "devlist[" + std::to_string(i) + "] is negative");
      for (int j = 0; j < i; ++j)
        if (devlist[j] == devlist[i])
          return invalid(fn, "device " + std::to_string(devlist[i]) + " is listed twice");
    }
  }
  std::vector<weft_comm_t> wcs(ndev, nullptr);
  weft_result_t w = weft_comm_init_all(wcs.data(), ndev);
  if (w != WEFT_SUCCESS) return groupRefused(fromWeft(nullptr, w, fn));
  CommSettings s;
  for (int i = 0; i < ndev; ++i) {
    comms[i] = newComm(s, devlist ? devlist[i] : i);
    publish(comms[i], wcs[i]);
  }
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommInitAll)

ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                            ncclConfig_t* config) {
  const char* fn = "ncclCommSplit";
  prepareProcess();
  CommRef p;
  if (ncclResult_t r = acquire(comm, fn, &p); r != ncclSuccess) return groupRefused(r);
  if (!newcomm) return invalid(fn, "newcomm is NULL");
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return invalid(fn, "color " + std::to_string(color) +
                           " is negative; use a color >= 0 or NCCL_SPLIT_NOCOLOR");
  CommSettings inherited, s;
  inherited.blocking = p->blocking;
  if (ncclResult_t r = parseConfig(fn, config, inherited, &s); r != ncclSuccess)
    return groupRefused(r);
  weft_comm_t parent = p->wc;
  // NCCL_SPLIT_NOCOLOR still takes part in the split, but gets no comm.
  ncclComm* c = color == NCCL_SPLIT_NOCOLOR ? nullptr : newComm(s, p->cudaDev);
  CreateFn f = [parent, color, key](weft_comm_t* out, std::string* err) -> ncclResult_t {
    weft_result_t w = weft_comm_split(parent, color < 0 ? WEFT_SPLIT_NOCOLOR : color, key, out);
    if (w != WEFT_SUCCESS) {
      *err = std::string("ncclCommSplit: ") + weft_get_last_error(nullptr);
      return toNccl(w);
    }
    return ncclSuccess;
  };
  return groupRefused(create(newcomm, c, std::move(f), false));
}
WEFT_NCCL_ALIAS(ncclCommSplit)

ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  const char* fn = "ncclCommShrink";
  prepareProcess();
  CommRef p;
  if (ncclResult_t r = acquire(comm, fn, &p); r != ncclSuccess) return groupRefused(r);
  if (!newcomm) return invalid(fn, "newcomm is NULL");
  // NCCL_SHRINK_ABORT first stops the parent's operations in flight
  // (weft_comm_revoke); either way the survivors agree on who is left.
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return invalid(fn, "shrinkFlags " + std::to_string(shrinkFlags) +
                           " is neither NCCL_SHRINK_DEFAULT nor NCCL_SHRINK_ABORT");
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))
    return invalid(fn, "excludeRanksList must hold excludeRanksCount >= 0 ranks");
  std::vector<bool> excluded(p->nranks, false);
  for (int i = 0; i < excludeRanksCount; ++i) {
    int r = excludeRanksList[i];
    if (r < 0 || r >= p->nranks)
      return invalid(fn, "excluded rank " + std::to_string(r) + " is outside [0, " +
                             std::to_string(p->nranks) + ")");
    if (excluded[r]) return invalid(fn, "rank " + std::to_string(r) + " is excluded twice");
    excluded[r] = true;
  }
  if (excluded[p->rank])
    return invalid(fn, "this rank (" + std::to_string(p->rank) +
                           ") is in excludeRanksList; excluded ranks do not call ncclCommShrink");
  std::vector<int> excludedList(excludeRanksList, excludeRanksList + excludeRanksCount);
  CommSettings inherited, s;
  inherited.blocking = p->blocking;
  if (ncclResult_t r = parseConfig(fn, config, inherited, &s); r != ncclSuccess)
    return groupRefused(r);
  weft_comm_t parent = p->wc;
  const bool abortFirst = shrinkFlags == NCCL_SHRINK_ABORT;
  ncclComm* c = newComm(s, p->cudaDev);
  CreateFn f = [parent, excludedList, abortFirst](weft_comm_t* out, std::string* err) {
    return shrinkCreate(parent, excludedList, abortFirst, out, err);
  };
  return groupRefused(create(newcomm, c, std::move(f), false));
}
WEFT_NCCL_ALIAS(ncclCommShrink)

#if NCCL_VERSION_CODE >= 23000
// Growing a communicator (NCCL 2.30): new ranks join a running one, over
// weft_comm_grow. ncclCommGetUniqueId makes the id the holder passes and
// hands to the new processes.
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  const char* fn = "ncclCommGetUniqueId";
  CommRef c;
  if (ncclResult_t r = acquire(comm, fn, &c); r != ncclSuccess) return r;
  if (!uniqueId) return setError(c.get(), ncclInvalidArgument, std::string(fn) + ": uniqueId is NULL");
  weft_unique_id_t id;
  weft_result_t w = weft_get_unique_id(&id);
  if (w != WEFT_SUCCESS) return fromWeft(c.get(), w, fn);
  memcpy(uniqueId, &id, sizeof id);
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommGetUniqueId)

ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                           ncclComm_t* newcomm, ncclConfig_t* config) {
  const char* fn = "ncclCommGrow";
  prepareProcess();
  if (!newcomm) return invalid(fn, "newcomm is NULL");
  *newcomm = nullptr;
  const bool hasId = uniqueId != nullptr;
  weft_unique_id_t id;
  memset(&id, 0, sizeof id);
  if (hasId) memcpy(&id, uniqueId, sizeof id);
  if (!comm) {  // a new rank
    if (!hasId) return invalid(fn, "a new rank (comm NULL) must pass the uniqueId");
    CommSettings defaults, s;
    defaults.blocking = defaultBlocking();
    if (ncclResult_t r = parseConfig(fn, config, defaults, &s); r != ncclSuccess)
      return groupRefused(r);
    ncclComm* c = newComm(s, currentCudaDevice());
    CreateFn f = [nRanks, id, rank](weft_comm_t* out, std::string* err) {
      weft_result_t w = weft_comm_grow(nullptr, nRanks, &id, rank, out);
      if (w != WEFT_SUCCESS) *err = std::string("ncclCommGrow: ") + weft_get_last_error(nullptr);
      return toNccl(w);
    };
    return groupRefused(create(newcomm, c, std::move(f), !s.blocking));
  }
  CommRef p;
  if (ncclResult_t r = acquire(comm, fn, &p); r != ncclSuccess) return groupRefused(r);
  CommSettings inherited, s;
  inherited.blocking = p->blocking;
  if (ncclResult_t r = parseConfig(fn, config, inherited, &s); r != ncclSuccess)
    return groupRefused(r);
  weft_comm_t parent = p->wc;
  ncclComm* c = newComm(s, p->cudaDev);
  CreateFn f = [parent, nRanks, id, hasId, rank](weft_comm_t* out, std::string* err) {
    weft_result_t w = weft_comm_grow(parent, nRanks, hasId ? &id : nullptr, rank, out);
    if (w != WEFT_SUCCESS) *err = std::string("ncclCommGrow: ") + weft_get_last_error(parent);
    return toNccl(w);
  };
  return groupRefused(create(newcomm, c, std::move(f), false));
}
WEFT_NCCL_ALIAS(ncclCommGrow)
#endif  // NCCL_VERSION_CODE >= 23000

}  // extern "C"
