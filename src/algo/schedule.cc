#include "algo/schedule.h"

#include "core/status.h"
#include "kernels/cpu/reduce.h"

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
    case StepKind::Fold: return "fold";
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

uint32_t Schedule::append(const Schedule& sub, BufRef recvTo) {
  const uint32_t first = static_cast<uint32_t>(steps.size());
  const size_t scratchBase = scratchBytes;
  auto map = [&](BufRef r) {
    if (r.buf == BufId::Recv) return BufRef{recvTo.buf, recvTo.off + r.off};
    if (r.buf == BufId::Scratch) return BufRef{BufId::Scratch, scratchBase + r.off};
    return r;
  };
  for (const Step& x : sub.steps) {
    Step st = x;
    st.a = map(x.a);
    st.b = map(x.b);
    st.dst = map(x.dst);
    st.depBegin = static_cast<uint32_t>(deps.size());
    for (uint32_t d = 0; d < x.depCount; ++d) deps.push_back(sub.deps[x.depBegin + d] + first);
    steps.push_back(st);
  }
  scratchBytes += sub.scratchBytes;
  return first;
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

namespace {

struct AlgoInfo {
  Algo algo;
  const char* name;
  uint32_t colls;  // bit per CollType
};

constexpr uint32_t bit(CollType t) { return 1u << static_cast<unsigned>(t); }
constexpr uint32_t kAnyColl = 0xffffffffu;

const AlgoInfo kAlgos[] = {
    {Algo::Auto, "auto", kAnyColl},
    {Algo::Ring, "ring",
     bit(CollType::AllReduce) | bit(CollType::ReduceScatter) | bit(CollType::AllGather)},
    {Algo::RecursiveDoubling, "rd", bit(CollType::AllReduce) | bit(CollType::AllGather)},
    {Algo::HalvingDoubling, "hd", bit(CollType::AllReduce) | bit(CollType::ReduceScatter)},
    {Algo::DoubleBinaryTree, "dbt", bit(CollType::AllReduce)},
    {Algo::Direct, "direct",
     bit(CollType::AllReduce) | bit(CollType::ReduceScatter) | bit(CollType::AllGather) |
         bit(CollType::Broadcast) | bit(CollType::Reduce) | bit(CollType::AllToAll)},
    {Algo::Chain, "chain", bit(CollType::Broadcast) | bit(CollType::Reduce)},
    {Algo::BinomialTree, "binomial", bit(CollType::Broadcast) | bit(CollType::Reduce)},
    {Algo::Bruck, "bruck", bit(CollType::AllGather)},
    {Algo::Pairwise, "pairwise", bit(CollType::AllToAll)},
    {Algo::Dissemination, "dissemination", bit(CollType::Barrier)},
    {Algo::Shm, "shm", 0},
    {Algo::Hierarchical, "hier", bit(CollType::AllReduce)},
    {Algo::Fold, "fold",
     bit(CollType::AllReduce) | bit(CollType::Reduce) | bit(CollType::ReduceScatter)},
    {Algo::GatherFold, "gather_fold", bit(CollType::AllReduce)},
};

const AlgoInfo* infoOf(Algo a) {
  for (const AlgoInfo& i : kAlgos)
    if (i.algo == a) return &i;
  return nullptr;
}

}  // namespace

const char* algoName(Algo a) {
  const AlgoInfo* i = infoOf(a);
  return i ? i->name : "?";
}

bool parseAlgo(const std::string& name, Algo* out) {
  static const struct {
    const char* alias;
    Algo algo;
  } kAliases[] = {
      {"recursive_doubling", Algo::RecursiveDoubling},
      {"halving_doubling", Algo::HalvingDoubling},
      {"rabenseifner", Algo::HalvingDoubling},
      {"tree", Algo::DoubleBinaryTree},
      {"double_binary_tree", Algo::DoubleBinaryTree},
      {"one_shot", Algo::Direct},
      {"hierarchical", Algo::Hierarchical},
  };
  for (const AlgoInfo& i : kAlgos)
    if (name == i.name) return *out = i.algo, true;
  for (const auto& a : kAliases)
    if (name == a.alias) return *out = a.algo, true;
  return false;
}

bool algoSupports(Algo a, CollType t) {
  if (t == CollType::Send || t == CollType::Recv) return a == Algo::Auto;
  const AlgoInfo* i = infoOf(a);
  return i && (i->colls & bit(t));
}

bool algoFoldsInRankOrder(Algo a, CollType t) {
  if (t != CollType::AllReduce && t != CollType::Reduce && t != CollType::ReduceScatter)
    return false;
  return a == Algo::Direct || a == Algo::Fold || a == Algo::Shm ||
         (a == Algo::GatherFold && t == CollType::AllReduce);
}

const char* reproName(Repro r) {
  switch (r) {
    case Repro::Off: return "off";
    case Repro::Ordered: return "ordered";
    case Repro::Exact: return "exact";
  }
  return "?";
}

Algo defaultAlgo(CollType t) {
  switch (t) {
    case CollType::AllReduce:
    case CollType::ReduceScatter:
    case CollType::AllGather: return Algo::Ring;
    case CollType::Broadcast:
    case CollType::Reduce: return Algo::Chain;
    case CollType::AllToAll: return Algo::Pairwise;
    case CollType::Barrier: return Algo::Dissemination;
    case CollType::Send:
    case CollType::Recv: return Algo::Auto;
  }
  return Algo::Auto;
}

size_t collBytes(const CollArgs& a, int nranks) {
  size_t b = a.count * a.eltSize;
  switch (a.type) {
    case CollType::AllGather:
    case CollType::ReduceScatter:
    case CollType::AllToAll: return b * static_cast<size_t>(nranks);
    default: return b;
  }
}

Status buildSchedule(const CollArgs& args, const BuildParams& p, Schedule* out) {
  *out = Schedule();
  if (p.nranks < 1 || p.rank < 0 || p.rank >= p.nranks)
    return Status(WEFT_ERR_INTERNAL, "buildSchedule: bad rank/nranks");
  if (args.eltSize == 0) return Status(WEFT_ERR_INTERNAL, "buildSchedule: element size 0");
  const bool p2p = args.type == CollType::Send || args.type == CollType::Recv;
  const Algo algo = p.algo == Algo::Auto || p2p ? defaultAlgo(args.type) : p.algo;
  if (!p2p && !algoSupports(algo, args.type))
    return invalidUsage(strFormat("algorithm %s does not implement %s", algoName(algo),
                                  collName(args.type)));
  if (args.wire != Wire::None && !algoCarriesWire(algo, args.type))
    return Status(WEFT_ERR_INTERNAL,
                  strFormat("a compressed %s on %s: the selector keeps those calls on ring, "
                            "fold and direct",
                            collName(args.type), algoName(algo)));
  if (p2p) {
    buildPointToPoint(args, p, out);
    return Status::ok();
  }
  switch (algo) {
    case Algo::Ring:
      if (args.type == CollType::AllReduce) buildRingAllReduce(args, p, out);
      if (args.type == CollType::ReduceScatter) buildRingReduceScatter(args, p, out);
      if (args.type == CollType::AllGather) buildRingAllGather(args, p, out);
      break;
    case Algo::Chain:
      if (args.type == CollType::Broadcast) buildChainBroadcast(args, p, out);
      if (args.type == CollType::Reduce) buildChainReduce(args, p, out);
      break;
    case Algo::RecursiveDoubling:
      if (args.type == CollType::AllReduce) buildRecursiveDoublingAllReduce(args, p, out);
      if (args.type == CollType::AllGather) buildRecursiveDoublingAllGather(args, p, out);
      break;
    case Algo::HalvingDoubling:
      if (args.type == CollType::AllReduce) buildHalvingDoublingAllReduce(args, p, out);
      if (args.type == CollType::ReduceScatter) buildHalvingDoublingReduceScatter(args, p, out);
      break;
    case Algo::DoubleBinaryTree: buildDoubleBinaryTreeAllReduce(args, p, out); break;
    case Algo::Direct:
      switch (args.type) {
        case CollType::AllReduce: buildDirectAllReduce(args, p, out); break;
        case CollType::ReduceScatter: buildDirectReduceScatter(args, p, out); break;
        case CollType::AllGather: buildDirectAllGather(args, p, out); break;
        case CollType::Broadcast: buildDirectBroadcast(args, p, out); break;
        case CollType::Reduce: buildDirectReduce(args, p, out); break;
        case CollType::AllToAll: buildDirectAllToAll(args, p, out); break;
        default: break;
      }
      break;
    case Algo::BinomialTree:
      if (args.type == CollType::Broadcast) buildBinomialBroadcast(args, p, out);
      if (args.type == CollType::Reduce) buildBinomialReduce(args, p, out);
      break;
    case Algo::Bruck: buildBruckAllGather(args, p, out); break;
    case Algo::Pairwise: buildPairwiseAllToAll(args, p, out); break;
    case Algo::Dissemination: buildDisseminationBarrier(args, p, out); break;
    case Algo::Hierarchical: buildHierarchicalAllReduce(args, p, out); break;
    case Algo::Fold:
      if (args.type == CollType::AllReduce) buildFoldAllReduce(args, p, out);
      if (args.type == CollType::Reduce) buildFoldReduce(args, p, out);
      if (args.type == CollType::ReduceScatter) buildFoldReduceScatter(args, p, out);
      break;
    case Algo::GatherFold: buildGatherFoldAllReduce(args, p, out); break;
    default:
      return invalidUsage(strFormat("algorithm %s has no schedule builder for %s",
                                    algoName(algo), collName(args.type)));
  }
  if (args.wire != Wire::None) layOutWire(args.wire, out);
  return Status::ok();
}

std::string describeOp(const CollArgs& args, weft_datatype_t dtype, uint64_t seq) {
  std::string s = collName(args.type);
  if (args.type == CollType::Send || args.type == CollType::Recv)
    return s + strFormat(" (%zu x %s, peer %d)", args.count, datatypeName(dtype), args.peer);
  s += strFormat(" #%llu", static_cast<unsigned long long>(seq));
  if (args.type == CollType::Barrier) return s;
  s += strFormat(" (%zu x %s", args.count, datatypeName(dtype));
  if (args.type == CollType::AllReduce || args.type == CollType::Reduce ||
      args.type == CollType::ReduceScatter)
    s += strFormat(", %s", opName(args.op));
  if (args.type == CollType::Broadcast || args.type == CollType::Reduce)
    s += strFormat(", root %d", args.root);
  return s + ")";
}

}  // namespace weft
