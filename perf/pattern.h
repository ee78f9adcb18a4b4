// weft-perf: the input values used to verify results.
//
// Every input element is a function of (rank, element index, salt) and is an
// integer small enough that every partial result the library can form
// (whatever the algorithm and combination order) is exactly representable in
// the datatype. The expected result is then computed on the host in double
// precision, exactly, and compared element by element.
#pragma once

#include <cstdint>

#include "dtypes.h"

namespace weftperf {

enum class Pattern {
  Any,   // uniform in [-budget, budget] ([0, budget] unsigned); min, max, copies
  Sum,   // sums of any subset of ranks stay within the budget
  Prod,  // +-1 and 2 factors; |product| <= 2^pow2cap
  Avg,   // per element the ranks' values sum to exactly nranks * c
};

Pattern patternFor(weft_op_t op);

class ValueGen {
 public:
  ValueGen(const DtypeInfo& t, Pattern p, int nranks, uint64_t salt);
  // The input of `rank` at element index `g`.
  double value(int rank, uint64_t g) const;
  // op over value(r, g) for r in [0, nranks), computed exactly.
  double reduced(weft_op_t op, uint64_t g) const;

 private:
  uint64_t hash(uint64_t a, uint64_t b) const;
  // An integer in [lo, hi] drawn from h.
  static double pick(uint64_t h, double lo, double hi);

  const DtypeInfo& t_;
  Pattern p_;
  int n_;
  uint64_t salt_;
  bool signed_;
  double sumPer_;  // Sum: per-rank magnitude
  uint64_t sumActive_;  // Sum: ranks contributing per element
  int prodCap_;     // Prod: most factors of 2 per element
  double avgC_;     // Avg: |c| bound
};

uint64_t mix64(uint64_t x);

}  // namespace weftperf
