// WEFT_ALGO parsing and rule lookup; the grammar is in algo_rules.h.
#include "algo/algo_rules.h"

#include <cctype>
#include <cstdlib>
#include <utility>

#include "core/config.h"

namespace weft {
namespace {

// The collectives a clause may name, in the order error messages list them.
const CollType kNamedColls[] = {CollType::AllReduce, CollType::Broadcast,     CollType::Reduce,
                                CollType::AllGather, CollType::ReduceScatter, CollType::AllToAll,
                                CollType::Barrier};

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

std::string collList() {
  std::string out;
  for (CollType t : kNamedColls) out += std::string(collName(t)) + ", ";
  return out + "all";
}

std::string algoList() {
  std::string out;
  for (int i = 0; i < static_cast<int>(Algo::kCount); ++i) {
    if (i) out += ", ";
    out += algoName(static_cast<Algo>(i));
  }
  return out;
}

std::string implementersOf(CollType t) {
  std::string out;
  for (int i = 1; i < static_cast<int>(Algo::kCount); ++i) {
    Algo a = static_cast<Algo>(i);
    if (!algoImplements(a, t)) continue;
    if (!out.empty()) out += ", ";
    out += algoName(a);
  }
  return out.empty() ? "none" : out;
}

// A clause being parsed: builds error messages that quote it.
struct Clause {
  std::string text;  // trimmed, as the user wrote it

  Status error(const std::string& what) const {
    return invalidArgument("WEFT_ALGO clause \"" + text + "\": " + what);
  }

  // One size bound: parseBytes syntax (digits only, overflow refused);
  // "inf" only as an upper bound.
  Status size(const std::string& raw, bool upper, size_t* out) const {
    const std::string tok = lower(trim(raw));
    if (tok == "inf") {
      if (!upper) return error("the lower bound cannot be inf; expected a size such as 0 or 16K");
      *out = SIZE_MAX;
      return Status::ok();
    }
    const char* what =
        "; expected a size in bytes such as 0, 4096, 16K, 4M or 1G (or inf as the upper bound)";
    size_t b = 0;
    if (parseBytes(tok, &b)) {
      *out = b;
      return Status::ok();
    }
    // parseBytes refuses garbage and overflow alike: tell them apart.
    const size_t unitAt = tok.find_first_not_of("0123456789");
    const std::string unit = unitAt == std::string::npos ? "" : tok.substr(unitAt);
    const bool wellFormed = unitAt != 0 && !tok.empty() &&
                            (unit.empty() || unit == "k" || unit == "m" || unit == "g" ||
                             unit == "kb" || unit == "mb" || unit == "gb");
    return error("\"" + trim(raw) + (wellFormed ? "\" is too large" : "\" is not a size") + what);
  }

