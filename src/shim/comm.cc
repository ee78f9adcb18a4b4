// The communicator behind an ncclComm_t: its registry of live handles, its
// creation (now, on a worker thread, or at the end of a group), and the
// calls that query, finalize, destroy and abort it.
//
// Creation states: kDeferred (recorded in an open group), kCreating (running
// on the calling or a worker thread), then kReady or kFailed; ncclCommFinalize
// moves a ready comm to kFinalized. A call that needs the weft communicator
// waits for a creation still running (acquire), so a nonblocking comm may be
// used as soon as the caller likes; ncclCommGetAsyncError never waits.
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "core/log.h"
#include "shim/shim.h"

namespace weft {
namespace shim {
namespace {

std::mutex& registryMu() {
  static std::mutex m;
  return m;
}
// Owns every live comm; a handle is the address of its ncclComm.
std::unordered_map<const ncclComm*, CommRef>& registry() {
  static std::unordered_map<const ncclComm*, CommRef> s;
  return s;
}

}  // namespace

CommRef lookup(ncclComm_t comm) {
  if (!comm) return nullptr;
  std::lock_guard<std::mutex> lk(registryMu());
  auto it = registry().find(comm);
  return it == registry().end() ? nullptr : it->second;
}

ncclComm* newComm(const CommSettings& s, int cudaDev) {
  auto c = std::make_shared<ncclComm>();
  c->blocking = s.blocking;
  c->name = s.name;
  c->cudaDev = cudaDev;
  std::lock_guard<std::mutex> lk(registryMu());
  registry()[c.get()] = c;
  return c.get();
}

void deleteComm(ncclComm* c) {
  if (!c) return;
  settle(c);
  CommRef last;  // destroyed after the lock is released
  std::lock_guard<std::mutex> lk(registryMu());
  auto it = registry().find(c);
  if (it == registry().end()) return;
  last = std::move(it->second);
  registry().erase(it);
}

void settle(ncclComm* c) {
  std::lock_guard<std::mutex> lk(c->workerMu);
  if (c->worker.joinable()) c->worker.join();
}

ncclResult_t acquire(ncclComm_t comm, const char* fn, CommRef* out, bool allowFinalized) {
  if (!comm) return setError(nullptr, ncclInvalidArgument, std::string(fn) + ": comm is NULL");
  CommRef c = lookup(comm);
  if (!c)
    return setError(nullptr, ncclInvalidArgument,
                    std::string(fn) +
                        ": comm is not a live communicator (destroyed, aborted, or never created)");
  int s = c->state.load();
  if (s == ncclComm::kDeferred)
    return setError(c.get(), ncclInvalidUsage,
                    std::string(fn) +
                        ": the communicator is created by the group still open on this thread; "
                        "use it after ncclGroupEnd");
  if (s == ncclComm::kCreating) {
    settle(c.get());
    s = c->state.load();
  }
  if (s == ncclComm::kFailed)
    return setError(c.get(), c->createResult,
                    std::string(fn) + ": the communicator's creation failed: " + c->createError);
  if (s == ncclComm::kFinalized && !allowFinalized)
    return setError(
        c.get(), ncclInvalidUsage,
        std::string(fn) + ": the communicator was finalized; only ncclCommDestroy may follow");
  *out = std::move(c);
  return ncclSuccess;
}

ncclResult_t parseConfig(const char* fn, const ncclConfig_t* config, const CommSettings& defaults,
                         CommSettings* out) {
  *out = defaults;
  if (!config) return ncclSuccess;
  // The caller's struct may be older (smaller) or newer (larger) than this
  // header's: read only the bytes its `size` covers, defaults for the rest.
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  size_t size = 0;
  memcpy(&size, config, sizeof size);
  const size_t minSize = offsetof(ncclConfig_t, blocking) + sizeof cfg.blocking;
  if (size < minSize)
    return setError(nullptr, ncclInvalidArgument,
                    std::string(fn) + ": config->size is " + std::to_string(size) +
                        "; initialize the config with NCCL_CONFIG_INITIALIZER");
  memcpy(&cfg, config, size < sizeof cfg ? size : sizeof cfg);
  if (cfg.magic != 0xcafebeef)
    return setError(
        nullptr, ncclInvalidArgument,
        std::string(fn) + ": config was not initialized with NCCL_CONFIG_INITIALIZER (bad magic)");
  if (cfg.blocking != NCCL_CONFIG_UNDEF_INT) {
    if (cfg.blocking != 0 && cfg.blocking != 1)
      return setError(nullptr, ncclInvalidArgument,
                      std::string(fn) + ": config->blocking is " + std::to_string(cfg.blocking) +
                          "; it must be 0 or 1");
    out->blocking = cfg.blocking == 1;
  }
  if (cfg.commName) out->name = cfg.commName;
  // netName, splitShare, CTA and channel counts, trafficClass, collnet and
  // NVLS settings tune NCCL's GPU kernels and networks; weft ignores them.
  return ncclSuccess;
}

void publish(ncclComm* c, weft_comm_t wc) {
  weft_comm_rank(wc, &c->rank);
  weft_comm_size(wc, &c->nranks);
  c->wc = wc;
  c->state = ncclComm::kReady;
  WEFT_INFO(kInit, "NCCL shim: communicator %p%s%s: rank %d of %d, %s", static_cast<void*>(c),
            c->name.empty() ? "" : " ", c->name.c_str(), c->rank, c->nranks,
            c->blocking ? "blocking" : "nonblocking");
}

ncclResult_t runCreation(ncclComm* c, const CreateFn& fn, std::string* err) {
  weft_comm_t wc = nullptr;
  ncclResult_t r = fn(&wc, err);
  if (!c) {
    if (wc) weft_comm_destroy(wc);
    return r;
  }
  if (r == ncclSuccess && !wc) {
    r = ncclInternalError;
    *err = "the creation returned no communicator";
  }
  if (r == ncclSuccess) {
    publish(c, wc);
    return r;
  }
  c->createResult = r;
  c->createError = *err;
  {
    std::lock_guard<std::mutex> lk(c->mu);
    c->lastError = *err;
  }
  c->state = ncclComm::kFailed;
  return r;
}

void startCreationThread(ncclComm* c, CreateFn fn) {
  c->state = ncclComm::kCreating;
  std::lock_guard<std::mutex> lk(c->workerMu);
  c->worker = std::thread([c, fn] {
    std::string err;
    runCreation(c, fn, &err);
  });
}

ncclResult_t create(ncclComm_t* out, ncclComm* c, CreateFn fn, bool async) {
  if (inGroup()) {
    *out = c;
    deferCreation(c, std::move(fn), async);
    return ncclSuccess;
  }
  if (async && c) {
    *out = c;
    startCreationThread(c, std::move(fn));
    return ncclInProgress;
  }
  if (c) c->state = ncclComm::kCreating;
  std::string err;
  ncclResult_t r = runCreation(c, fn, &err);
  if (r != ncclSuccess) {
    deleteComm(c);
    return setError(nullptr, r, err);
  }
  *out = c;
  return ncclSuccess;
}

}  // namespace shim
}  // namespace weft

