// State the C API keeps between calls: the registry of live communicator
// handles (so that a destroyed or made-up handle is refused with a clear
// error instead of crashing), the per-thread and per-comm last error, and
// the per-thread group being recorded.
#pragma once

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

// Records `st` as the last error of the calling thread and of `comm` (if
// any) and returns its code.
weft_result_t setError(weft_comm_t comm, const Status& st);
weft_result_t setError(Comm* comm, const Status& st);

// One recorded call of a group.
struct PendingCall {
  std::shared_ptr<Comm> comm;
  CollArgs args;
  weft_datatype_t dtype;
  const void* send;
  void* recv;
  bool stageSend = false;  // set by issueCalls
};
struct GroupState {
  int depth = 0;
  std::vector<PendingCall> calls;
  Status error;  // first error recorded inside the group
};
GroupState& threadGroup();

// Issues `calls` (all comms' ops enqueued in order) and, when `wait`, drives
// them to completion. Returns the shared tracker.
Status issueCalls(std::vector<PendingCall>& calls, bool wait,
                  std::shared_ptr<OpTracker>* trackerOut,
                  std::vector<std::shared_ptr<Comm>>* commsOut);

}  // namespace weft

struct weft_request {
  std::shared_ptr<weft::OpTracker> tracker;
  std::vector<std::shared_ptr<weft::Comm>> comms;
};
