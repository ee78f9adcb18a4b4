// The CPU, as waiting code sees it: how many cores this process may use, and
// the pause instruction of spin loops.
#pragma once

namespace weft {

// CPUs in this process's affinity mask (at least 1).
int usableCpus();

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace weft
