// weft-telemetry-cost: what telemetry adds to one op, measured on the code
// the engine and the arena run per op (src/telemetry), without peers: the
// entry and end bookkeeping, the clock reads of a one-shot arena allreduce
// (copy in, reduce), a received stamp, the ring and the aggregates. The
// wall-clock comparison (weft-perf with WEFT_TELEMETRY=0 and 1) is in
// docs/telemetry.md; this isolates the part that noise hides there.
//
//   weft-telemetry-cost [ops]       prints ns per op, with and without spans
#include <cstdio>
#include <cstdlib>

#include "algo/schedule.h"
#include "core/clock.h"
#include "telemetry/telemetry.h"

using namespace weft;
using namespace weft::telemetry;

namespace {

double run(Telemetry& t, long ops) {
  const bool spans = t.wantSpans();
  const uint64_t peerStamp = makeStamp(t.toGlobal(nowNs()), 1);
  const uint64_t t0 = nowNs();
  for (long i = 0; i < ops; ++i) {
    OpRecord r;
    r.seq = static_cast<uint64_t>(i + 1);
    r.type = static_cast<uint8_t>(CollType::AllReduce);
    r.count = 2;
    r.bytes = 8;
    r.algo = "shm";
    t.begin(r, nowNs());
    if (spans) {  // small phases are timed only for the timeline (record.h)
      uint64_t a = nowNs();  // phase A: copy in
      r.addWork(SpanKind::Copy, a, nowNs(), spans);
    }
    const uint64_t b = spans ? nowNs() : 0;  // phase B: reduce
    r.stamp = laterStamp(r.stamp, peerStamp);
    if (spans) r.addWork(SpanKind::Reduce, b, nowNs(), spans);
    t.end(r, 0, nowNs());
  }
  return static_cast<double>(nowNs() - t0) / static_cast<double>(ops);
}

}  // namespace

int main(int argc, char** argv) {
  const long ops = argc > 1 ? atol(argv[1]) : 2000000;
  Setup s;
  s.rank = 0;
  s.nranks = 2;
  s.hostnames = {"a", "a"};
  s.hostHashes = {1, 1};
  s.pids = {1, 2};
  s.transports = {"self", "shm"};
  s.transportGBs = {10, 4};
  s.transportPeers = {1, 1};
  // The loop with nothing but the clock reads, for reference.
  const uint64_t c0 = nowNs();
  uint64_t sink = 0;
  for (long i = 0; i < ops; ++i) sink += nowNs() & 1;
  const double clockNs = static_cast<double>(nowNs() - c0) / static_cast<double>(ops);
  Telemetry on(s);
  const double nsOn = run(on, ops);
  s.config.timelinePath = "/dev/null";
  Telemetry tl(s);
  const double nsTl = run(tl, ops);
  printf("# weft-telemetry-cost: %ld ops of an 8-byte arena allreduce's bookkeeping\n", ops);
  printf("one clock read          %7.1f ns\n", clockNs);
  printf("telemetry per op        %7.1f ns  (2 clock reads included)\n", nsOn);
  printf("  with WEFT_TIMELINE    %7.1f ns  (to /dev/null)\n", nsTl);
  return sink == 12345 ? 1 : 0;
}