  Status algo(const std::string& raw, Algo* out) const {
    const std::string name = lower(trim(raw));
    if (name.empty()) return error("an algorithm name is missing; expected one of " + algoList());
    if (!parseAlgo(name, out))
      return error("unknown algorithm \"" + trim(raw) + "\"; expected one of " + algoList());
    return Status::ok();
  }
};

bool collByName(const std::string& name, CollType* t) {
  for (CollType c : kNamedColls)
    if (name == collName(c)) return *t = c, true;
  return false;
}

Status parseClause(const Clause& c, std::vector<AlgoRule>* out) {
  AlgoRule base;
  std::string ranges = c.text;
  const size_t colon = c.text.find(':');
  if (colon != std::string::npos) {
    if (c.text.find(':', colon + 1) != std::string::npos)
      return c.error("more than one ':'; expected <collective>:<ranges>");
    const std::string coll = lower(trim(c.text.substr(0, colon)));
    if (coll != "all") {
      if (!collByName(coll, &base.type))
        return c.error("unknown collective \"" + trim(c.text.substr(0, colon)) +
                       "\"; expected one of " + collList());
      base.anyColl = false;
    }
    ranges = trim(c.text.substr(colon + 1));
    if (ranges.empty())
      return c.error("nothing after ':'; expected an algorithm name or <lo>-<hi>=<algo> ranges");
  }

  std::vector<AlgoRule> rules;
  if (ranges.find('=') == std::string::npos) {
    if (ranges.find(',') != std::string::npos || ranges.find('-') != std::string::npos)
      return c.error("\"" + ranges +
                     "\" is neither an algorithm name nor <lo>-<hi>=<algo> ranges "
                     "(a range needs '=<algo>')");
    AlgoRule r = base;
    WEFT_RETURN_IF_ERROR(c.algo(ranges, &r.algo));
    rules.push_back(r);
  } else {
    for (const std::string& item : split(ranges, ',')) {
      const std::string range = trim(item);
      if (range.empty()) return c.error("an empty range between commas; expected <lo>-<hi>=<algo>");
      const size_t eq = range.find('=');
      if (eq == std::string::npos || range.find('=', eq + 1) != std::string::npos)
        return c.error("range \"" + range + "\" is not <lo>-<hi>=<algo>");
      const std::vector<std::string> bounds = split(range.substr(0, eq), '-');
      if (bounds.size() != 2)
        return c.error("range \"" + range +
                       "\" is not <lo>-<hi>=<algo> (one '-' between the sizes)");
      AlgoRule r = base;
      WEFT_RETURN_IF_ERROR(c.size(bounds[0], false, &r.lo));
      WEFT_RETURN_IF_ERROR(c.size(bounds[1], true, &r.hi));
      if (r.lo >= r.hi)
        return c.error("range \"" + range + "\" is empty; expected <lo> below <hi>");
      WEFT_RETURN_IF_ERROR(c.algo(range.substr(eq + 1), &r.algo));
      rules.push_back(r);
    }
  }

  for (const AlgoRule& r : rules)
    if (!r.anyColl && !algoImplements(r.algo, r.type))
      return c.error(std::string(algoName(r.algo)) + " does not implement " + collName(r.type) +
                     "; algorithms for " + collName(r.type) + ": " + implementersOf(r.type));
  out->insert(out->end(), rules.begin(), rules.end());
  return Status::ok();
}

}  // namespace

bool algoImplements(Algo a, CollType t) {
  if (a != Algo::Shm) return algoSupports(a, t);
  if (t == CollType::Send || t == CollType::Recv) return false;
  for (CollType c : kNamedColls)
    if (algoSupports(Algo::Shm, c)) return algoSupports(Algo::Shm, t);  // the table knows shm
  return true;
}

Algo AlgoRules::lookup(CollType t, size_t bytes) const { return lookup(t, bytes, true); }

Algo AlgoRules::lookup(CollType t, size_t bytes, bool shmArena) const {
  for (const AlgoRule& r : rules) {
    if (!r.anyColl && r.type != t) continue;
    if (bytes < r.lo || (bytes >= r.hi && r.hi != SIZE_MAX)) continue;
    if (!algoImplements(r.algo, t)) continue;
    if (r.algo == Algo::Shm && !shmArena) continue;
    return r.algo;
  }
  return Algo::Auto;
}

Status parseAlgoRules(const std::string& spec, AlgoRules* out) {
  AlgoRules parsed;
  for (const std::string& raw : split(spec, ';')) {
    Clause c{trim(raw)};
    if (c.text.empty()) continue;
    WEFT_RETURN_IF_ERROR(parseClause(c, &parsed.rules));
  }
  *out = std::move(parsed);
  return Status::ok();
}

std::string formatByteSize(size_t bytes) {
  if (bytes == SIZE_MAX) return "inf";
  if (bytes == 0) return "0";
  static const struct {
    size_t unit;
    const char* suffix;
  } kUnits[] = {{1ull << 30, "G"}, {1ull << 20, "M"}, {1ull << 10, "K"}};
  for (const auto& u : kUnits)
    if (bytes % u.unit == 0) return std::to_string(bytes / u.unit) + u.suffix;
  return std::to_string(bytes);
}

std::string formatAlgoRule(const AlgoRule& r) {
  std::string out = r.anyColl ? "" : std::string(collName(r.type)) + ":";
  if (r.lo == 0 && r.hi == SIZE_MAX) return out + algoName(r.algo);
  return out + formatByteSize(r.lo) + "-" + formatByteSize(r.hi) + "=" + algoName(r.algo);
}

}  // namespace weft
