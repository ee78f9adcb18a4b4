// Compressed ops (CollArgs::wire, docs/compression.md): the engine's half of
// it. A Send narrows its float32 bytes into the step's wire region
// (Schedule::wireOff) and posts those; a Recv receives wire bytes there and
// widens them into its destination; a RecvReduce receives them there and
// adds them, widened, to its other operand in float32 (op_steps.cc's
// reduceStep). Builders are unchanged: they move float32 bytes, and only
// what crosses a transport is narrow.
//
// The one rule that keeps every rank's result bitwise equal: a send that
// reads the receive buffer writes back what it sent. The algorithms that
// carry a wire format (algoCarriesWire) compute each result element on one
// rank and send it from the receive buffer, so the owner then holds the
// same rounded value as every rank that receives it; a partial sum sent
// from there is overwritten later, so rounding it in place costs nothing.
// The user's send buffer (BufId::Send) is never written.
#include "core/clock.h"
#include "exec/engine.h"
#include "kernels/cpu/wire.h"

namespace weft {

const uint8_t* Engine::narrowForSend(Op& op, size_t i) {
  const Step& s = op.schedule().steps[i];
  const bool timed = tel_ && op.rec.timeWork;
  const uint64_t t0 = timed ? nowNs() : 0;
  uint8_t* w = wireAt(op, i);
  // Narrowed already, on an attempt the transport had no room for.
  if (op.state[i] == Op::kNarrowed) return w;
  op.state[i] = Op::kNarrowed;
  auto* src = reinterpret_cast<float*>(bind(op, s.a));
  wireNarrow(w, src, s.bytes / 4, op.args.wire, s.a.buf == BufId::Recv ? src : nullptr);
  if (timed) op.rec.addWork(telemetry::SpanKind::Copy, t0, nowNs(), tel_->wantSpans());
  return w;
}

void Engine::widenRecv(Op& op, size_t i) {
  const Step& s = op.schedule().steps[i];
  const bool timed = tel_ && op.rec.timeWork;
  const uint64_t t0 = timed ? nowNs() : 0;
  wireWiden(reinterpret_cast<float*>(bind(op, s.dst)), wireAt(op, i), s.bytes / 4, op.args.wire);
  if (timed) op.rec.addWork(telemetry::SpanKind::Copy, t0, nowNs(), tel_->wantSpans());
}

}  // namespace weft
