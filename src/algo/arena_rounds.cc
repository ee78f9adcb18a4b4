// What each collective does in one arena round (n ranks, a round of `len`
// bytes, me = this rank). Every rank reduces in rank order, so results are
// bitwise identical everywhere.
//
//   allreduce, small (one-shot): A stages the round; B reduces all n staged
//     copies. One synchronization.
//   allreduce, large: the round is split into n parts, part p owned by rank
//     p. A stages the n-1 parts I do not own; B reduces my part from my
//     input and the n-1 staged copies into my result buffer (and my
//     output); C copies the n-1 other results out. Per rank and byte: copy
//     in (n-1)/n, reduce 1/n from n inputs, copy out (n-1)/n.
//   reduce: as allreduce, only the root copies out (its C).
//   broadcast: the root stages (a small one in its ring slot); the others
//     copy out.
//   allgather: each stages its block; each copies out all blocks.
//   reduce_scatter: each stages the n-1 blocks it does not keep; each
//     reduces its block from all ranks.
//   alltoall: each stages the n-1 blocks for the others; each copies its.
//   barrier: one round without data.
//   single copy (broadcast, allgather, alltoall): nothing staged; B reads
//     the owners' user buffers in place.
#include "algo/arena_rounds.h"

#include <algorithm>

namespace weft {
namespace {

class Writer {
 public:
  Writer(const RoundContext& rc, ArenaPlan* p) : rc_(rc), p_(p) {}

  void phase(ArenaPhase* ph) {
    ph_ = ph;
    ph->begin = static_cast<uint32_t>(p_->acts.size());
    ph->count = 0;
  }
  void copy(ArenaLoc dst, ArenaLoc src, size_t bytes, bool stream = false) {
    ArenaAct a;
    a.kind = ArenaActKind::Copy;
    a.dst = dst;
    a.src = src;
    a.bytes = bytes;
    a.stream = stream && rc_.stream;
    add(a);
  }
  void read(ArenaLoc dst, ArenaLoc src, size_t bytes) {
    ArenaAct a;
    a.kind = ArenaActKind::Read;
    a.dst = dst;
    a.src = src;
    a.bytes = bytes;
    add(a);
  }
  // dst = the fold of srcOf(0), ..., srcOf(n-1); then / n for AVG.
  template <typename F>
  void reduce(ArenaLoc dst, F srcOf, size_t bytes) {
    if (!bytes) return;
    ArenaAct a;
    a.kind = ArenaActKind::Reduce;
    a.dst = dst;
    a.srcBegin = static_cast<uint32_t>(p_->srcs.size());
    a.srcCount = static_cast<uint32_t>(rc_.shape->nranks);
    for (int r = 0; r < rc_.shape->nranks; ++r) p_->srcs.push_back(srcOf(r));
    a.bytes = bytes;
    add(a);
    // A reproducible call's fold divides for AVG itself (before its one rounding).
    if (rc_.args->op == WEFT_AVG && rc_.args->repro == Repro::Off) {
      ArenaAct d;
      d.kind = ArenaActKind::Divide;
      d.dst = dst;
      d.bytes = bytes;
      add(d);
    }
  }

  static ArenaLoc at(ArenaSpace s, int rank, size_t off) {
    ArenaLoc l;
    l.space = s;
    l.rank = rank;
    l.off = off;
    return l;
  }
  static ArenaLoc send(size_t off) { return at(ArenaSpace::Send, 0, off); }
  static ArenaLoc recv(size_t off) { return at(ArenaSpace::Recv, 0, off); }
  static ArenaLoc stage(int r, size_t off) { return at(ArenaSpace::Stage, r, off); }
  static ArenaLoc result(int r, size_t off) { return at(ArenaSpace::Result, r, off); }

