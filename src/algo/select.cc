// The selector: the algorithm and chunk size for one call (select.h), from
// the WEFT_ALGO rules (algo_rules.h) and the cost model's estimates
// (cost_pricing.h, cost_algos.cc): for each algorithm that can run, the
// chunk size with the lowest estimate; then the algorithm with the lowest.
#include "algo/select.h"

#include <algorithm>
#include <cstddef>

#include "algo/cost_pricing.h"

namespace weft {

using cost::ChunkRange;
using cost::Env;
using cost::kInf;
using cost::planUs;

namespace {

// `a` at its best chunk size (the smallest of the equally good).
Choice bestChunk(Algo a, CollType t, size_t bytes, const Env& e, const ChunkRange& cr) {
  Choice best;
  best.algo = a;
  best.chunkBytes = cr.lo;
  best.estUs = kInf;
  const double S = static_cast<double>(bytes);
  for (size_t c = cr.lo;; c = cr.next(c)) {
    const double us = planUs(a, t, S, e, static_cast<double>(c));
    if (us < best.estUs) {
      best.estUs = us;
      best.chunkBytes = c;
    }
    if (c >= cr.hi) break;
  }
  return best;
}

// Whether the model may pick `a` on its own: for a reproducible call only
// the algorithms that fold in rank order; otherwise any but Fold (which
// exists for those calls; WEFT_ALGO can still force it).
// A compressed call (wire) takes only those that carry it (algoCarriesWire),
// Fold included.
bool pickable(Algo a, CollType t, bool ordered, bool wire) {
  if (wire && !algoCarriesWire(a, t)) return false;
  if (ordered) return algoFoldsInRankOrder(a, t);
  return wire || (a != Algo::Fold && a != Algo::GatherFold);
}

Choice chooseModel(CollType t, size_t bytes, const CostModel& m, const Env& e,
                   const ChunkRange& cr, bool ordered, bool wire) {
  const Algo first = ordered ? Algo::Fold : defaultAlgo(t);
  Choice best;
  best.chunkBytes = cr.lo;
  best.estUs = kInf;
  for (int i = -1; i < static_cast<int>(Algo::kCount); ++i) {
    const Algo a = i < 0 ? first : static_cast<Algo>(i);
    if (a == Algo::Auto || (i >= 0 && a == first) || !algoUsable(a, t, m) ||
        !pickable(a, t, ordered, wire))
      continue;
    Choice c = bestChunk(a, t, bytes, e, cr);
    if (c.estUs < best.estUs) best = c;
  }
  return best;
}

}  // namespace

bool algoUsable(Algo a, CollType t, const CostModel& m) {
  return algoImplements(a, t) && (a != Algo::Shm || m.shmArena);
}

double modelUs(Algo a, CollType t, size_t bytes, const CostModel& m, size_t chunkBytes) {
  const Env e(m);
  return planUs(a, t, static_cast<double>(bytes), e,
                static_cast<double>(std::max<size_t>(chunkBytes, 1)));
}

double estimateUs(Algo a, const CollArgs& args, const CostModel& m, size_t chunkBytes) {
  const CollType t = args.type;
  const size_t bytes = collBytes(args, std::max(1, m.nranks));
  if (t == CollType::Send || t == CollType::Recv)
    return a == Algo::Auto ? modelUs(a, t, bytes, m, chunkBytes) : kInf;
  if (a == Algo::Auto) {
    double best = kInf;
    for (int i = 1; i < static_cast<int>(Algo::kCount); ++i)
      best = std::min(best, estimateUs(static_cast<Algo>(i), args, m, chunkBytes));
    return best;
  }
  if (!algoUsable(a, t, m)) return kInf;
  return modelUs(a, t, bytes, m, chunkBytes);
}

Choice evaluate(Algo a, const CollArgs& args, const CostModel& m) {
  const Env e(m);
  const ChunkRange cr(m);
  const CollType t = args.type;
  const bool p2p = t == CollType::Send || t == CollType::Recv;
  if (p2p ? a != Algo::Auto : !algoUsable(a, t, m)) {
    Choice none;
    none.algo = a;
    none.chunkBytes = cr.lo;
    none.estUs = kInf;
    return none;
  }
  const size_t bytes = collBytes(args, e.n);
  if (a == Algo::Auto && !p2p)
    return chooseModel(t, bytes, m, e, cr, args.repro != Repro::Off, args.wire != Wire::None);
  return bestChunk(a, t, bytes, e, cr);
}

Choice chooseForBytes(CollType t, size_t bytes, const CostModel& m, const AlgoRules* rules,
                      bool ordered, bool wire) {
  const Env e(m);
  const ChunkRange cr(m);
  if (t == CollType::Send || t == CollType::Recv) return bestChunk(Algo::Auto, t, bytes, e, cr);
  if (rules && !rules->empty()) {
    const Algo forced = rules->lookup(t, bytes, m.shmArena);
    if (forced != Algo::Auto && algoUsable(forced, t, m) &&
        (!ordered || algoFoldsInRankOrder(forced, t)) && (!wire || algoCarriesWire(forced, t))) {
      Choice c = bestChunk(forced, t, bytes, e, cr);
      c.forced = true;
      return c;
    }
  }
  return chooseModel(t, bytes, m, e, cr, ordered, wire);
}

Choice choose(const CollArgs& args, const CostModel& m, const AlgoRules* rules) {
  return chooseForBytes(args.type, collBytes(args, std::max(1, m.nranks)), m, rules,
                        args.repro != Repro::Off, args.wire != Wire::None);
}

}  // namespace weft
