// State the C API keeps between calls: the registry of live communicator
// handles (so that a destroyed or made-up handle is refused with a clear
// error instead of crashing), the per-thread and per-comm last error, and
// the per-thread group being recorded.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "algo/schedule.h"
#include "api/comm.h"
#include "core/status.h"

namespace weft {

constexpr uint64_t kCommMagic = 0x7765667463306d6dull;

void registerComm(weft_comm_t c);
void unregisterComm(weft_comm_t c);
// The live Comm behind a handle, or nullptr (with *st set) when the handle
// is NULL, destroyed, or not a communicator.
std::shared_ptr<Comm> lookupComm(weft_comm_t c, Status* st);
// The same for the hot path of collective calls: cached per thread while no
// communicator is created or destroyed (errors.cc). The registry keeps the
// Comm alive until its handle is destroyed.
Comm* lookupCommCached(weft_comm_t c, Status* st);
// Moves whenever a communicator is created or destroyed.
extern std::atomic<uint64_t> gRegistryGen;
inline uint64_t registryGen() { return gRegistryGen.load(std::memory_order_acquire); }

// Whether [a, a + alen) and [b, b + blen) share a byte (empty ranges never do).
inline bool overlaps(const void* a, size_t alen, const void* b, size_t blen) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return alen && blen && x < y + blen && y < x + alen;
}

// A handle for a new Comm, registered (api_comm.cc).
weft_comm_t wrapComm(std::shared_ptr<Comm> impl);
// weft_comm_init_rank_config's work: checks the arguments, joins, wraps.
Status initRank(weft_comm_t* comm, int nranks, const weft_unique_id_t& id, int rank,
                const weft_config_t* config);

// Records `st` as the last error of the calling thread and of `comm` (if
// any) and returns its code.
weft_result_t setError(weft_comm_t comm, const Status& st);
weft_result_t setError(Comm* comm, const Status& st);

// One recorded call of a group.
struct PendingCall {
  std::shared_ptr<Comm> comm;
  CollArgs args;
  weft_datatype_t dtype = WEFT_UINT8;
  const void* send = nullptr;
  void* recv = nullptr;
  bool stageSend = false;  // set by issueCalls
  // Stream-ordered calls (device memory, src/api/stream_calls.cc).
  bool onStream = false;
  void* stream = nullptr;
  bool readsSend = false, writesRecv = false;
  void* recvDevice = nullptr;  // the address kernels use for recv
  cuda::BufferDesc bufs[2];    // what CUDA said of the used buffers (device path rule)
  int nbufs = 0;
};
// The last call a thread checked (api_coll.cc): a repeat of it, same comm,
// same arguments and no communicator created or destroyed since, takes the
// checked arguments from here instead of checking them again (a fifth of a
// small shared-memory collective's instructions).
struct CheckMemo {
  const Comm* comm = nullptr;
  uint64_t gen = 0;  // registryGen() when it was checked
  int type = -1, dtype = -1, op = -1, root = -1;
  const void* send = nullptr;
  const void* recv = nullptr;
  size_t count = 0;
  CollArgs args;
  bool needSend = false, needRecv = false;
};
struct GroupState {
  int depth = 0;
  std::vector<PendingCall> calls;
  // Buffers the group's calls read when it is issued (the scaled inputs of
  // pre-multiplied sums): freed when it completes.
  std::vector<std::shared_ptr<void>> keep;
  Status error;  // first error recorded inside the group
  CheckMemo memo;
};
GroupState& threadGroup();

// The scalar of pre-multiplied-sum op `op` (>= WEFT_NUM_OPS) on `c`, for a
// call of `dtype` (api_premul.cc): INVALID_ARGUMENT naming the op when it is
// not live on `c` or was made for another datatype.
Status premulScalar(Comm* c, int op, int dtype, const char* name, unsigned char* out);

// Decides where a checked call runs (src/cuda/mem_rules.h) and fills the
// stream fields of *pc. INVALID_USAGE naming the buffer when refused.
// `now`: the call's clock reading (nowNs), or 0.
Status resolveMemory(const char* name, weft_stream_t stream, bool needSend, bool needRecv,
                     PendingCall* pc, uint64_t now = 0);
// Issues stream-ordered calls as one batch (one gate, one completion) and
// returns at once; the comms' progress threads run them.
Status issueStreamCalls(std::vector<PendingCall>& calls, std::shared_ptr<OpTracker>* trackerOut,
                        std::vector<std::shared_ptr<Comm>>* commsOut);

// Issues `calls` (all comms' ops enqueued in order) and, when `wait`, drives
// them to completion. Returns the shared tracker. Stream-ordered calls are
// issued by issueStreamCalls and never waited for.
Status issueCalls(std::vector<PendingCall>& calls, bool wait,
                  std::shared_ptr<OpTracker>* trackerOut,
                  std::vector<std::shared_ptr<Comm>>* commsOut);

}  // namespace weft

struct weft_request {
  std::shared_ptr<weft::OpTracker> tracker;
  std::vector<std::shared_ptr<weft::Comm>> comms;
  std::vector<std::shared_ptr<void>> keep;  // the group's GroupState::keep
};
