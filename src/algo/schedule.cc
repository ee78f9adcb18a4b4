#include "algo/schedule.h"

namespace weft {

const char* collName(CollType t) {
  switch (t) {
    case CollType::AllReduce: return "allreduce";
    case CollType::Broadcast: return "broadcast";
    case CollType::Reduce: return "reduce";
    case CollType::AllGather: return "allgather";
    case CollType::ReduceScatter: return "reduce_scatter";
    case CollType::AllToAll: return "alltoall";
    case CollType::Send: return "send";
    case CollType::Recv: return "recv";
    case CollType::Barrier: return "barrier";
  }
  return "?";
}

const char* stepKindName(StepKind k) {
  switch (k) {
    case StepKind::Send: return "send";
    case StepKind::Recv: return "recv";
    case StepKind::RecvReduce: return "recv_reduce";
    case StepKind::Copy: return "copy";
    case StepKind::Reduce: return "reduce";
    case StepKind::Divide: return "divide";
  }
  return "?";
}

uint32_t Schedule::add(const Step& s, std::initializer_list<uint32_t> stepDeps) {
  Step st = s;
  st.depBegin = static_cast<uint32_t>(deps.size());
  st.depCount = 0;
  for (uint32_t d : stepDeps) {
    if (d == kNoStep) continue;
    deps.push_back(d);
    ++st.depCount;
  }
  steps.push_back(st);
  return static_cast<uint32_t>(steps.size() - 1);
}

void Schedule::addDep(uint32_t step, uint32_t dep) {
  if (dep == kNoStep || steps.empty() || step != steps.size() - 1) return;
  deps.push_back(dep);
  ++steps.back().depCount;
}

size_t sendBytes(const CollArgs& a, int nranks, int) {
  size_t blk = a.count * a.eltSize;
  switch (a.type) {
    case CollType::ReduceScatter:
    case CollType::AllToAll: return blk * nranks;
    case CollType::Recv:
    case CollType::Barrier: return 0;
    default: return blk;
  }
}

size_t recvBytes(const CollArgs& a, int nranks, int) {
  size_t blk = a.count * a.eltSize;
  switch (a.type) {
    case CollType::AllGather:
    case CollType::AllToAll: return blk * nranks;
    case CollType::Send:
    case CollType::Barrier: return 0;
    default: return blk;
  }
}

Status buildSchedule(const CollArgs& args, const BuildParams& p, Schedule* out) {
  *out = Schedule();
  if (p.nranks < 1 || p.rank < 0 || p.rank >= p.nranks)
    return Status(WEFT_ERR_INTERNAL, "buildSchedule: bad rank/nranks");
  if (args.eltSize == 0) return Status(WEFT_ERR_INTERNAL, "buildSchedule: element size 0");
  switch (args.type) {
    case CollType::AllReduce: buildRingAllReduce(args, p, out); break;
    case CollType::ReduceScatter: buildRingReduceScatter(args, p, out); break;
    case CollType::AllGather: buildRingAllGather(args, p, out); break;
    case CollType::Broadcast: buildChainBroadcast(args, p, out); break;
    case CollType::Reduce: buildChainReduce(args, p, out); break;
    case CollType::AllToAll: buildPairwiseAllToAll(args, p, out); break;
    case CollType::Barrier: buildDisseminationBarrier(args, p, out); break;
    case CollType::Send:
    case CollType::Recv: buildPointToPoint(args, p, out); break;
  }
  return Status::ok();
}

}  // namespace weft
