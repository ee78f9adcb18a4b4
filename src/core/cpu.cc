#include "core/cpu.h"

#include <sched.h>
#include <unistd.h>

namespace weft {

std::vector<uint64_t> affinityMask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<uint64_t> words;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return words;
  words.assign((CPU_SETSIZE + 63) / 64, 0);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) words[c / 64] |= 1ull << (c % 64);
  while (!words.empty() && words.back() == 0) words.pop_back();
  return words;
}

int cpusInUnion(const std::vector<const std::vector<uint64_t>*>& masks) {
  std::vector<uint64_t> u;
  for (const auto* m : masks) {
    if (m->size() > u.size()) u.resize(m->size(), 0);
    for (size_t i = 0; i < m->size(); ++i) u[i] |= (*m)[i];
  }
  int n = 0;
  for (uint64_t w : u) n += __builtin_popcountll(w);
  return n;
}

int usableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace weft
