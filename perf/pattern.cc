#include "pattern.h"

#include <algorithm>
#include <cmath>

namespace weftperf {

uint64_t mix64(uint64_t x) {
  // A 64-bit finalizer (xor-shift / multiply rounds): cheap, well spread.
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dull;
  x ^= x >> 33;
  return x;
}

Pattern patternFor(weft_op_t op) {
  switch (op) {
    case WEFT_SUM:
      return Pattern::Sum;
    case WEFT_PROD:
      return Pattern::Prod;
    case WEFT_AVG:
      return Pattern::Avg;
    default:
      return Pattern::Any;
  }
}

ValueGen::ValueGen(const DtypeInfo& t, Pattern p, int nranks, uint64_t salt)
    : t_(t), p_(p), n_(nranks < 1 ? 1 : nranks), salt_(mix64(salt + 0x51ed270b27ull)) {
  signed_ = t.kind != Kind::Unsigned;
  const double n = n_;
  // Sum: at most `active` ranks contribute to an element (all of them unless
  // there are more ranks than the budget), each at most budget/active.
  const double active = std::min(n, t.budget);
  sumActive_ = static_cast<uint64_t>(active);
  sumPer_ = std::floor(t.budget / active);
  prodCap_ = std::min(n_, t.pow2cap);
  // Avg: c in [-C, C] with n*C + 1 <= budget (one rank adds 1, another
  // subtracts it, so every partial sum stays in range).
  avgC_ = std::floor((t.budget - 1) / n);
}

uint64_t ValueGen::hash(uint64_t a, uint64_t b) const {
  return mix64(a * 0x9e3779b97f4a7c15ull + mix64(b ^ salt_));
}

double ValueGen::pick(uint64_t h, double lo, double hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;  // hi - lo < 2^63
  return lo + static_cast<double>(h % span);
}

double ValueGen::value(int rank, uint64_t g) const {
  const uint64_t r = static_cast<uint64_t>(rank);
  const uint64_t n = static_cast<uint64_t>(n_);
  switch (p_) {
    case Pattern::Any:
      return pick(hash(g, r), signed_ ? -t_.budget : 0.0, t_.budget);
    case Pattern::Sum: {
      if ((g + r) % n >= sumActive_) return 0.0;
      return pick(hash(g, r), signed_ ? -sumPer_ : 0.0, sumPer_);
    }
    case Pattern::Prod: {
      // t_g ranks (chosen by position) contribute a factor 2, the others 1;
      // signed types also flip signs at random.
      const uint64_t tg = hash(g, ~0ull) % static_cast<uint64_t>(prodCap_ + 1);
      double f = ((g + r) % n < tg) ? 2.0 : 1.0;
      if (signed_ && (hash(g, r) & 1)) f = -f;
      return f;
    }
    case Pattern::Avg: {
      const uint64_t hg = hash(g, ~1ull);
      double c = pick(hg, signed_ ? -avgC_ : 0.0, avgC_);
      double d = (n >= 2 && (signed_ || c > 0)) ? static_cast<double>((hg >> 62) & 1) : 0.0;
      if (r == g % n) c += d;
      if (r == (g + 1) % n) c -= d;
      return c;
    }
  }
  return 0.0;
}

double ValueGen::reduced(weft_op_t op, uint64_t g) const {
  double acc = value(0, g);
  for (int r = 1; r < n_; ++r) {
    const double v = value(r, g);
    switch (op) {
      case WEFT_SUM:
      case WEFT_AVG:
        acc += v;
        break;
      case WEFT_PROD:
        acc *= v;
        break;
      case WEFT_MAX:
        acc = std::max(acc, v);
        break;
      case WEFT_MIN:
        acc = std::min(acc, v);
        break;
      default:
        break;
    }
  }
  if (op == WEFT_AVG) acc /= n_;  // exact: the sum is n * c by construction
  return acc;
}

}  // namespace weftperf
