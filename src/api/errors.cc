// Version, error strings, last error, and the handle registry.
#include <atomic>
#include <mutex>
#include <unordered_set>

#include "api/api_state.h"
#include "api/call_guard.h"

namespace weft {
namespace {

std::mutex& registryMu() {
  static std::mutex m;
  return m;
}
std::unordered_set<weft_comm_t>& registry() {
  static std::unordered_set<weft_comm_t> s;
  return s;
}
thread_local std::string tlsLastError;

}  // namespace

// Bumped by every change to the registry: a thread's cached lookup (below)
// and its checked call (CheckMemo) are good while it has not moved.
std::atomic<uint64_t> gRegistryGen{1};

void registerComm(weft_comm_t c) {
  callguard::setUp();
  std::lock_guard<std::mutex> lk(registryMu());
  registry().insert(c);
  gRegistryGen.fetch_add(1, std::memory_order_acq_rel);
}

void unregisterComm(weft_comm_t c) {
  std::lock_guard<std::mutex> lk(registryMu());
  registry().erase(c);
  gRegistryGen.fetch_add(1, std::memory_order_acq_rel);
}

namespace {

// The live Comm behind a handle, looked up with the registry's lock held,
// or nullptr (with *st set).
const std::shared_ptr<Comm>* findLocked(weft_comm_t c, Status* st) {
  if (!c) {
    *st = invalidArgument("comm is NULL");
    return nullptr;
  }
  if (!registry().count(c) || c->magic != kCommMagic) {
    *st = invalidArgument("comm is not a live communicator (destroyed, aborted, or never created)");
    return nullptr;
  }
  return &c->impl;
}

// lookupComm; when found, the calling thread enters a call on the comm
// (call_guard.h) while the registry's lock keeps it registered.
Comm* lookupCommEntering(weft_comm_t c, Status* st) {
  std::lock_guard<std::mutex> lk(registryMu());
  const std::shared_ptr<Comm>* found = findLocked(c, st);
  if (!found) return nullptr;
  callguard::enter(found->get());
  return found->get();
}

}  // namespace

Comm* lookupCommCached(weft_comm_t c, Status* st) {
  // The last communicator this thread used, while no communicator was
  // created or destroyed since: a collective call then takes no lock and
  // no reference count (together some 60-80 ns per call here, a fifth of
  // an 8-byte allreduce on shared memory). The thread enters a call on it
  // first (call_guard.h): abort or destroy on another thread then waits for
  // this call to end before freeing the comm. A destroyed handle always
  // misses (its destroy moved the generation) and fails as before.
  // One TLS struct, read through a TLS descriptor (-mtls-dialect=gnu2, the
  // top-level CMakeLists.txt): no lock, no __tls_get_addr call on x86-64.
  struct Last {
    weft_comm_t handle = nullptr;
    uint64_t gen = 0;
    Comm* comm = nullptr;
  };
  static thread_local Last last;
  Last& l = last;
  if (c && c == l.handle) {
    callguard::enter(l.comm);
    if (gRegistryGen.load(std::memory_order_acquire) == l.gen) return l.comm;
    callguard::leave();
  }
  const uint64_t gen = gRegistryGen.load(std::memory_order_acquire);
  Comm* found = lookupCommEntering(c, st);
  if (!found) return nullptr;
  l.handle = c;
  l.gen = gen;
  l.comm = found;
  return found;
}

std::shared_ptr<Comm> lookupComm(weft_comm_t c, Status* st) {
  std::lock_guard<std::mutex> lk(registryMu());
  const std::shared_ptr<Comm>* found = findLocked(c, st);
  return found ? *found : nullptr;
}

weft_result_t setError(Comm* comm, const Status& st) {
  tlsLastError = st.message();
  if (comm) {
    std::lock_guard<std::mutex> lk(comm->lastErrorMu);
    comm->lastError = st.message();
  }
  return st.code();
}

weft_result_t setError(weft_comm_t comm, const Status& st) {
  Status ignored;
  std::shared_ptr<Comm> c = comm ? lookupComm(comm, &ignored) : nullptr;
  return setError(c.get(), st);
}

GroupState& threadGroup() {
  // Every call asks for it: the object's address is kept in a word of static
  // TLS (a plain word, no guard), the object itself in
  // dynamic TLS (it has a destructor).
  static thread_local GroupState* cached = nullptr;
  if (cached) return *cached;
  thread_local GroupState g;
  cached = &g;
  return g;
}

}  // namespace weft

using namespace weft;

extern "C" {

weft_result_t weft_get_version(int* version) {
  if (!version) return setError(static_cast<Comm*>(nullptr), invalidArgument("version is NULL"));
  *version = WEFT_VERSION_CODE;
  return WEFT_SUCCESS;
}

const char* weft_get_error_string(weft_result_t r) {
  switch (r) {
    case WEFT_SUCCESS:
      return "success";
    case WEFT_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case WEFT_ERR_INVALID_USAGE:
      return "invalid usage";
    case WEFT_ERR_SYSTEM:
      return "system error";
    case WEFT_ERR_INTERNAL:
      return "internal error";
    case WEFT_ERR_REMOTE:
      return "remote peer failed";
    case WEFT_ERR_TIMEOUT:
      return "timed out";
    case WEFT_ERR_CUDA:
      return "CUDA error";
    case WEFT_ERR_ABORTED:
      return "aborted";
    case WEFT_IN_PROGRESS:
      return "in progress";
    case WEFT_ERR_REVOKED:
      return "revoked";
  }
  return "unknown result code";
}

const char* weft_get_last_error(weft_comm_t comm) {
  if (comm) {
    Status st;
    std::shared_ptr<Comm> c = lookupComm(comm, &st);
    if (c) {
      // A copy of this thread's own: another thread may set the comm's at
      // any time. Valid until this thread's next call.
      thread_local std::string copy;
      std::lock_guard<std::mutex> lk(c->lastErrorMu);
      copy = c->lastError;
      return copy.c_str();
    }
  }
  return tlsLastError.c_str();
}

}  // extern "C"
