// The CPU, as waiting code sees it: how many cores this process may use, and
// the pause instruction of spin loops.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace weft {

// CPUs in this process's affinity mask (at least 1).
int usableCpus();
// This process's affinity mask: bit i of word i / 64 is CPU i.
std::vector<uint64_t> affinityMask();
// CPUs in the union of the masks (0 when there are none).
int cpusInUnion(const std::vector<const std::vector<uint64_t>*>& masks);

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// How long a waiting rank spins before it yields or sleeps. At most the
// longest spin (WEFT_SPIN_US; auto: 100 us when every rank of the host has
// a core, 0 when ranks outnumber cores), adapted to how long waits last: a
// wait shorter than the longest spin means the peer was running, and a spin
// twice that long would have caught it; a longer one means it was not (other
// load, or sharing this core), so spin 4x less and give the core away sooner.
class SpinBudget {
 public:
  // spinUs: WEFT_SPIN_US (-1 = auto).
  void configure(long spinUs, bool oversubscribed) {
    if (spinUs < 0) spinUs = oversubscribed ? 0 : 100;
    max_ = cur_ = static_cast<uint64_t>(spinUs) * 1000;
  }
  uint64_t ns() const { return cur_; }
  void afterWait(uint64_t waitedNs) {
    if (waitedNs < max_)
      cur_ = std::min(max_, std::max(cur_ * 2, 2 * waitedNs + 1000));
    else
      cur_ = std::max<uint64_t>(max_ ? 1000 : 0, cur_ / 4);
  }

 private:
  uint64_t max_ = 0, cur_ = 0;
};

}  // namespace weft
