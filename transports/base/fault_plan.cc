#include "transports/base/fault_plan.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/log.h"

namespace weft {
namespace {

const char* const kKindNames[kFaultKinds] = {"delay", "short", "drop", "corrupt"};

uint64_t splitmix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool parseUnsigned(const std::string& s, uint64_t max, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > max) return false;
  *out = v;
  return true;
}

Status parseItem(const std::string& item, FaultRule* r) {
  auto bad = [&](const char* why) {
    return invalidArgument(
        strFormat("WEFT_TEST_FAULTS: \"%s\": %s (kind[:ms]@N or kind[:ms]%%P; kinds delay:MS, "
                  "short, drop, corrupt)",
                  item.c_str(), why));
  };
  const size_t at = item.find_first_of("@%");
  if (at == std::string::npos) return bad("no @N or %P");
  std::string head = item.substr(0, at);
  const std::string when = item.substr(at + 1);
  std::string ms;
  const size_t colon = head.find(':');
  if (colon != std::string::npos) {
    ms = head.substr(colon + 1);
    head.resize(colon);
  }
  int k = -1;
  for (int i = 0; i < kFaultKinds; ++i)
    if (head == kKindNames[i]) k = i;
  if (k < 0) return bad("unknown kind");
  r->kind = static_cast<FaultKind>(k);
  const bool isDelay = r->kind == FaultKind::Delay;
  if (isDelay != (colon != std::string::npos))
    return bad(isDelay ? "delay needs :MS" : "only delay takes :MS");
  if (isDelay) {
    uint64_t v = 0;
    if (!parseUnsigned(ms, 600000, &v)) return bad("MS must be 0..600000");
    r->ms = static_cast<int>(v);
  }
  if (item[at] == '@') {
    if (!parseUnsigned(when, UINT64_MAX / 10, &r->at) || r->at == 0)
      return bad("N must be a count from 1");
    r->prob = 0;
  } else {
    if (when.empty() || when.find_first_not_of("0123456789.") != std::string::npos)
      return bad("P must be a number in (0, 1]");
    char* end = nullptr;
    errno = 0;
    const double p = strtod(when.c_str(), &end);
    if (errno || end != when.c_str() + when.size() || !(p > 0 && p <= 1))
      return bad("P must be a number in (0, 1]");
    r->prob = p;
    r->at = 0;
  }
  return Status::ok();
}

}  // namespace

Status parseFaultSpec(const std::string& spec, std::vector<FaultRule>* out) {
  std::vector<FaultRule> rules;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    FaultRule r;
    WEFT_RETURN_IF_ERROR(parseItem(spec.substr(pos, comma - pos), &r));
    rules.push_back(r);
    pos = comma + 1;
  }
  *out = std::move(rules);
  return Status::ok();
}

std::string formatFaultSpec(const std::vector<FaultRule>& rules) {
  std::string s;
  for (const FaultRule& r : rules) {
    if (!s.empty()) s += ',';
    s += kKindNames[static_cast<int>(r.kind)];
    if (r.kind == FaultKind::Delay) s += strFormat(":%d", r.ms);
    if (r.at)
      s += strFormat("@%llu", static_cast<unsigned long long>(r.at));
    else
      s += strFormat("%%%.17g", r.prob);
  }
  return s;
}

Status FaultPlan::make(const std::string& spec, uint64_t seed, int rank,
                       std::shared_ptr<FaultPlan>* out) {
  out->reset();
  if (spec.empty()) return Status::ok();
  std::vector<FaultRule> rules;
  WEFT_RETURN_IF_ERROR(parseFaultSpec(spec, &rules));
  auto p = std::make_shared<FaultPlan>();
  p->rules_ = std::move(rules);
  p->rank_ = rank;
  p->rng_ = seed ^ (0x5851f42d4c957f2dull * static_cast<uint64_t>(rank + 1));
  for (const FaultRule& r : p->rules_)
    if (r.kind == FaultKind::Delay) p->delayMs_ = r.ms;
  WEFT_WARN(kTransport, "rank %d: fault injection on (WEFT_TEST_FAULTS=%s)", rank,
            spec.c_str());
  *out = std::move(p);
  return Status::ok();
}

uint64_t FaultPlan::draw() {
  std::lock_guard<std::mutex> g(rngMu_);
  return splitmix(&rng_);
}

bool FaultPlan::fire(FaultKind k, const char* where) {
  const int ki = static_cast<int>(k);
  bool has = false;
  for (const FaultRule& r : rules_) has |= r.kind == k;
  if (!has) return false;
  const uint64_t n = events_[ki].fetch_add(1) + 1;
  bool hit = false;
  for (const FaultRule& r : rules_) {
    if (r.kind != k) continue;
    if (r.at ? r.at == n
             : static_cast<double>(draw() >> 11) * 0x1.0p-53 < r.prob)
      hit = true;
  }
  if (!hit) return false;
  fired_[ki].fetch_add(1);
  WEFT_INFO(kTransport, "rank %d: fault injected: %s at event %llu (%s)", rank_, kKindNames[ki],
            static_cast<unsigned long long>(n), where);
  return true;
}

void flipBit(void* p, size_t bytes, uint64_t bit) {
  if (!bytes) return;
  bit %= 8 * bytes;
  static_cast<unsigned char*>(p)[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
}

}  // namespace weft
