#include "algo/simulator.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <random>

#include "kernels/cpu/fold.h"
#include "kernels/cpu/reduce.h"

namespace weft::sim {
namespace {

enum : uint8_t { kPending = 0, kPosted = 1, kDone = 2 };

struct RankRun {
  Schedule sch;
  std::vector<uint8_t> state;
  size_t firstPending = 0;  // steps before it are all done
  std::vector<uint32_t> depsSeen;
  std::unique_ptr<uint8_t[]> scratch;
  size_t scratchLen = 0;
  uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  size_t sendLen = 0, recvLen = 0;
};

struct Channel {
  std::deque<uint32_t> sends;  // step indices at the source
  std::deque<uint32_t> recvs;  // step indices at the destination
};

uint8_t* bind(RankRun& rr, BufRef ref, size_t bytes, std::string* err) {
  uint8_t* base = nullptr;
  size_t len = 0;
  switch (ref.buf) {
    case BufId::Send: base = rr.send; len = rr.sendLen; break;
    case BufId::Recv: base = rr.recv; len = rr.recvLen; break;
    case BufId::Scratch: base = rr.scratch.get(); len = rr.scratchLen; break;
  }
  if (bytes == 0) return base;
  if (ref.off + bytes > len) {
    *err = "buffer overrun: buf " + std::to_string(static_cast<int>(ref.buf)) + " off " +
           std::to_string(ref.off) + " bytes " + std::to_string(bytes) + " len " +
           std::to_string(len);
    return nullptr;
  }
  return base + ref.off;
}

// Steps only ever become done, so each step remembers how many of its
// dependencies it has already seen done.
bool depsDone(RankRun& rr, size_t i) {
  const Step& s = rr.sch.steps[i];
  uint32_t& seen = rr.depsSeen[i];
  while (seen < s.depCount && rr.state[rr.sch.deps[s.depBegin + seen]] == kDone) ++seen;
  return seen == s.depCount;
}

}  // namespace

SimResult run(const CollArgs& args, weft_datatype_t dt, int n, size_t chunkBytes, int slots,
              std::vector<RankBuffers>* bufs, uint64_t seed, int holdRank, Algo algo,
              size_t window, const std::vector<int>& hosts, bool foldPairs) {
  SimResult res;
  std::mt19937_64 rng(seed);
  std::vector<RankRun> ranks(n);
  for (int r = 0; r < n; ++r) {
    BuildParams p;
    p.rank = r;
    p.nranks = n;
    p.chunkBytes = chunkBytes;
    p.slots = slots;
    p.algo = algo;
    p.hosts = hosts;
    p.foldPairs = foldPairs;
    Status st = buildSchedule(args, p, &ranks[r].sch);
    if (!st.isOk()) {
      res.ok = false;
      res.error = st.message();
      return res;
    }
    // Validate dependency indices point backwards.
    for (size_t i = 0; i < ranks[r].sch.steps.size(); ++i) {
      const Step& s = ranks[r].sch.steps[i];
      for (uint32_t d = 0; d < s.depCount; ++d)
        if (ranks[r].sch.deps[s.depBegin + d] >= i) {
          res.ok = false;
          res.error = "rank " + std::to_string(r) + " step " + std::to_string(i) +
                      " depends on a later step";
          return res;
        }
    }
    ranks[r].state.assign(ranks[r].sch.steps.size(), kPending);
    ranks[r].depsSeen.assign(ranks[r].sch.steps.size(), 0);
    // Poisoned, as far as a small schedule can use it: builders may size
    // slots by chunkBytes, and touching megabytes per rank would dominate.
    ranks[r].scratchLen = ranks[r].sch.scratchBytes;
    ranks[r].scratch.reset(new uint8_t[ranks[r].scratchLen ? ranks[r].scratchLen : 1]);
    memset(ranks[r].scratch.get(), 0xEE, std::min<size_t>(ranks[r].scratchLen, 1 << 16));
    RankBuffers& b = (*bufs)[r];
    ranks[r].recv = b.recv.data();
    ranks[r].recvLen = b.recv.size();
    if (args.inPlace) {
      ranks[r].send = b.recv.data();
      ranks[r].sendLen = b.recv.size();
      size_t blk = args.count * args.eltSize;
      if (args.type == CollType::AllGather) {  // sendbuf = recvbuf + rank*blk
        ranks[r].send = b.recv.data() + r * blk;
        ranks[r].sendLen = blk;
      }
      if (args.type == CollType::ReduceScatter) {  // recvbuf = sendbuf + rank*blk
        ranks[r].recv = b.recv.data() + r * blk;
        ranks[r].recvLen = blk;
      }
    } else {
      ranks[r].send = b.send.data();
      ranks[r].sendLen = b.send.size();
    }
  }
  std::vector<Channel> chans(static_cast<size_t>(n) * n);
  auto chan = [&](int src, int dst) -> Channel& { return chans[static_cast<size_t>(src) * n + dst]; };
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;

  auto fail = [&](const std::string& e) {
    res.ok = false;
    res.error = e;
    res.rankDone.assign(n, false);
    for (int r = 0; r < n; ++r)
      res.rankDone[r] = std::all_of(ranks[r].state.begin(), ranks[r].state.end(),
                                    [](uint8_t s) { return s == kDone; });
    return res;
  };

  int idle = 0;
  std::vector<size_t> corder;  // channels with a send and a receive to match
  for (int round = 0;; ++round) {
    bool progress = false, allDone = true;
    std::shuffle(order.begin(), order.end(), rng);
    for (int r : order) {
      RankRun& rr = ranks[r];
      if (r == holdRank) {
        allDone = false;
        continue;
      }
      std::vector<uint8_t> sendBlocked(n, 0), recvBlocked(n, 0);
      while (rr.firstPending < rr.state.size() && rr.state[rr.firstPending] == kDone)
        ++rr.firstPending;
      const size_t end = window ? std::min(rr.sch.steps.size(), rr.firstPending + window)
                                : rr.sch.steps.size();
      if (end < rr.sch.steps.size()) allDone = false;
      for (size_t i = rr.firstPending; i < end; ++i) {
        if (rr.state[i] == kDone) continue;
        allDone = false;
        const Step& s = rr.sch.steps[i];
        bool isSend = s.kind == StepKind::Send;
        bool isRecv = s.kind == StepKind::Recv || s.kind == StepKind::RecvReduce;
        if (rr.state[i] == kPosted) continue;
        if ((isSend || isRecv) && (s.peer < 0 || s.peer >= n))
          return fail("rank " + std::to_string(r) + " step " + std::to_string(i) + " bad peer");
        // A send (receive) waits for the earlier ones to the same peer.
        uint8_t* blocked = isSend ? &sendBlocked[s.peer] : isRecv ? &recvBlocked[s.peer] : nullptr;
        if (blocked && *blocked) continue;
        // Not ready, or randomly left for a later round.
        if (!depsDone(rr, i) || (rng() & 7) == 0) {
          if (blocked) *blocked = 1;
          continue;
        }
        std::string err;
        switch (s.kind) {
          case StepKind::Send: chan(r, s.peer).sends.push_back(static_cast<uint32_t>(i)); rr.state[i] = kPosted; break;
          case StepKind::Recv:
          case StepKind::RecvReduce: chan(s.peer, r).recvs.push_back(static_cast<uint32_t>(i)); rr.state[i] = kPosted; break;
          case StepKind::Copy: {
            uint8_t* src = bind(rr, s.a, s.bytes, &err);
            uint8_t* dst = bind(rr, s.dst, s.bytes, &err);
            if (!err.empty()) return fail("rank " + std::to_string(r) + " copy: " + err);
            if (s.bytes) memmove(dst, src, s.bytes);
            rr.state[i] = kDone;
            break;
          }
          case StepKind::Reduce: {
            uint8_t* x = bind(rr, s.a, s.bytes, &err);
            uint8_t* y = bind(rr, s.b, s.bytes, &err);
            uint8_t* dst = bind(rr, s.dst, s.bytes, &err);
            if (!err.empty()) return fail("rank " + std::to_string(r) + " reduce: " + err);
            reduceHost(dst, x, y, s.bytes / args.eltSize, dt, args.op);
            rr.state[i] = kDone;
            break;
          }
          case StepKind::Fold: {
            std::vector<const void*> srcs(static_cast<size_t>(n));
            const uint8_t* pieces = bind(rr, s.b, s.bytes * n, &err);
            for (int q = 0; q < n; ++q)
              srcs[q] = q == r ? bind(rr, s.a, s.bytes, &err)
                               : pieces + q * s.bytes;
            uint8_t* dst = bind(rr, s.dst, s.bytes, &err);
            if (!err.empty()) return fail("rank " + std::to_string(r) + " fold: " + err);
            foldHost(dst, srcs.data(), n, s.bytes / args.eltSize, dt, args.op,
                     args.repro == Repro::Exact);
            rr.state[i] = kDone;
            break;
          }
          case StepKind::Divide: {
            uint8_t* dst = bind(rr, s.dst, s.bytes, &err);
            if (!err.empty()) return fail("rank " + std::to_string(r) + " divide: " + err);
            divideByCount(dst, s.bytes / args.eltSize, dt, static_cast<uint64_t>(n));
            rr.state[i] = kDone;
            break;
          }
        }
        progress = true;
      }
    }
    // Match posted sends and receives, channel by channel, in FIFO order.
    corder.clear();
    for (size_t i = 0; i < chans.size(); ++i)
      if (!chans[i].sends.empty() && !chans[i].recvs.empty()) corder.push_back(i);
    std::shuffle(corder.begin(), corder.end(), rng);
    for (size_t ci : corder) {
      Channel& c = chans[ci];
      int src = static_cast<int>(ci / n), dst = static_cast<int>(ci % n);
      while (!c.sends.empty() && !c.recvs.empty()) {
        if ((rng() & 3) == 0) break;  // delivery delayed
        uint32_t si = c.sends.front(), ri = c.recvs.front();
        c.sends.pop_front();
        c.recvs.pop_front();
        RankRun& S = ranks[src];
        RankRun& R = ranks[dst];
        const Step& ss = S.sch.steps[si];
        const Step& rs = R.sch.steps[ri];
        if (ss.bytes != rs.bytes)
          return fail("length mismatch " + std::to_string(src) + "->" + std::to_string(dst) +
                      ": send step " + std::to_string(si) + " " + std::to_string(ss.bytes) +
                      " bytes, recv step " + std::to_string(ri) + " " + std::to_string(rs.bytes));
        std::string err;
        uint8_t* from = bind(S, ss.a, ss.bytes, &err);
        if (rs.kind == StepKind::Recv) {
          uint8_t* to = bind(R, rs.dst, rs.bytes, &err);
          if (!err.empty()) return fail(err);
          if (rs.bytes) memcpy(to, from, rs.bytes);
        } else {
          uint8_t* tmp = bind(R, rs.b, rs.bytes, &err);
          uint8_t* own = bind(R, rs.a, rs.bytes, &err);
          uint8_t* to = bind(R, rs.dst, rs.bytes, &err);
          if (!err.empty()) return fail(err);
          if (rs.bytes) {
            memcpy(tmp, from, rs.bytes);
            reduceHost(to, own, tmp, rs.bytes / args.eltSize, dt, args.op);
          }
        }
        S.state[si] = kDone;
        R.state[ri] = kDone;
        res.messages++;
        res.bytesMoved += rs.bytes;
        progress = true;
      }
    }
    if (allDone) {
      res.rankDone.assign(n, true);
      break;
    }
    if (progress) idle = 0;
    if (!progress) {
      // Random holds can make a round idle by chance; many idle rounds in a
      // row mean nothing can move: a deadlock.
      if (++idle > 64) {
        std::string e = "deadlock:";
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < ranks[r].state.size(); ++i)
            if (ranks[r].state[i] != kDone) {
              e += " r" + std::to_string(r) + ":" + std::to_string(i) + "(" +
                   stepKindName(ranks[r].sch.steps[i].kind) + " peer " +
                   std::to_string(ranks[r].sch.steps[i].peer) + ")";
              break;
            }
        return fail(e);
      }
    }
  }
  return res;
}

}  // namespace weft::sim
