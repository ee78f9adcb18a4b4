// The schedule side of compression (docs/compression.md): which algorithms
// a compressed call may run on, and where each message's wire bytes live.
// The builders know nothing of it; the engine (src/exec/op_steps.cc) narrows
// and widens at the regions laid out here.
#include "algo/schedule.h"

namespace weft {

bool algoCarriesWire(Algo a, CollType t) {
  switch (t) {
    case CollType::AllReduce:
      return a == Algo::Ring || a == Algo::Fold || a == Algo::Shm;
    case CollType::ReduceScatter:
      return a == Algo::Ring || a == Algo::Fold || a == Algo::Direct || a == Algo::Shm;
    case CollType::Reduce:
      return a == Algo::Fold || a == Algo::Direct || a == Algo::Shm;
    default:
      return false;
  }
}

// One region per transfer step, back to back (16-byte aligned, so the
// vector kernels read whole lines). Regions are not shared between steps:
// the schedule's dependencies say when a step's data may be overwritten,
// not when its transfer has left, so sharing would need more bookkeeping
// than the memory is worth at these sizes (see docs/compression.md).
void layOutWire(Wire w, Schedule* s) {
  s->wireOff.assign(s->steps.size(), 0);
  if (w == Wire::None) return;
  size_t at = (s->scratchBytes + 15) & ~size_t{15};
  for (size_t i = 0; i < s->steps.size(); ++i) {
    const Step& st = s->steps[i];
    if (st.kind != StepKind::Send && st.kind != StepKind::Recv && st.kind != StepKind::RecvReduce)
      continue;
    s->wireOff[i] = at;
    at += (wireBytes(w, st.bytes / 4) + 15) & ~size_t{15};
  }
  s->scratchBytes = at;
}

}  // namespace weft
