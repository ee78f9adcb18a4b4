// WEFT_ALGO: the user's algorithm override, parsed once per communicator into
// an ordered list of rules that the selector (select.h) consults before its
// cost model.
//
// Grammar (whitespace around tokens is ignored, names are case-insensitive):
//
//   spec    := clause { ';' clause }            empty clauses are skipped
//   clause  := [ coll ':' ] ranges              no coll = every collective
//   coll    := allreduce | broadcast | reduce | allgather | reduce_scatter
//            | alltoall | barrier | all         (names as collName() prints them)
//   ranges  := algo                             every size
//            | range { ',' range }
//   range   := lo '-' hi '=' algo               lo inclusive, hi exclusive
//   lo, hi  := bytes as parseBytes reads them ("0", "4096", "16K", "4M", "1G");
//              hi may be "inf" (no upper bound)
//   algo    := a name parseAlgo() accepts (ring, rd, hd, dbt, direct, chain,
//              binomial, bruck, pairwise, dissemination, shm, auto, ...)
//
// The size a rule is matched against is collBytes(args, nranks): the size
// nccl-tests and weft-perf print (allgather, reduce_scatter and alltoall
// count all ranks' blocks).
//
//   WEFT_ALGO="allreduce:0-16K=rd,16K-inf=ring;broadcast:binomial;ring"
//
// means: allreduce below 16 KiB by recursive doubling, from 16 KiB by ring;
// broadcast by binomial tree; every other collective that ring implements by
// ring; the rest as the cost model chooses.
//
// Rules are tried in order and the first that matches wins, so overlapping
// ranges are allowed and an earlier clause overrides a later one. A rule whose
// algorithm does not implement a collective is skipped for it; that is an
// error only when the clause names that collective ("broadcast:ring"), since a
// bare "ring" or "all:ring" means "ring wherever it applies". "auto" stops the
// search and leaves the choice to the model ("allreduce:0-1M=auto;ring").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algo/schedule.h"
#include "core/status.h"

namespace weft {

// Whether algorithm `a` implements collective `t`: algoSupports() (the
// support table in schedule.cc), except for Algo::Shm while the table lists
// no collective for it: the shared-memory arena runs every collective but
// send/recv (whether the arena exists is the cost model's shmArena).
bool algoImplements(Algo a, CollType t);

struct AlgoRule {
  CollType type = CollType::AllReduce;  // ignored when anyColl
  bool anyColl = true;                  // no collective named, or "all"
  size_t lo = 0;                        // inclusive
  size_t hi = SIZE_MAX;                 // exclusive; SIZE_MAX = "inf" (no bound)
  Algo algo = Algo::Auto;
};

struct AlgoRules {
  std::vector<AlgoRule> rules;

  // The algorithm of the first rule that matches (t, bytes) and whose
  // algorithm implements t; Algo::Auto when none does (or the first match
  // says "auto"). Send and recv match only "auto".
  Algo lookup(CollType t, size_t bytes) const;
  // The same, skipping rules that name Algo::Shm when the arena is not
  // available (so "shm;ring" falls back to ring).
  Algo lookup(CollType t, size_t bytes, bool shmArena) const;
  bool empty() const { return rules.empty(); }
};

// Parses a WEFT_ALGO value (see the grammar above). An empty or blank spec
// gives no rules. Errors are WEFT_ERR_INVALID_ARGUMENT with a message that
// quotes the offending clause and says what was expected; *out is written
// only on success.
Status parseAlgoRules(const std::string& spec, AlgoRules* out);

// The rule as WEFT_ALGO text ("allreduce:0-16K=rd", "ring").
std::string formatAlgoRule(const AlgoRule& r);

// Bytes as parseBytes() reads them, in the largest unit that divides them
// exactly ("16K", "1536M", "100"); SIZE_MAX is "inf".
std::string formatByteSize(size_t bytes);

}  // namespace weft
