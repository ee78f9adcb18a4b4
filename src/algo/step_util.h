// Small helpers for builders: step constructors that read like the
// algorithm ("send chunk to next", "receive into ...").
#pragma once

#include <algorithm>
#include <vector>

#include "algo/schedule.h"

namespace weft {

// A step of `kind` (the fields a kind does not use stay default).
inline Step makeStep(StepKind kind, int peer, BufRef a, BufRef b, BufRef dst, size_t bytes) {
  Step s;
  s.kind = kind;
  s.peer = peer;
  s.a = a;
  s.b = b;
  s.dst = dst;
  s.bytes = bytes;
  return s;
}
inline Step sendStep(int peer, BufRef src, size_t bytes) {
  return makeStep(StepKind::Send, peer, src, {}, {}, bytes);
}
inline Step recvStep(int peer, BufRef dst, size_t bytes) {
  return makeStep(StepKind::Recv, peer, {}, {}, dst, bytes);
}
// Receive into `tmp`, then dst = own op tmp.
inline Step recvReduceStep(int peer, BufRef own, BufRef tmp, BufRef dst, size_t bytes) {
  return makeStep(StepKind::RecvReduce, peer, own, tmp, dst, bytes);
}
// dst = a op b (local).
inline Step reduceStep(BufRef a, BufRef b, BufRef dst, size_t bytes) {
  return makeStep(StepKind::Reduce, -1, a, b, dst, bytes);
}
inline Step copyStep(BufRef src, BufRef dst, size_t bytes) {
  return makeStep(StepKind::Copy, -1, src, {}, dst, bytes);
}
inline Step divideStep(BufRef dst, size_t bytes) {
  return makeStep(StepKind::Divide, -1, {}, {}, dst, bytes);
}
// dst = the fold in rank order of `own` (this rank's piece) and the other
// ranks' pieces of `bytes` each, rank q's at pieces + q * bytes
// (StepKind::Fold).
inline Step foldStep(BufRef own, BufRef pieces, BufRef dst, size_t bytes) {
  return makeStep(StepKind::Fold, -1, own, pieces, dst, bytes);
}
// Where the piece of rank q lies among a Fold step's pieces.
inline BufRef foldPieceAt(BufRef pieces, int q, size_t bytes) {
  return BufRef{pieces.buf, pieces.off + static_cast<size_t>(q) * bytes};
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

// What a builder of a one-block collective starts with: nothing to move, or
// one rank (a copy unless in place; AVG over one rank divides by 1). True
// when that was all.
inline bool trivialSchedule(const CollArgs& a, const BuildParams& p, size_t bytes, Schedule* s) {
  if (bytes == 0) return true;
  if (p.nranks > 1) return false;
  if (!a.inPlace) s->add(copyStep(sendAt(0), recvAt(0), bytes));
  return true;
}

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
