// The C API for communicators: create, split, destroy, abort, query.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "api/api_state.h"
#include "api/call_guard.h"
#include "bootstrap/bootstrap.h"
#include "core/log.h"

using namespace weft;

namespace {

// How long destroy and abort wait for other threads to leave their calls on
// the comm. Aborted, a blocked call leaves within microseconds.
constexpr double kCallersLeaveS = 10.0;

// Frees the handle, and the comm once no other thread is in a call on it
// (call_guard.h). One still inside after kCallersLeaveS keeps the comm's
// memory from being freed, for good.
void retire(weft_comm_t comm, std::shared_ptr<Comm> c, const char* how) {
  if (!callguard::waitForCallers(c.get(), kCallersLeaveS)) {
    WEFT_WARN(kColl,
              "a thread was still in a call on the communicator %.0f s after it was %s; its "
              "memory is kept, not freed",
              kCallersLeaveS, how);
    static auto* kept = new std::vector<std::shared_ptr<Comm>>;  // never freed
    kept->push_back(std::move(c));
  }
  delete comm;
}

// A usable config: NULL, or one whose size covers the fields read and whose
// timeouts are 0 (the environment's) or positive.
Status checkConfig(const weft_config_t* config) {
  if (!config) return Status();
  if (config->size < offsetof(weft_config_t, bootstrap_timeout_s) + sizeof(double))
    return invalidArgument(strFormat(
        "config->size is %zu; initialise the config with WEFT_CONFIG_INITIALIZER (size %zu)",
        config->size, sizeof(weft_config_t)));
  if (!(config->timeout_s >= 0))
    return invalidArgument(strFormat("config->timeout_s is %g; it must be 0 (the environment's) or "
                                     "more", config->timeout_s));
  if (!(config->bootstrap_timeout_s >= 0))
    return invalidArgument(strFormat("config->bootstrap_timeout_s is %g; it must be 0 (the "
                                     "environment's) or more", config->bootstrap_timeout_s));
  if (configHasRepro(config) &&
      (config->repro < WEFT_REPRO_DEFAULT || config->repro > WEFT_REPRO_EXACT))
    return invalidArgument(strFormat("config->repro is %d; it must be a weft_repro_t "
                                     "(WEFT_REPRO_DEFAULT, _OFF, _ORDERED or _EXACT)",
                                     config->repro));
  if (configHasWire(config) &&
      (config->wire < WEFT_WIRE_DEFAULT || config->wire > WEFT_WIRE_FP16))
    return invalidArgument(strFormat("config->wire is %d; it must be a weft_wire_t "
                                     "(WEFT_WIRE_DEFAULT, _NONE, _BF16 or _FP16)",
                                     config->wire));
  return Status();
}

// At least 1, and at most kMaxRanks (bootstrap.h).
Status checkNranks(int nranks) {
  if (nranks < 1) return invalidArgument(strFormat("nranks is %d; it must be at least 1", nranks));
  if (nranks > kMaxRanks)
    return invalidArgument(strFormat("nranks is %d; weft's limit is %d ranks", nranks, kMaxRanks));
  return Status();
}


// Reads an integer environment variable; false when absent.
bool envInt(const char* name, long* out, Status* st) {
  const char* v = getenv(name);
  if (!v || !*v) return false;
  char* end = nullptr;
  long x = strtol(v, &end, 10);
  if (*end) {
    *st = invalidArgument(strFormat("%s=%s is not an integer", name, v));
    return false;
  }
  *out = x;
  return true;
}

Status initEnv(weft_comm_t* comm) {
  if (!comm) return invalidArgument("comm (the output pointer) is NULL");
  Status st;
  long rank = -1, size = -1;
  const char* rankVar = nullptr;
  const char* sizeVar = nullptr;
  const char* pairs[][2] = {{"WEFT_RANK", "WEFT_NRANKS"},
                            {"RANK", "WORLD_SIZE"},
                            {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI_RANK", "PMI_SIZE"},
                            {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (auto& p : pairs) {
    if (envInt(p[0], &rank, &st)) {
      rankVar = p[0];
      sizeVar = p[1];
      if (!envInt(p[1], &size, &st))
        return st.isError() ? st
                            : invalidArgument(strFormat("%s is set but %s is not", p[0], p[1]));
      break;
    }
    if (st.isError()) return st;
  }
  if (!rankVar)
    return invalidArgument(
        "no launcher environment: set WEFT_RANK/WEFT_NRANKS/WEFT_ROOT_ADDR, or run under "
        "torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), mpirun or srun");
  std::string addr;
  if (const char* a = getenv("WEFT_ROOT_ADDR"); a && *a) {
    addr = a;
  } else {
    const char* host = getenv("MASTER_ADDR");
    const char* port = getenv("MASTER_PORT");
    if (!host || !*host || !port || !*port)
      return invalidArgument(strFormat(
          "%s is set but neither WEFT_ROOT_ADDR nor MASTER_ADDR and MASTER_PORT are", rankVar));
    addr = std::string(host) + ":" + port;
  }
  if (size < 1) return invalidArgument(strFormat("%s=%ld must be at least 1", sizeVar, size));
  if (rank < 0 || rank >= size)
    return invalidArgument(strFormat("%s=%ld is outside [0, %s=%ld)", rankVar, rank, sizeVar, size));
  uint64_t secret = 0x5745465444454641ull;  // default, same on every rank
  if (const char* s = getenv("WEFT_JOB_SECRET"); s && *s) {
    char* end = nullptr;
    secret = strtoull(s, &end, 0);
    if (*end) return invalidArgument(strFormat("WEFT_JOB_SECRET=%s is not a number", s));
  }
  Config cfg = Config::fromEnv();
  weft_unique_id_t id;
  if (rank == 0)
    WEFT_RETURN_IF_ERROR(startRootAt(cfg, addr, secret, &id));
  else
    WEFT_RETURN_IF_ERROR(idFromAddress(addr, secret, &id));
  return initRank(comm, static_cast<int>(size), id, static_cast<int>(rank), nullptr);
}

}  // namespace

namespace weft {

weft_comm_t wrapComm(std::shared_ptr<Comm> impl) {
  weft_comm_t h = new weft_comm{kCommMagic, std::move(impl)};
  registerComm(h);
  return h;
}

Status initRank(weft_comm_t* comm, int nranks, const weft_unique_id_t& id, int rank,
                const weft_config_t* config) {
  if (!comm) return invalidArgument("comm (the output pointer) is NULL");
  WEFT_RETURN_IF_ERROR(checkConfig(config));
  WEFT_RETURN_IF_ERROR(checkNranks(nranks));
  if (rank < 0 || rank >= nranks)
    return invalidArgument(strFormat("rank %d is outside [0, %d)", rank, nranks));
  UniqueIdData d;
  WEFT_RETURN_IF_ERROR(decodeUniqueId(id, &d));
  std::shared_ptr<Comm> impl;
  WEFT_RETURN_IF_ERROR(Comm::create(id, nranks, rank, &impl, config));
  *comm = wrapComm(std::move(impl));
  return Status();
}

}  // namespace weft

extern "C" {

weft_result_t weft_get_unique_id(weft_unique_id_t* id) {
  if (!id) return setError(static_cast<Comm*>(nullptr), invalidArgument("id is NULL"));
  logReconfigure();
  Status st = createUniqueId(Config::fromEnv(), id);
  return st.isOk() ? WEFT_SUCCESS : setError(static_cast<Comm*>(nullptr), st);
}

weft_result_t weft_comm_init_rank(weft_comm_t* comm, int nranks, weft_unique_id_t id, int rank) {
  Status st = initRank(comm, nranks, id, rank, nullptr);
  return st.isOk() ? WEFT_SUCCESS : setError(static_cast<Comm*>(nullptr), st);
}

weft_result_t weft_comm_init_rank_config(weft_comm_t* comm, int nranks, weft_unique_id_t id,
                                         int rank, const weft_config_t* config) {
  Status st = initRank(comm, nranks, id, rank, config);
  return st.isOk() ? WEFT_SUCCESS : setError(static_cast<Comm*>(nullptr), st);
}

weft_result_t weft_comm_set_timeout(weft_comm_t comm, double timeout_s) {
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  if (!(timeout_s > 0))
    return setError(c.get(), invalidArgument(strFormat(
                                 "timeout_s is %g; it must be more than 0 seconds", timeout_s)));
  c->setTimeout(timeout_s);
  return WEFT_SUCCESS;
}

weft_result_t weft_comm_repro(weft_comm_t comm, weft_repro_t* mode) {
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  if (!mode) return setError(c.get(), invalidArgument("mode (the output pointer) is NULL"));
  switch (c->repro()) {
    case Repro::Off: *mode = WEFT_REPRO_OFF; break;
    case Repro::Ordered: *mode = WEFT_REPRO_ORDERED; break;
    case Repro::Exact: *mode = WEFT_REPRO_EXACT; break;
  }
  return WEFT_SUCCESS;
}

weft_result_t weft_comm_wire(weft_comm_t comm, weft_wire_t* wire) {
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  if (!wire) return setError(c.get(), invalidArgument("wire (the output pointer) is NULL"));
  *wire = static_cast<weft_wire_t>(static_cast<int>(c->wire()) + WEFT_WIRE_NONE);
  return WEFT_SUCCESS;
}

weft_result_t weft_comm_init_all(weft_comm_t* comms, int nranks) {
  if (!comms) return setError(static_cast<Comm*>(nullptr), invalidArgument("comms is NULL"));
  if (Status bad = checkNranks(nranks); bad.isError())
    return setError(static_cast<Comm*>(nullptr), bad);
  weft_unique_id_t id;
  logReconfigure();
  Status st = createUniqueId(Config::fromEnv(), &id);
  if (st.isError()) return setError(static_cast<Comm*>(nullptr), st);
  std::vector<Status> results(nranks);
  std::vector<weft_comm_t> out(nranks, nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] { results[r] = initRank(&out[r], nranks, id, r, nullptr); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r) {
    if (results[r].isError()) {
      for (weft_comm_t c : out)
        if (c) weft_comm_abort(c);
      return setError(static_cast<Comm*>(nullptr), results[r].withContext(strFormat("rank %d", r)));
    }
  }
  for (int r = 0; r < nranks; ++r) comms[r] = out[r];
  return WEFT_SUCCESS;
}

weft_result_t weft_comm_init_env(weft_comm_t* comm) {
  Status st = initEnv(comm);
  return st.isOk() ? WEFT_SUCCESS : setError(static_cast<Comm*>(nullptr), st);
}

weft_result_t weft_comm_destroy(weft_comm_t comm) {
  if (!comm) return WEFT_SUCCESS;
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  unregisterComm(comm);
  st = c->finalize();
  retire(comm, std::move(c), "destroyed");
  return st.isOk() ? WEFT_SUCCESS : setError(static_cast<Comm*>(nullptr), st);
}

weft_result_t weft_comm_abort(weft_comm_t comm) {
  if (!comm) return WEFT_SUCCESS;
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  unregisterComm(comm);
  c->abort();
  retire(comm, std::move(c), "aborted");
  return WEFT_SUCCESS;
}

weft_result_t weft_comm_rank(weft_comm_t comm, int* rank) {
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  if (!rank) return setError(c.get(), invalidArgument("rank (the output pointer) is NULL"));
  *rank = c->rank();
  return WEFT_SUCCESS;
}

weft_result_t weft_comm_size(weft_comm_t comm, int* size) {
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  if (!size) return setError(c.get(), invalidArgument("size (the output pointer) is NULL"));
  *size = c->nranks();
  return WEFT_SUCCESS;
}

weft_result_t weft_comm_get_async_error(weft_comm_t comm, weft_result_t* async_error) {
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  if (!async_error) return setError(c.get(), invalidArgument("async_error is NULL"));
  Status a = c->asyncError();
  if (a.isError()) setError(c.get(), a);
  *async_error = a.code();
  return WEFT_SUCCESS;
}

weft_result_t weft_comm_split(weft_comm_t comm, int color, int key, weft_comm_t* newcomm) {
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  if (!newcomm) return setError(c.get(), invalidArgument("newcomm is NULL"));
  if (threadGroup().depth > 0)
    return setError(c.get(), invalidUsage("weft_comm_split cannot be called inside a group"));
  const int n = c->nranks(), me = c->rank();
  // 1. Everyone learns everyone's (color, key).
  std::vector<int32_t> mine = {color < 0 ? -1 : color, key}, all(2 * n);
  auto gather = [&](const void* send, void* recv, size_t count) -> Status {
    std::vector<PendingCall> calls(1);
    calls[0].comm = c;
    calls[0].args.type = CollType::AllGather;
    calls[0].args.count = count;
    calls[0].args.eltSize = 1;
    calls[0].dtype = WEFT_UINT8;
    calls[0].send = send;
    calls[0].recv = recv;
    return issueCalls(calls, true, nullptr, nullptr);
  };
  st = gather(mine.data(), all.data(), sizeof(int32_t) * 2);
  if (st.isError()) return setError(c.get(), st.withContext("weft_comm_split"));
  // 2. Members of my color ordered by (key, old rank); the first creates the id.
  std::vector<int> members;
  for (int r = 0; r < n; ++r)
    if (color >= 0 && all[2 * r] == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
  weft_unique_id_t myId;
  memset(&myId, 0, sizeof myId);
  if (!members.empty() && members[0] == me) {
    st = createUniqueId(c->config(), &myId);
    if (st.isError()) return setError(c.get(), st.withContext("weft_comm_split"));
  }
  // 3. Everyone learns the leaders' ids.
  std::vector<weft_unique_id_t> ids(n);
  st = gather(&myId, ids.data(), sizeof(weft_unique_id_t));
  if (st.isError()) return setError(c.get(), st.withContext("weft_comm_split"));
  if (color < 0) {
    *newcomm = nullptr;
    return WEFT_SUCCESS;
  }
  int newRank = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
  weft_comm_t out = nullptr;
  st = initRank(&out, static_cast<int>(members.size()), ids[members[0]], newRank, nullptr);
  if (st.isError()) return setError(c.get(), st.withContext("weft_comm_split"));
  *newcomm = out;
  return WEFT_SUCCESS;
}

}  // extern "C"
