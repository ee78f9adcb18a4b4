// The NCCL shim: libweft-nccl.so, a drop-in libnccl.so.2 whose every
// function maps onto weft (docs/nccl-shim.md).
//
// The toolkit's own nccl.h is included, so every type, enum value and
// signature is NCCL's: a definition that does not match its declaration in
// nccl.h does not compile. Each export is defined once under its profiling
// name pnccl* and exported again as nccl*, a weak alias, as NCCL does (a
// profiler may define nccl* and call on to pnccl*). exports.map makes
// nccl*/pnccl* the only exported symbols.
//
// This header holds what the export files share: the communicator behind an
// ncclComm_t, error mapping and the last-error text, the shim's per-thread
// group, the optional CUDA runtime, and the NCCL_* environment mapping.
#pragma once

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "weft.h"

// Exports `name` as a weak alias of p<name>, defined in the same file.
#define WEFT_NCCL_ALIAS(name) \
  extern "C" __typeof__(p##name) name __attribute__((weak, alias("p" #name)));

static_assert(sizeof(ncclUniqueId) == sizeof(weft_unique_id_t),
              "an ncclUniqueId must carry a weft_unique_id_t unchanged");
static_assert(static_cast<int>(ncclNumTypes) == static_cast<int>(WEFT_NUM_DATATYPES) &&
                  static_cast<int>(ncclFloat8e5m2) == static_cast<int>(WEFT_FP8_E5M2) &&
                  static_cast<int>(ncclBfloat16) == static_cast<int>(WEFT_BFLOAT16) &&
                  static_cast<int>(ncclFloat16) == static_cast<int>(WEFT_FLOAT16),
              "weft_datatype_t has NCCL's values");
static_assert(static_cast<int>(ncclNumOps) == static_cast<int>(WEFT_AVG) + 1 &&
                  static_cast<int>(ncclAvg) == static_cast<int>(WEFT_AVG) &&
                  static_cast<int>(ncclMin) == static_cast<int>(WEFT_MIN),
              "weft_op_t's SUM .. AVG have NCCL's values");

// What ncclCommRegister hands out (weft needs no registration).
struct ShimRegistration {
  void* buff;
  size_t size;
};

namespace weft {
namespace shim {
struct OneSided;  // windows and one-sided calls (window.cc)
}  // namespace shim
}  // namespace weft

// What an ncclComm_t points at. The creation may run later (in a group) or
// on a worker thread (nonblocking config); `state` says where it stands.
struct ncclComm {
  enum State : int { kDeferred, kCreating, kReady, kFailed, kFinalized };

  std::atomic<int> state{kDeferred};
  std::atomic<weft_comm_t> wc{nullptr};  // set before `state` becomes kReady
  int rank = -1;
  int nranks = 0;
  int cudaDev = 0;
  bool blocking = true;
  std::string name;  // ncclConfig_t::commName, for logs
  // ncclCommSuspend .. ncclCommResume: operations are refused (suspend.cc).
  std::atomic<bool> suspended{false};
  // ncclCommRevoke: its operations were stopped; quiescent at once on weft
  // (ncclCommGetAsyncError then answers ncclSuccess), kept for a shrink.
  std::atomic<bool> revoked{false};
  // Windows and the one-sided channel, from the first ncclCommWindowRegister
  // on (window.cc). Used by the thread that drives the comm.
  std::shared_ptr<weft::shim::OneSided> oneSided;

  std::mutex workerMu;  // guards worker (joined by whichever thread needs it first)
  std::thread worker;
  ncclResult_t createResult = ncclSuccess;
  std::string createError;

  std::mutex mu;                        // guards the members below
  std::vector<ShimRegistration*> regs;  // ncclCommRegister handles
  std::string lastError;

  ~ncclComm() {
    for (ShimRegistration* r : regs) delete r;
  }
};

namespace weft {
namespace shim {

// ---- errors (errors.cc) -------------------------------------------------
ncclResult_t toNccl(weft_result_t r);
// Records `msg` as the last error of the calling thread and of `c` (if not
// NULL) and returns `r`.
ncclResult_t setError(ncclComm* c, ncclResult_t r, const std::string& msg);
// After a failed weft call: "<fn>: <weft's last error>", mapped code.
ncclResult_t fromWeft(ncclComm* c, weft_result_t r, const char* fn);
// A function weft does not support: ncclInvalidUsage, a warning, and `why`.
ncclResult_t unsupported(ncclComm* c, const char* fn, const char* why);
// The calling thread's last error text.
const std::string& threadLastError();

// ---- communicators (comm.cc) -------------------------------------------
// ncclConfig_t, as far as weft uses it.
struct CommSettings {
  bool blocking = true;
  std::string name;
};
// Reads the fields of `config` that its `size` covers (older and newer
// struct versions alike); NULL keeps `defaults`.
ncclResult_t parseConfig(const char* fn, const ncclConfig_t* config, const CommSettings& defaults,
                         CommSettings* out);
ncclComm* newComm(const CommSettings& s, int cudaDev);
// Makes `c` ready around the created weft communicator.
void publish(ncclComm* c, weft_comm_t wc);
// A reference that keeps the comm's memory alive while a call uses it, so
// that ncclCommAbort from another thread (a framework's watchdog) cannot
// free it under a collective in progress.
using CommRef = std::shared_ptr<ncclComm>;
// The live, created communicator behind `comm` (waiting for a creation
// running on a worker thread). Errors: NULL or dead handle, a creation that
// failed or is deferred to the open group, a finalized comm (unless allowed).
ncclResult_t acquire(ncclComm_t comm, const char* fn, CommRef* out, bool allowFinalized = false);
// The live handle `comm` in any state, or NULL.
CommRef lookup(ncclComm_t comm);
inline bool isLive(ncclComm_t comm) { return lookup(comm) != nullptr; }

// Creates the weft communicator: returns ncclSuccess and sets *out (NULL
// for a split's NCCL_SPLIT_NOCOLOR), or an error with *err explaining it.
using CreateFn = std::function<ncclResult_t(weft_comm_t* out, std::string* err)>;
// Runs `fn` on the calling thread and publishes the outcome in `c` (which
// may be NULL: a communicator made anyway is then destroyed).
ncclResult_t runCreation(ncclComm* c, const CreateFn& fn, std::string* err);
// Creates now (blocking), on c's worker thread (async: ncclInProgress), or
// at the outermost ncclGroupEnd (inside a group). *out = c at once, except
// for a blocking creation that fails (c is then freed, *out untouched).
ncclResult_t create(ncclComm_t* out, ncclComm* c, CreateFn fn, bool async);
// Starts `fn` on c's worker thread.
void startCreationThread(ncclComm* c, CreateFn fn);
// Waits for c's worker thread, if any.
void settle(ncclComm* c);
// Waits for c's worker and drops the handle: calls in progress keep the
// memory until they return.
void deleteComm(ncclComm* c);

// ---- groups (group.cc) --------------------------------------------------
bool inGroup();
// A creation called inside a group runs at the outermost ncclGroupEnd.
void deferCreation(ncclComm* c, CreateFn fn, bool async);
// Returns `r`. When it is an error and a group is open, the whole group
// will fail at ncclGroupEnd without running anything, with this call's
// error (weft does the same for the calls it refuses itself).
ncclResult_t groupRefused(ncclResult_t r);

// Ends the one-sided channel before the comm's weft communicator goes
// (abort: at once; else puts nobody waited for are dropped with a warning).
void closeOneSided(ncclComm* c, bool abort);

// ncclInvalidUsage when `c` is suspended (ncclCommSuspend), naming `fn`.
ncclResult_t refuseIfSuspended(ncclComm* c, const char* fn);

// ---- reduction operators (redop.cc) ------------------------------------
// The NCCL_* variables the shim knows (translated, read itself, or named as
// ignored), with their values now (or what the shim assumes when unset).
std::vector<std::pair<std::string, std::string>> ncclVariables();

// The weft op of NCCL op `op`: a built-in, or one ncclRedOpCreatePreMulSum
// made (weft's own value, checked by weft at the call).
ncclResult_t resolveOp(ncclComm* c, const char* fn, ncclRedOp_t op, weft_op_t* out);

// ---- CUDA, when the process has it (cuda.cc) ---------------------------
// Looks (again) for a CUDA runtime or driver already loaded in the process.
void probeCuda();
// True when `p` is CUDA device (or managed) memory; false for host memory or
// when the process has no CUDA.
bool isDeviceMemory(const void* p);
// Waits for `stream` when a CUDA runtime is present; ncclSuccess otherwise.
ncclResult_t syncStream(ncclComm* c, const char* fn, cudaStream_t stream);
// The calling thread's CUDA device, or 0.
int currentCudaDevice();
// Device memory through the CUDA runtime: 1 allocated, 0 no usable CUDA
// in the process, -1 CUDA refused (*err says why).
int cudaAlloc(void** ptr, size_t size, std::string* err);
bool cudaRelease(void* ptr);

// ---- environment and logging (env.cc) ----------------------------------
// Maps the NCCL_* variables onto WEFT_* ones (see docs/nccl-shim.md) and,
// the first time logging asks for it, prints "weft <v> (NCCL ABI 2.28)".
// Called by every function that creates an id or a communicator.
void prepareProcess();
// NCCL_COMM_ID: the id every rank derives from it (false when unset).
bool idFromCommIdEnv(weft_unique_id_t* id, std::string* err);
// Under NCCL_COMM_ID, rank 0 starts the rendezvous root when it joins.
ncclResult_t startCommIdRoot(const weft_unique_id_t& id, int rank, std::string* err);
// NCCL_COMM_BLOCKING=0 makes communicators nonblocking by default.
bool defaultBlocking();

}  // namespace shim
}  // namespace weft
