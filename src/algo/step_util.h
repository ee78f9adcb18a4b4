// Small helpers for builders: step constructors that read like the
// algorithm ("send chunk to next", "receive into ...").
#pragma once

#include <algorithm>
#include <vector>

#include "algo/schedule.h"

namespace weft {

inline Step sendStep(int peer, BufRef src, size_t bytes) {
  Step s;
  s.kind = StepKind::Send;
  s.peer = peer;
  s.a = src;
  s.bytes = bytes;
  return s;
}
inline Step recvStep(int peer, BufRef dst, size_t bytes) {
  Step s;
  s.kind = StepKind::Recv;
  s.peer = peer;
  s.dst = dst;
  s.bytes = bytes;
  return s;
}
// Receive into `tmp`, then dst = own op tmp.
inline Step recvReduceStep(int peer, BufRef own, BufRef tmp, BufRef dst, size_t bytes) {
  Step s;
  s.kind = StepKind::RecvReduce;
  s.peer = peer;
  s.a = own;
  s.b = tmp;
  s.dst = dst;
  s.bytes = bytes;
  return s;
}
// dst = a op b (local).
inline Step reduceStep(BufRef a, BufRef b, BufRef dst, size_t bytes) {
  Step s;
  s.kind = StepKind::Reduce;
  s.a = a;
  s.b = b;
  s.dst = dst;
  s.bytes = bytes;
  return s;
}
inline Step copyStep(BufRef src, BufRef dst, size_t bytes) {
  Step s;
  s.kind = StepKind::Copy;
  s.a = src;
  s.dst = dst;
  s.bytes = bytes;
  return s;
}
inline Step divideStep(BufRef dst, size_t bytes) {
  Step s;
  s.kind = StepKind::Divide;
  s.dst = dst;
  s.bytes = bytes;
  return s;
}
// The steps that wrote (or read) consecutive chunks of a byte range
// [lo, hi) of a buffer, so that a later step on any sub-range can wait for
// exactly those.
struct Span {
  size_t lo, hi, chunk;
  std::vector<uint32_t> steps;  // one per chunk
};
// Makes the last step added wait for every logged step overlapping [x, y).
inline void waitForWrites(const std::vector<Span>& log, size_t x, size_t y, Schedule* s) {
  const uint32_t last = static_cast<uint32_t>(s->steps.size() - 1);
  for (const Span& sp : log) {
    if (y <= sp.lo || x >= sp.hi) continue;
    const size_t a = std::max(x, sp.lo) - sp.lo, b = std::min(y, sp.hi) - sp.lo;
    for (size_t j = a / sp.chunk; j <= (b - 1) / sp.chunk; ++j) s->addDep(last, sp.steps[j]);
  }
}

inline BufRef sendAt(size_t off) { return BufRef{BufId::Send, off}; }
inline BufRef recvAt(size_t off) { return BufRef{BufId::Recv, off}; }
inline BufRef scratchAt(size_t off) { return BufRef{BufId::Scratch, off}; }

// Number of chunks of at most chunkBytes (rounded to whole elements) that
// cover `bytes`, and the byte range of chunk j.
struct Chunker {
  size_t bytes, chunk;
  Chunker(size_t total, size_t chunkBytes, size_t elt) : bytes(total) {
    size_t e = chunkBytes / elt;
    chunk = (e ? e : 1) * elt;
  }
  size_t count() const { return (bytes + chunk - 1) / chunk; }
  size_t off(size_t j) const { return j * chunk; }
  size_t len(size_t j) const { return bytes - j * chunk < chunk ? bytes - j * chunk : chunk; }
};

}  // namespace weft
