// Which communicator each thread is calling into, so that weft_comm_abort
// (or destroy) on one thread frees a communicator only after every other
// thread has left it. A watchdog aborts a comm while the main thread waits
// in a collective on it: that call returns WEFT_ERR_ABORTED and touches the
// comm on its way out (its lock, its last error), so the comm must outlive it.
//
// The callers' side costs two plain stores per call (no atomic
// read-modify-write, no fence): a thread publishes the comm in its slot,
// then checks that the comm is still registered (the registry generation).
// The freeing side, after unregistering, makes every thread of the process
// execute a memory barrier (membarrier(2)); from then on a caller either
// saw the new generation and backs off, or its slot is visible, and the
// freeing side waits until that slot is cleared. Where membarrier is not
// available (old kernels, some sandboxes), callers use a full fence instead.
#pragma once

#include <atomic>

namespace weft {

class Comm;

namespace callguard {

struct Slot {
  std::atomic<const Comm*> comm{nullptr};
};

// This thread's slot, registered for the freeing side's scan on first use
// and released when the thread exits. A plain TLS word (see errors.cc on
// the TLS model: libweft.so must load with dlopen, so no initial-exec).
inline thread_local Slot* tSlot = nullptr;
Slot* newSlotForThread();
inline Slot* slotForThread() {
  Slot* s = tSlot;
  return s ? s : newSlotForThread();
}
// Set once, before the first communicator exists: callers fence themselves
// when membarrier(2) cannot do it for them.
extern bool gCallersFence;

// The caller's side. enter() publishes `c` and orders that store before
// the caller's next load (the registry generation check).
inline void enter(const Comm* c) {
  slotForThread()->comm.store(c, std::memory_order_relaxed);
  if (gCallersFence)
    std::atomic_thread_fence(std::memory_order_seq_cst);
  else
    std::atomic_signal_fence(std::memory_order_seq_cst);
}
// Everything this thread did with the comm happens before the clear.
inline void leave() { slotForThread()->comm.store(nullptr, std::memory_order_release); }

// Leaves at the end of the scope (an API call).
struct Scope {
  Scope() = default;
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope() { leave(); }
};

// Called once before the first communicator is registered.
void setUp();

// The freeing side, after unregistering `c`: waits until no thread is in a
// call on it. False if one still was after `timeoutS` (the comm must then
// not be freed).
bool waitForCallers(const Comm* c, double timeoutS);

}  // namespace callguard
}  // namespace weft