 private:
  void add(const ArenaAct& a) {
    if (!a.bytes) return;
    p_->acts.push_back(a);
    ++ph_->count;
  }
  const RoundContext& rc_;
  ArenaPlan* p_;
  ArenaPhase* ph_ = nullptr;
};

// Part p of a round of `len` bytes split into n parts of whole lines.
void part(size_t len, int n, int p, size_t* off, size_t* plen) {
  const size_t lines = (len + kArenaLine - 1) / kArenaLine;
  size_t b = partOffset(lines, n, p) * kArenaLine, end = partOffset(lines, n, p + 1) * kArenaLine;
  if (p + 1 == n) end = lines * kArenaLine;
  b = std::min(b, len);
  end = std::min(end, len);
  *off = b;
  *plen = end - b;
}

void reduceRound(const RoundContext& rc, size_t len, ArenaPlan* p, ArenaRound* r) {
  const CollArgs& a = *rc.args;
  const int n = rc.shape->nranks, me = rc.shape->rank;
  Writer w(rc, p);
  if (rc.oneShot) {
    // Up to inlineBytes ride in the line that carries the flag.
    const bool inl = p->mode == ArenaPlan::Mode::Inline;
    const ArenaSpace sp = inl ? ArenaSpace::Inline : ArenaSpace::Stage;
    w.phase(&r->a);
    w.copy(Writer::at(sp, me, 0), Writer::send(0), len);
    r->staged = len;
    w.phase(&r->b);
    w.reduce(
        Writer::recv(0), [&](int q) { return Writer::at(sp, q, 0); }, len);
    w.phase(&r->c);
    return;
  }
  size_t mo, ml;
  part(len, n, me, &mo, &ml);
  w.phase(&r->a);
  for (int q = 0; q < n; ++q) {
    if (q == me) continue;
    size_t off, pl;
    part(len, n, q, &off, &pl);
    w.copy(Writer::stage(me, off), Writer::send(off), pl);
  }
  r->staged = len - ml;
  w.phase(&r->b);
  w.reduce(
      Writer::result(me, mo),
      [&](int q) { return q == me ? Writer::send(mo) : Writer::stage(q, mo); }, ml);
  const bool outputs = a.type == CollType::AllReduce || me == a.root;
  if (outputs) w.copy(Writer::recv(mo), Writer::result(me, mo), ml, true);
  w.phase(&r->c);
  if (!outputs) return;
  for (int q = 0; q < n; ++q) {
    if (q == me) continue;
    size_t off, pl;
    part(len, n, q, &off, &pl);
    w.copy(Writer::recv(off), Writer::result(q, off), pl, true);
  }
}

void broadcastRound(const RoundContext& rc, size_t len, ArenaPlan* p, ArenaRound* r) {
  const CollArgs& a = *rc.args;
  const int me = rc.shape->rank;
  const bool root = me == a.root;
  Writer w(rc, p);
  const ArenaLoc buf = Writer::at(
      p->mode == ArenaPlan::Mode::Ring ? ArenaSpace::Ring : ArenaSpace::Stage, a.root, 0);
  w.phase(&r->a);
  if (root && p->mode != ArenaPlan::Mode::Direct) {
    w.copy(buf, Writer::send(0), len);
    w.copy(Writer::recv(0), Writer::send(0), len);  // skipped in place (same address)
  }
  r->staged = root ? len : 0;
  w.phase(&r->b);
  if (p->mode == ArenaPlan::Mode::Direct) {
    if (root)
      w.copy(Writer::recv(0), Writer::send(0), len);
    else
      w.read(Writer::recv(0), Writer::at(ArenaSpace::Peer, a.root, 0), len);
  } else if (!root) {
    w.copy(Writer::recv(0), buf, len, p->mode == ArenaPlan::Mode::Staged);
  }
  w.phase(&r->c);
}

// allgather, alltoall (my block of each) and reduce_scatter (my block,
// reduced): the blocks of the n ranks, `total` bytes apart in the user's
// buffers, each round's piece of block q staged at q * step.
void blocksRound(const RoundContext& rc, size_t len, ArenaPlan* p, ArenaRound* r) {
  const CollArgs& a = *rc.args;
  const int n = rc.shape->nranks, me = rc.shape->rank;
  const size_t total = p->total, step = p->step;
  const size_t mine = static_cast<size_t>(me);
  Writer w(rc, p);
  w.phase(&r->a);
  if (p->mode == ArenaPlan::Mode::Direct) {
    r->staged = a.type == CollType::AllToAll ? len * static_cast<size_t>(n - 1) : len;
    w.phase(&r->b);
    const size_t from = a.type == CollType::AllToAll ? mine * total : 0;
    for (int q = 0; q < n; ++q) {
      const ArenaLoc dst = Writer::recv(static_cast<size_t>(q) * total);
      if (q == me)
        w.copy(dst, Writer::send(from), len);
      else
        w.read(dst, Writer::at(ArenaSpace::Peer, q, from), len);
    }
    w.phase(&r->c);
    return;
  }
  if (a.type == CollType::AllGather) {
    w.copy(Writer::stage(me, 0), Writer::send(0), len);
    r->staged = len;
  } else {
    for (int q = 0; q < n; ++q)
      if (q != me)
        w.copy(Writer::stage(me, static_cast<size_t>(q) * step),
               Writer::send(static_cast<size_t>(q) * total), len);
    r->staged = len * static_cast<size_t>(n - 1);
  }
  w.phase(&r->b);
  if (a.type == CollType::ReduceScatter) {
    // In place, recv is my block of send: reduce into it directly only
    // where the kernel allows (dst == srcs[0]).
    const bool direct = !a.inPlace || me == 0;
    const ArenaLoc dst = direct ? Writer::recv(0) : Writer::result(me, 0);
    w.reduce(
        dst,
        [&](int q) { return q == me ? Writer::send(mine * total) : Writer::stage(q, mine * step); },
        len);
    if (!direct) w.copy(Writer::recv(0), dst, len);
  } else {
    for (int q = 0; q < n; ++q) {
      const size_t from = a.type == CollType::AllGather ? 0 : mine * step;
      const ArenaLoc src = q != me ? Writer::stage(q, from)
                                   : Writer::send(a.type == CollType::AllGather ? 0 : mine * total);
      w.copy(Writer::recv(static_cast<size_t>(q) * total), src, len, true);
    }
  }
  w.phase(&r->c);
}

}  // namespace

void buildArenaRound(const RoundContext& rc, size_t len, ArenaPlan* p, ArenaRound* r) {
  *r = ArenaRound();
  switch (rc.args->type) {
    case CollType::AllReduce:
    case CollType::Reduce:
      reduceRound(rc, len, p, r);
      break;
    case CollType::Broadcast:
      broadcastRound(rc, len, p, r);
      break;
    case CollType::AllGather:
    case CollType::ReduceScatter:
    case CollType::AllToAll:
      blocksRound(rc, len, p, r);
      break;
    default: {  // barrier: one round without data
      Writer w(rc, p);
      w.phase(&r->a);
      w.phase(&r->b);
      w.phase(&r->c);
      break;
    }
  }
}

}  // namespace weft
