// Fuzz target: WEFT_ALGO (parseAlgoRules, src/algo/algo_rules.h).
//
// Checks: no crash or UB on any text; a spec that parses prints back
// (formatAlgoRule, joined with ';') to a spec that parses to the same
// rules; lookups over a few sizes never fail.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "algo/algo_rules.h"

namespace {

bool same(const weft::AlgoRule& a, const weft::AlgoRule& b) {
  return a.anyColl == b.anyColl && (a.anyColl || a.type == b.type) && a.lo == b.lo &&
         a.hi == b.hi && a.algo == b.algo;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = (setenv("WEFT_DEBUG", "NONE", 1), true);
  (void)quiet;
  const std::string spec(reinterpret_cast<const char*>(data), size);
  weft::AlgoRules rules;
  weft::Status st = weft::parseAlgoRules(spec, &rules);
  if (!st.isOk()) {
    if (!rules.empty() || st.message().empty()) abort();  // *out written on failure
    return 0;
  }
  std::string text;
  for (const weft::AlgoRule& r : rules.rules) {
    if (r.lo >= r.hi) abort();  // a range that matches nothing
    if (!text.empty()) text += ";";
    text += weft::formatAlgoRule(r);
  }
  weft::AlgoRules again;
  if (!weft::parseAlgoRules(text, &again).isOk()) abort();
  if (again.rules.size() != rules.rules.size()) abort();
  for (size_t i = 0; i < rules.rules.size(); ++i)
    if (!same(rules.rules[i], again.rules[i])) abort();
  for (size_t bytes : {size_t(0), size_t(1), size_t(4096), size_t(1) << 20, SIZE_MAX})
    for (int t = 0; t <= static_cast<int>(weft::CollType::Barrier); ++t)
      (void)rules.lookup(static_cast<weft::CollType>(t), bytes, t % 2 == 0);
  return 0;
}
