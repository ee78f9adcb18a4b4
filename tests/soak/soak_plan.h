// What one round of the fault-injection soak does (tests/soak/soak.cc):
// drawn by every rank alike from the seed and the round number, so the
// ranks agree without talking. A round makes a communicator (the faulty
// rank with WEFT_TEST_FAULTS set), runs a few random collectives on it and
// ends with a barrier.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace soak {

enum class Fault { None, Delay, Short, Drop, Corrupt, StallShort, StallLong };
inline const char* faultName(Fault f) {
  switch (f) {
    case Fault::None: return "none";
    case Fault::Delay: return "delay";
    case Fault::Short: return "short";
    case Fault::Drop: return "drop";
    case Fault::Corrupt: return "corrupt";
    case Fault::StallShort: return "stall<timeout";
    case Fault::StallLong: return "stall>timeout";
  }
  return "?";
}
// Faults after which every op must still complete, right, on every rank.
inline bool benign(Fault f) {
  return f == Fault::None || f == Fault::Delay || f == Fault::Short || f == Fault::StallShort;
}

enum class Coll { AllreduceSum, AllreduceMax, Broadcast, Reduce, Allgather, ReduceScatter,
                  Alltoall, SendRecvRing, Barrier };
constexpr int kColls = 9;
inline const char* collName(Coll c) {
  static const char* const names[kColls] = {"allreduce(sum)", "allreduce(max)", "broadcast",
                                            "reduce",         "allgather",      "reduce_scatter",
                                            "alltoall",       "send/recv ring", "barrier"};
  return names[static_cast<int>(c)];
}

struct OpPlan {
  Coll coll = Coll::Barrier;
  size_t count = 0;  // int32 elements (per rank's block where the call has blocks)
  int root = 0;
  uint32_t salt = 0;  // makes each op's data its own
};

struct RoundPlan {
  Fault fault = Fault::None;
  int faultRank = 0;
  std::string spec;  // WEFT_TEST_FAULTS on faultRank ("" for none and stalls)
  int stallMs = 0;
  int stallOp = 0;  // the stall is asked for as this op starts
  std::vector<OpPlan> ops;  // the last is a barrier
};

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// `shortOk`: the transport has system-call reads and writes (tcp).
inline RoundPlan makePlan(uint64_t seed, int round, int nranks, bool shortOk, double timeoutS) {
  uint64_t s = mix(seed * 1000003u + static_cast<uint64_t>(round));
  auto next = [&s](uint64_t n) {
    s = mix(s);
    return n ? s % n : 0;
  };
  RoundPlan p;
  // Round 0 is clean: the baseline of fds and threads is taken after it.
  static const Fault kinds[] = {Fault::None,    Fault::Delay,      Fault::Short,    Fault::Drop,
                                Fault::Corrupt, Fault::StallShort, Fault::StallLong, Fault::Drop,
                                Fault::Corrupt, Fault::Delay};
  p.fault = round == 0 ? Fault::None : kinds[next(sizeof kinds / sizeof kinds[0])];
  if (p.fault == Fault::Short && !shortOk) p.fault = Fault::Delay;
  p.faultRank = static_cast<int>(next(static_cast<uint64_t>(nranks)));
  const unsigned at = 1 + static_cast<unsigned>(next(4));
  switch (p.fault) {
    case Fault::Delay:
      p.spec = "delay:" + std::to_string(20 + next(200)) + (next(2) ? "%0.2" : "@" + std::to_string(at));
      break;
    case Fault::Short: p.spec = "short%0.5"; break;
    case Fault::Drop: p.spec = "drop@" + std::to_string(at); break;
    case Fault::Corrupt: p.spec = "corrupt@" + std::to_string(at); break;
    case Fault::StallShort:
      p.stallMs = static_cast<int>(timeoutS * 1000 / 3);
      break;
    case Fault::StallLong:
      p.stallMs = static_cast<int>(timeoutS * 1000 * 1.5);
      break;
    case Fault::None: break;
  }
  static const size_t sizes[] = {1, 7, 1000, 16384, 300000, 2000000};
  const int nops = 2 + static_cast<int>(next(6));
  for (int k = 0; k < nops; ++k) {
    OpPlan o;
    o.coll = static_cast<Coll>(next(kColls - 1));
    o.count = sizes[next(sizeof sizes / sizeof sizes[0])];
    // Blocks per rank: keep every buffer under 8 MiB.
    if (o.coll == Coll::Allgather || o.coll == Coll::ReduceScatter || o.coll == Coll::Alltoall)
      o.count = o.count / static_cast<size_t>(nranks) + 1;
    o.root = static_cast<int>(next(static_cast<uint64_t>(nranks)));
    o.salt = static_cast<uint32_t>(next(1u << 30));
    p.ops.push_back(o);
  }
  p.stallOp = static_cast<int>(next(static_cast<uint64_t>(nops)));
  OpPlan last;
  last.coll = Coll::Barrier;
  p.ops.push_back(last);
  return p;
}

// Rank r's input element i of an op: small, so that sums are exact.
inline int32_t value(int r, size_t i, uint32_t salt) {
  return static_cast<int32_t>(((i * 2654435761u) ^ salt) % 1000u) + 7 * r;
}

}  // namespace soak
