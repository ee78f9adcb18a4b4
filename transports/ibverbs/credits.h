// Credit-based flow control for messages into pre-posted receive slots.
//
// Each side of a queue pair posts `slots` receive buffers. A sender may only
// send while it holds a credit (one per free slot at its peer); the
// receiver, as it consumes slots and posts them again, owes credits back and
// returns them piggybacked on any message it sends, or, once it owes half
// the window and has nothing to send, in a credit-only message. The last
// credit is kept for that credit-only message, so two sides that both ran
// out of credits can always tell each other about freed slots: no deadlock.
//
// Pure code (no verbs header): unit-tested without a device.
#pragma once

#include <cstdint>

namespace weft {
namespace ib {

class CreditWindow {
 public:
  explicit CreditWindow(uint32_t slots) : slots_(slots), credits_(slots) {}

  // Sender side.
  // A data or control message may go: takes a credit (never the last).
  bool takeForData();
  // A credit-only message may go: may take the last credit.
  bool takeForCreditReturn();
  // Credits returned by the peer (piggybacked or credit-only).
  void grant(uint32_t n) { credits_ += n; }
  uint32_t credits() const { return credits_; }

  // Receiver side.
  // A slot was consumed and posted again: one more credit owed to the peer.
  void slotReposted() { ++owed_; }
  // Credits to piggyback on an outgoing message (all owed; resets).
  uint32_t takeOwed() {
    uint32_t n = owed_;
    owed_ = 0;
    return n;
  }
  // Whether a credit-only message is due (half the window owed).
  bool creditReturnDue() const { return owed_ > 0 && owed_ * 2 >= slots_; }
  uint32_t owed() const { return owed_; }
  uint32_t slots() const { return slots_; }

 private:
  uint32_t slots_;
  uint32_t credits_;
  uint32_t owed_ = 0;
};

}  // namespace ib
}  // namespace weft
