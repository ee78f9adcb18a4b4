// The threads' call slots and the freeing side's wait (call_guard.h).
#include "api/call_guard.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace weft {
namespace callguard {

bool gCallersFence = true;

namespace {

std::mutex& slotsMu() {
  static std::mutex m;
  return m;
}
// Every slot handed out, never freed (a scan may read one at any time); an
// exiting thread's slot goes to the next new thread.
std::vector<Slot*>& slots() {
  static auto* v = new std::vector<Slot*>;
  return *v;
}
std::vector<Slot*>& spareSlots() {
  static auto* v = new std::vector<Slot*>;
  return *v;
}

bool gMembarrier = false;

int membarrier(int cmd) { return static_cast<int>(syscall(__NR_membarrier, cmd, 0, 0)); }

// Every thread of the process has executed a full memory barrier since the
// call began (callers that fence themselves need none).
void heavyBarrier() {
  if (gMembarrier && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
    membarrier(MEMBARRIER_CMD_GLOBAL);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

// Gives the thread's slot back when the thread exits.
struct Owner {
  Slot* slot = nullptr;
  ~Owner() {
    if (!slot) return;
    slot->comm.store(nullptr, std::memory_order_release);
    tSlot = nullptr;
    std::lock_guard<std::mutex> lk(slotsMu());
    spareSlots().push_back(slot);
    slot = nullptr;
  }
};

}  // namespace

Slot* newSlotForThread() {
  thread_local Owner owner;
  std::lock_guard<std::mutex> lk(slotsMu());
  if (!owner.slot) {
    if (!spareSlots().empty()) {
      owner.slot = spareSlots().back();
      spareSlots().pop_back();
    } else {
      owner.slot = new Slot;
      slots().push_back(owner.slot);
    }
  }
  tSlot = owner.slot;
  return owner.slot;
}

void setUp() {
  static std::once_flag once;
  std::call_once(once, [] {
    gMembarrier = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
    gCallersFence = !gMembarrier;
  });
}

bool waitForCallers(const Comm* c, double timeoutS) {
  heavyBarrier();
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutS);
  for (int round = 0;; ++round) {
    bool inside = false;
    {
      std::lock_guard<std::mutex> lk(slotsMu());
      for (Slot* s : slots())
        if (s->comm.load(std::memory_order_acquire) == c) {
          inside = true;
          break;
        }
    }
    if (!inside) return true;
    if (std::chrono::steady_clock::now() > end) return false;
    // A caller leaves within microseconds of the abort; one still inside
    // after that is descheduled or waiting for the comm's lock.
    std::this_thread::sleep_for(std::chrono::microseconds(round < 100 ? 20 : 1000));
  }
}

}  // namespace callguard
}  // namespace weft