using namespace weft::shim;

namespace {

// Destroy and abort drop the handle; one still recorded in an open group
// must not vanish under it.
ncclResult_t removable(ncclComm_t comm, const char* fn, CommRef* out) {
  CommRef c = lookup(comm);
  if (!c)
    return setError(nullptr, ncclInvalidArgument,
                    std::string(fn) +
                        ": comm is not a live communicator (destroyed, aborted, or never created)");
  if (c->state.load() == ncclComm::kDeferred)
    return setError(c.get(), ncclInvalidUsage,
                    std::string(fn) +
                        ": the communicator is created by the group still open on this thread; "
                        "call ncclGroupEnd first");
  *out = std::move(c);
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  CommRef c;
  if (ncclResult_t r = acquire(comm, "ncclCommFinalize", &c); r != ncclSuccess) return r;
  // Every host-path operation has completed when its call returned, so the
  // comm is quiescent: release weft's resources now; Destroy frees the rest.
  closeOneSided(c.get(), false);
  weft_result_t w = weft_comm_destroy(c->wc.exchange(nullptr));
  c->state = ncclComm::kFinalized;
  return fromWeft(c.get(), w, "ncclCommFinalize");
}
WEFT_NCCL_ALIAS(ncclCommFinalize)

ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  CommRef c;
  if (ncclResult_t r = removable(comm, "ncclCommDestroy", &c); r != ncclSuccess) return r;
  settle(c.get());  // a creation still running finishes first
  closeOneSided(c.get(), false);
  weft_comm_t wc = c->wc.exchange(nullptr);
  weft_result_t w = wc ? weft_comm_destroy(wc) : WEFT_SUCCESS;
  ncclResult_t r = fromWeft(nullptr, w, "ncclCommDestroy");
  deleteComm(c.get());
  return r;
}
WEFT_NCCL_ALIAS(ncclCommDestroy)

