// Fault injection for test builds (-DWEFT_TEST_HOOKS=ON, the default when
// the tests are built): WEFT_TEST_FAULTS names faults the transports inject
// on this process's communicators, so that tests/soak/ can check that
// every op under a fault either completes with the right result on every
// rank or fails on every rank, within the timeout (docs/fault-injection.md).
//
//   WEFT_TEST_FAULTS = item[,item...]
//   item             = kind[:ms] ('@' N | '%' P)
//
//   delay:MS  a send waits MS milliseconds before it is handed to the wire
//   short     tcp: one read or write moves a few bytes only (a short
//             read or write, which the kernel may do at any time)
//   drop      the connection to the peer of a send is dropped (tcp: its
//             streams shut down; shm: the channel closed; ucx: its
//             endpoints closed) and the send fails
//   corrupt   one bit of a field the receiver checks flips in the header
//             of a message on the wire (tcp part header, shm slot header,
//             ucx message header)
//
//   @N  the fault fires once, at the N-th event of its site on the
//       communicator (1 = the first): a send for delay, drop and corrupt,
//       a read or write system call for short
//   %P  it fires at each event with probability P in (0, 1], drawn from
//       WEFT_TEST_FAULT_SEED (default 1) and the rank
//
// Sites hold a shared_ptr<FaultPlan>: null (one test of a pointer) unless
// faults were asked for; builds without test hooks never make one.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"

namespace weft {

enum class FaultKind : uint8_t { Delay, Short, Drop, Corrupt };
constexpr int kFaultKinds = 4;

struct FaultRule {
  FaultKind kind = FaultKind::Delay;
  int ms = 0;              // delay
  uint64_t at = 0;         // @N: fire at this event (1-based); 0 = use prob
  double prob = 0;         // %P
};

// Parses a WEFT_TEST_FAULTS value; on error `*out` is untouched and the
// Status (INVALID_ARGUMENT) says what is wrong where.
Status parseFaultSpec(const std::string& spec, std::vector<FaultRule>* out);
// The spec a list of rules prints as (parses back to the same rules).
std::string formatFaultSpec(const std::vector<FaultRule>& rules);

class FaultPlan {
 public:
  // Null in *out when `spec` is empty.
  static Status make(const std::string& spec, uint64_t seed, int rank,
                     std::shared_ptr<FaultPlan>* out);

  // An event of `k`'s site: true when its fault fires now (then logged at
  // WARN, naming the fault and the event).
  bool fire(FaultKind k, const char* where);
  // A delay rule's milliseconds.
  int delayMs() const { return delayMs_; }
  // A pseudo-random number (which bit to flip, how short a read).
  uint64_t draw();
  // How often each kind fired so far.
  uint64_t fired(FaultKind k) const { return fired_[static_cast<int>(k)].load(); }

 private:
  std::vector<FaultRule> rules_;
  int rank_ = 0;
  int delayMs_ = 0;
  std::atomic<uint64_t> events_[kFaultKinds] = {};
  std::atomic<uint64_t> fired_[kFaultKinds] = {};
  std::mutex rngMu_;
  uint64_t rng_ = 0;
};

// Flips bit `bit` % (8 * bytes) of the field at `p` (a checked header field).
void flipBit(void* p, size_t bytes, uint64_t bit);

}  // namespace weft
