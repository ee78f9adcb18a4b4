// tuningTable (select.h): the model's choices for every collective over
// sizes from 0 to 4 GiB, as ranges of one algorithm with their chunk sizes
// and estimates, then the same as a WEFT_ALGO string. Rank 0 of every
// communicator logs it at init (INFO, subsystem TUNING).
#include <algorithm>
#include <cmath>
#include <string>

#include "algo/cost_pricing.h"
#include "core/status.h"

namespace weft {
namespace {

// The collectives the tuning table lists, in the order it lists them.
const CollType kTableColls[] = {CollType::AllReduce, CollType::Broadcast,     CollType::Reduce,
                                CollType::AllGather, CollType::ReduceScatter, CollType::AllToAll,
                                CollType::Barrier};

std::string formatUs(double us) {
  if (!std::isfinite(us)) return "inf";
  if (us < 1e3) return strFormat("%.3g us", us);
  if (us < 1e6) return strFormat("%.3g ms", us / 1e3);
  return strFormat("%.3g s", us / 1e6);
}

std::string formatLink(const char* name, const LinkClass& l) {
  return strFormat("%s %g us %g GB/s", name, l.latencyUs, l.bandwidthGBs);
}

}  // namespace

std::string tuningTable(const CostModel& m) { return tuningTable(m, nullptr); }

std::string tuningTable(const CostModel& m, const AlgoRules* rules) {
  const cost::Env e(m);
  std::string out =
      strFormat("tuning model: %d ranks on %d host(s), %d per host, %s cores%s, shm arena %s\n",
                e.n, e.hosts, e.ppn, m.cores > 0 ? std::to_string(m.cores).c_str() : "unknown",
                e.oversub > 1 ? strFormat(" (oversubscribed x%.2g)", e.oversub).c_str() : "",
                m.shmArena ? "on" : "off");
  out += "  " + formatLink("intra", m.intra) + " | " + formatLink("inter", m.inter) + " | " +
         formatLink("arena", m.arena) +
         strFormat(" | reduce %g GB/s | chunk %s..%s | msgShare %g\n", m.reduceGBs,
                   formatByteSize(cost::ChunkRange(m).lo).c_str(),
                   formatByteSize(cost::ChunkRange(m).hi).c_str(), m.msgShare);
  out += strFormat("  %-15s %-15s %-22s %-12s %s\n", "collective", "size", "algorithm", "chunk",
                   "estimate (at range start .. end)");

  // Samples: 0 and 2^k, 3*2^(k-1) up to 4 GiB; a range runs from the first
  // sample of a choice to the first sample of the next.
  size_t sizes[2 + 2 * 32];
  int nsizes = 0;
  sizes[nsizes++] = 0;
  const size_t top = sizeof(size_t) >= 8 ? size_t{1} << 32 : size_t{1} << 30;
  for (size_t s = 1; s <= top; s *= 2) {
    sizes[nsizes++] = s;
    if (s >= 2 && s < top) sizes[nsizes++] = s + s / 2;
  }

  std::string spec;
  for (CollType t : kTableColls) {
    const int count = t == CollType::Barrier ? 1 : nsizes;
    std::string collSpec;
    bool firstRow = true;
    for (int i = 0; i < count;) {
      const Choice c0 = chooseForBytes(t, sizes[i], m, rules);
      size_t cmin = c0.chunkBytes, cmax = c0.chunkBytes;
      int j = i + 1;
      Choice last = c0;
      for (; j < count; ++j) {
        Choice c = chooseForBytes(t, sizes[j], m, rules);
        if (c.algo != c0.algo || c.forced != c0.forced) break;
        cmin = std::min(cmin, c.chunkBytes);
        cmax = std::max(cmax, c.chunkBytes);
        last = c;
      }
      const bool whole = i == 0 && j == count;
      const std::string range =
          t == CollType::Barrier
              ? "-"
              : formatByteSize(sizes[i]) + "-" + (j == count ? "inf" : formatByteSize(sizes[j]));
      const std::string algo = std::string(algoName(c0.algo)) + (c0.forced ? " (WEFT_ALGO)" : "");
      const std::string chunk = t == CollType::Barrier ? "-"
                                : cmin == cmax         ? formatByteSize(cmin)
                                               : formatByteSize(cmin) + ".." + formatByteSize(cmax);
      std::string est = formatUs(c0.estUs);
      if (j - 1 > i)
        est += " .. " + formatUs(last.estUs) + " (" + formatByteSize(sizes[j - 1]) + ")";
      out += strFormat("  %-15s %-15s %-22s %-12s %s\n", firstRow ? collName(t) : "", range.c_str(),
                       algo.c_str(), chunk.c_str(), est.c_str());
      if (!collSpec.empty()) collSpec += ",";
      collSpec += whole ? std::string(algoName(c0.algo)) : range + "=" + algoName(c0.algo);
      firstRow = false;
      i = j;
    }
    if (!spec.empty()) spec += ";";
    spec += std::string(collName(t)) + ":" + collSpec;
  }
  out += "  as WEFT_ALGO: " + spec;
  return out;
}

}  // namespace weft
