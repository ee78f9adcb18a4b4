#include "exec/op.h"

#include <new>

#include "core/status.h"
#include "core/tag.h"
#include "kernels/cpu/reduce.h"

namespace weft {

namespace {

constexpr uint64_t kP2pTag = 0xFEull;

std::string describeOpTag(uint64_t tag) {
  if (tag == kP2pTag) return "send/recv";
  const auto type = static_cast<CollType>(tag & 0xff);
  const auto dt = static_cast<weft_datatype_t>((tag >> 8) & 0xff);
  const auto op = static_cast<weft_op_t>((tag >> 16) & 0xff);
  std::string s = strFormat("%s #%llu (%s", collName(type),
                            static_cast<unsigned long long>(tag >> 40), datatypeName(dt));
  if (type == CollType::AllReduce || type == CollType::Reduce || type == CollType::ReduceScatter)
    s += strFormat(", %s", opName(op));
  return s +
         strFormat(", count/root %04llx)", static_cast<unsigned long long>((tag >> 24) & 0xffff));
}

// Transports print tags through this (core/tag.h).
struct RegisterDescriber {
  RegisterDescriber() { setTagDescriber(&describeOpTag); }
} gRegister;

}  // namespace

uint64_t opTag(const CollArgs& args, weft_datatype_t dt, uint64_t seq) {
  if (args.type == CollType::Send || args.type == CollType::Recv) return kP2pTag;
  // 16 bits of count and root: ranks that disagree on them get a mismatch
  // even where message lengths happen to agree.
  uint64_t h = (static_cast<uint64_t>(args.count) * 0x9e3779b97f4a7c15ull) ^
               (static_cast<uint64_t>(static_cast<uint32_t>(args.root)) * 0xc2b2ae3d27d4eb4full);
  h ^= h >> 29;
  h = (h * 0xbf58476d1ce4e5b9ull) >> 48;
  const uint8_t op = (args.type == CollType::AllReduce || args.type == CollType::Reduce ||
                      args.type == CollType::ReduceScatter)
                         ? static_cast<uint8_t>(args.op)
                         : 0;
  return opTagWithSeq((h & 0xffff) << 24 | static_cast<uint64_t>(op) << 16 |
                          static_cast<uint64_t>(static_cast<uint8_t>(dt)) << 8 |
                          static_cast<uint64_t>(args.type),
                      seq);
}

std::string Op::describe() const { return describeOp(args, dtype, seq); }

void Op::reset() {
  // Member by member (a new member of Op is reset here too): the vectors
  // keep their capacity, and the record's spans (unused until nspans says
  // so) are left as they are. Rebuilding the whole op took some 250
  // instructions of a small collective's 2,600.
  args = CollArgs();
  dtype = WEFT_FLOAT32;
  sched.steps.clear();
  sched.deps.clear();
  sched.scratchBytes = 0;
  sched.algorithm = "";
  shared.reset();
  runner.reset();
  seq = 0;
  tag = 0;
  send = recv = nullptr;
  sendLen = recvLen = 0;
  scratch.reset();
  scratch.get_deleter() = ScratchFree();
  scratchLen = 0;
  staged.clear();
  state.clear();
  comps.clear();
  lw = nullptr;
  deviceEps = false;
  mem = MemType::Host;
  local.clear();
  firstPending = 0;
  doneCount = 0;
  enqueueNs = 0;
  new (&rec) telemetry::OpRecord;  // default-initialized: spans untouched
  gateOpen = false;
  finished = false;
  status = Status();
  tracker.reset();
}

}  // namespace weft
