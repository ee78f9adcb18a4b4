// What telemetry keeps of one operation: what it was, how it ran, and its
// times on this rank's clock. The engine and the arena fill it while the op
// runs (a few clock reads and adds); Telemetry::end() files it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace weft {
namespace telemetry {

// Transports of one communicator, by the index Telemetry gave them.
constexpr int kMaxTransports = 6;
// Spans of local work kept per op for the timeline (merged when adjacent).
constexpr int kMaxSpans = 8;
// The local work (copies, reductions) of smaller ops is not timed unless the
// timeline wants its spans: two clock reads per phase would cost up to 2% of
// a 64 KiB op; at 256 KiB and up they stay under 1%.
constexpr size_t kTimedWorkBytes = 256 << 10;

enum class SpanKind : uint8_t { Reduce = 0, Copy = 1 };

struct Span {
  uint64_t beginNs, endNs;
  SpanKind kind;
};

struct OpRecord {
  // What.
  uint64_t seq = 0;    // collective number on the comm (0: point-to-point)
  uint8_t type = 0;    // CollType
  uint8_t dtype = 0;   // weft_datatype_t
  uint8_t op = 0;      // weft_op_t
  int32_t root = -1;   // root, or peer of a send / recv
  uint64_t count = 0;  // elements, as passed to the API
  uint64_t bytes = 0;  // the size nccl-tests reports for it (algbw = bytes / time)
  const char* algo = "";
  uint8_t repro = 0;   // Repro: how a float SUM / AVG / PROD was computed (WEFT_REPRO)
  uint32_t fusedCalls = 0;  // a fused allreduce: the calls it carries (0: not fused)
  uint8_t wire = 0;    // Wire: the format its messages carried (WEFT_WIRE; shm arena: none)
  // When (this rank's monotonic clock, ns).
  uint64_t entryNs = 0;      // the API call
  uint64_t arrivalNs = 0;    // the last rank's entry (>= entryNs when this rank waited)
  int32_t lastRank = -1;     // who that was; -1 unknown
  uint64_t firstByteNs = 0;  // first data from a peer (0: none)
  uint64_t endNs = 0;
  uint64_t gapNs = 0;        // since this rank's previous op ended (compute / input)
  uint64_t reduceNs = 0;     // reducing
  uint64_t copyNs = 0;       // copying in and out of staging
  uint64_t sent[kMaxTransports] = {};  // bytes sent, by transport
  int32_t status = 0;        // weft_result_t
  bool timeWork = false;     // time the local work (kTimedWorkBytes, or the timeline)
  // Carried while the op runs: the latest arrival stamp seen (stamp.h).
  uint64_t stamp = 0;
  // Spans of local work, for the timeline (only filled when it is on).
  uint8_t nspans = 0;
  Span spans[kMaxSpans];

  // Adds [b, e) of local work: to the totals, and to the spans when wanted.
  void addWork(SpanKind k, uint64_t b, uint64_t e, bool keepSpan) {
    (k == SpanKind::Reduce ? reduceNs : copyNs) += e - b;
    if (!keepSpan) return;
    if (nspans && spans[nspans - 1].kind == k && b - spans[nspans - 1].endNs < 2000) {
      spans[nspans - 1].endNs = e;
    } else if (nspans < kMaxSpans) {
      spans[nspans++] = Span{b, e, k};
    } else {
      spans[nspans - 1].endNs = e;  // out of room: the last span grows
    }
  }
};

// Telemetry::end copies records into its ring with memcpy.
static_assert(std::is_trivially_copyable<OpRecord>::value, "OpRecord must stay plain data");

}  // namespace telemetry
}  // namespace weft
