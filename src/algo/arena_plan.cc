// The arena plan's shape: which mode a collective runs in, how many bytes
// a round covers and how many rounds there are, and who waits for what.
// The actions of each round are arena_rounds.cc's.
#include "algo/arena_plan.h"

#include <algorithm>

#include "algo/arena_rounds.h"

namespace weft {
namespace {

// Single copy: one round in which readers copy straight from the owners'
// buffers; every rank then waits until all have read. By output size
// (`out`; the block is `blk`) it wins below half an arena chunk, loses
// while the staged rounds run from cache (up to 4 chunks), wins again from
// 4 chunks, and is even with the staged path's streaming stores from 32
// (docs/performance.md, "The shm arena"). Not an in-place alltoall: each
// rank overwrites the blocks the others would still be reading.
// Broadcasts stay staged from 4 chunks: the root then runs ahead of the
// readers instead of waiting for them. With more ranks than cores
// (directLimited) only large allgathers: there readers sharing a core take
// turns, and a round that ends when all have read keeps a broadcast root
// from running ahead.
bool singleCopy(const ArenaShape& s, const CollArgs& args, size_t blk, size_t out) {
  const bool kind = args.type == CollType::Broadcast || args.type == CollType::AllGather ||
                    (args.type == CollType::AllToAll && !args.inPlace);
  if (!kind || !s.directMin || blk < s.directMin) return false;
  const bool big = args.type != CollType::Broadcast && out >= 4 * s.chunk && out < 32 * s.chunk;
  if (s.directLimited) return big && args.type == CollType::AllGather;
  return out < s.chunk / 2 || big;
}

// Outputs at least this large go to memory with non-temporal stores: they
// cannot stay cached anyway, and the stores skip reading the lines first.
constexpr size_t kStreamOutputBytes = size_t{4} << 20;

}  // namespace

size_t arenaOneShotLimit(int nranks, size_t chunk) {
  size_t lim = nranks <= 2 ? 32768 : nranks <= 4 ? 16384 : 8192;
  return std::min(lim, chunk);
}

Status buildArenaPlan(const CollArgs& args, const ArenaShape& s, ArenaPlan* out) {
  if (args.type == CollType::Send || args.type == CollType::Recv)
    return invalidUsage(strFormat("the shm arena runs collectives, not %s", collName(args.type)));
  if (s.nranks < 1 || s.rank < 0 || s.rank >= s.nranks || s.chunk < kArenaLine)
    return invalidUsage("arena plan: bad arena shape");
  ArenaPlan& p = *out;
  p = ArenaPlan();
  const int n = s.nranks, me = s.rank;
  const size_t e = args.eltSize;
  const size_t blk = args.count * e;
  // Rounds are whole cache lines, so that two ranks never write one line.
  const size_t chunk = s.chunk / kArenaLine * kArenaLine;
  const size_t outBytes = args.type == CollType::AllGather || args.type == CollType::AllToAll
                              ? blk * static_cast<size_t>(n)
                              : blk;
  p.total = blk;
  bool oneShot = false;
  switch (args.type) {
    case CollType::AllReduce:
      oneShot = blk <= arenaOneShotLimit(n, chunk);
      p.step = oneShot ? std::max<size_t>(blk, 1) : chunk;
      break;
    case CollType::ReduceScatter:
    case CollType::AllToAll: {
      // The n-1 pieces of one round share my staging buffer.
      const size_t per = chunk / static_cast<size_t>(n);
      p.step = per >= kArenaLine ? per / kArenaLine * kArenaLine : per / e * e;
      break;
    }
    case CollType::Barrier:
      p.total = 0;
      break;
    default:  // reduce, broadcast, allgather
      p.step = chunk;
      break;
  }
  if (e) p.step -= p.step % e;  // whole elements per round
  if (oneShot && blk && blk <= s.inlineBytes) p.mode = ArenaPlan::Mode::Inline;
  if (blk && singleCopy(s, args, blk, outBytes)) {
    p.mode = ArenaPlan::Mode::Direct;
    p.step = p.total;
  } else if (args.type == CollType::Broadcast && blk && blk <= s.ringPayload) {
    p.mode = ArenaPlan::Mode::Ring;
    p.step = p.total;
  }
  if (p.total && !p.step)
    return invalidUsage(
        strFormat("arena plan: %d ranks do not fit an arena chunk of %zu bytes", n, s.chunk));
  if (args.type == CollType::Barrier)
    p.rounds = 1;
  else
    p.rounds = p.total == 0 ? 0 : (p.total + p.step - 1) / p.step;

  const bool root = me == args.root;
  const bool direct = p.mode == ArenaPlan::Mode::Direct;
  // A broadcast root reads nothing in B: it stages and goes on (so back-to-
  // back broadcasts pipeline, as eager ones do elsewhere). A ring reader
  // needs the root's data only: readers never wait for one another.
  p.waitB = direct || !(args.type == CollType::Broadcast && root);
  if (p.mode == ArenaPlan::Mode::Ring && !root) p.waitOnly = args.root;
  const bool twoPhase = args.type == CollType::AllReduce && !oneShot;
  p.publishB = direct || twoPhase || args.type == CollType::Reduce;
  p.runC = direct || twoPhase || (args.type == CollType::Reduce && root);
  p.reduces = args.type == CollType::AllReduce || args.type == CollType::Reduce ||
              args.type == CollType::ReduceScatter;
  if (!p.rounds) return Status::ok();
  p.oneShot = oneShot && p.rounds == 1 && p.mode != ArenaPlan::Mode::Direct;

  RoundContext rc;
  rc.args = &args;
  rc.shape = &s;
  rc.oneShot = oneShot;
  rc.stream = outBytes >= kStreamOutputBytes;
  const size_t lastLen = p.total - (p.rounds - 1) * p.step;
  if (p.rounds > 1) buildArenaRound(rc, p.step, &p, &p.full);
  buildArenaRound(rc, lastLen, &p, &p.last);
  if (p.rounds == 1) p.full = p.last;
  return Status::ok();
}

}  // namespace weft
