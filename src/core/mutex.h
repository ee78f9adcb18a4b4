// A mutex of one futex word (Drepper, "Futexes Are Tricky", mutex 2): the
// uncontended lock and unlock are one atomic instruction each, inline,
// where pthread_mutex_lock and unlock took some 55 instructions together,
// a twentieth of a small shared-memory collective. Contended, a waiter
// sleeps on the word. Not recursive; Lockable, so std::lock_guard,
// std::unique_lock and std::condition_variable_any work with it.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace weft {

class Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() {
    uint32_t c = 0;
    if (state_.compare_exchange_strong(c, 1, std::memory_order_acquire)) return;
    lockSlow(c);
  }
  bool try_lock() {
    uint32_t c = 0;
    return state_.compare_exchange_strong(c, 1, std::memory_order_acquire);
  }
  void unlock() {
    if (state_.exchange(0, std::memory_order_release) == 2) wakeOne();
  }

 private:
  // 0: free; 1: held; 2: held, and someone may sleep on it.
  void lockSlow(uint32_t c) {
    if (c != 2) c = state_.exchange(2, std::memory_order_acquire);
    while (c != 0) {
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, 2, nullptr,
              nullptr, 0);
      c = state_.exchange(2, std::memory_order_acquire);
    }
  }
  void wakeOne() {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr,
            nullptr, 0);
  }
  std::atomic<uint32_t> state_{0};
};
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex word");

}  // namespace weft