ncclResult_t pncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  CommRef c;
  if (ncclResult_t r = removable(comm, "ncclCommAbort", &c); r != ncclSuccess) return r;
  // weft cannot cancel a rendezvous in progress; it ends within
  // WEFT_BOOTSTRAP_TIMEOUT_S at worst. A collective running on another
  // thread fails (weft's own reference keeps its state alive, ours the
  // ncclComm) and returns.
  settle(c.get());
  closeOneSided(c.get(), true);
  if (weft_comm_t wc = c->wc.exchange(nullptr)) weft_comm_abort(wc);
  deleteComm(c.get());
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommAbort)

ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  const char* fn = "ncclCommRevoke";
  CommRef c;
  if (ncclResult_t r = acquire(comm, fn, &c); r != ncclSuccess) return r;
  if (revokeFlags != 0)
    return setError(c.get(), ncclInvalidArgument,
                    std::string(fn) + ": revokeFlags is " + std::to_string(revokeFlags) +
                        "; it must be NCCL_REVOKE_DEFAULT (0)");
  // weft_comm_revoke: pending and later operations fail now, on every
  // rank that waits for this one; the comm stays for ncclCommShrink.
  c->revoked = true;
  if (weft_comm_t wc = c->wc) weft_comm_revoke(wc);
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommRevoke)

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  const char* fn = "ncclCommGetAsyncError";
  CommRef c = lookup(comm);
  if (!c) return acquire(comm, fn, &c);  // the NULL / dead handle error
  if (!asyncError)
    return setError(c.get(), ncclInvalidArgument, std::string(fn) + ": asyncError is NULL");
  int s = c->state.load();
  if (s == ncclComm::kDeferred || s == ncclComm::kCreating) {
    *asyncError = ncclInProgress;  // never waits: this is the polling call
    return ncclSuccess;
  }
  settle(c.get());  // finished: join its worker
  if (s == ncclComm::kFailed) {
    setError(c.get(), c->createResult, c->createError);
    *asyncError = c->createResult;
    return ncclSuccess;
  }
  weft_comm_t wc = c->wc;
  if (s == ncclComm::kFinalized || !wc || c->revoked) {
    *asyncError = ncclSuccess;
    return ncclSuccess;
  }
  weft_result_t e = WEFT_SUCCESS;
  weft_result_t w = weft_comm_get_async_error(wc, &e);
  if (w != WEFT_SUCCESS) return fromWeft(c.get(), w, fn);
  if (e != WEFT_SUCCESS && e != WEFT_IN_PROGRESS)
    setError(c.get(), toNccl(e), std::string(fn) + ": " + weft_get_last_error(wc));
  *asyncError = toNccl(e);
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommGetAsyncError)

ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  CommRef c;
  if (ncclResult_t r = acquire(comm, "ncclCommCount", &c, true); r != ncclSuccess) return r;
  if (!count) return setError(c.get(), ncclInvalidArgument, "ncclCommCount: count is NULL");
  *count = c->nranks;
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommCount)

ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  CommRef c;
  if (ncclResult_t r = acquire(comm, "ncclCommCuDevice", &c, true); r != ncclSuccess) return r;
  if (!device) return setError(c.get(), ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  *device = c->cudaDev;
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommCuDevice)

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  CommRef c;
  if (ncclResult_t r = acquire(comm, "ncclCommUserRank", &c, true); r != ncclSuccess) return r;
  if (!rank) return setError(c.get(), ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  *rank = c->rank;
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommUserRank)

}  // extern "C"
