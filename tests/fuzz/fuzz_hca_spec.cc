// Fuzz target: WEFT_IB_HCA (parseHcaSpec, transports/ibverbs/hca_spec.h),
// the ibverbs transport's device filter in NCCL_IB_HCA's syntax.
//
// Checks: parseHcaSpec accepts exactly what a reference grammar written
// here accepts ("^" and "=" prefixes, comma-separated non-empty names, each
// with an optional ":port" of decimal digits in 1..255) and finds the same
// entries; *out is untouched on failure and an error names WEFT_IB_HCA; a
// parsed spec prints back to a spec that parses to the same entries; each
// listed device and port is allowed (or, with "^", refused) by hcaAllowed.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "transports/ibverbs/hca_spec.h"

namespace {

using weft::ib::HcaEntry;
using weft::ib::HcaSpec;

// The grammar of docs/env.md's WEFT_IB_HCA, written independently.
bool reference(const std::string& text, HcaSpec* out) {
  HcaSpec s;
  size_t i = 0;
  if (i < text.size() && text[i] == '^') s.exclude = true, ++i;
  if (i < text.size() && text[i] == '=') s.exact = true, ++i;
  if (i == text.size()) {
    *out = s;
    return !s.exclude && !s.exact;
  }
  for (;;) {
    HcaEntry e;
    while (i < text.size() && text[i] != ',' && text[i] != ':') e.name += text[i++];
    if (e.name.empty()) return false;
    if (i < text.size() && text[i] == ':') {
      ++i;
      size_t digits = 0;
      long port = 0;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
        if (port <= 255) port = port * 10 + (text[i] - '0');
        ++i, ++digits;
      }
      if (digits == 0 || port < 1 || port > 255) return false;
      if (i < text.size() && text[i] != ',') return false;
      e.port = static_cast<int>(port);
    }
    s.entries.push_back(e);
    if (i == text.size()) break;
    ++i;  // the comma; a trailing one leaves an empty name
  }
  *out = s;
  return true;
}

bool same(const HcaSpec& a, const HcaSpec& b) {
  if (a.exclude != b.exclude || a.exact != b.exact || a.entries.size() != b.entries.size())
    return false;
  for (size_t i = 0; i < a.entries.size(); ++i)
    if (a.entries[i].name != b.entries[i].name || a.entries[i].port != b.entries[i].port)
      return false;
  return true;
}

std::string format(const HcaSpec& s) {
  std::string t = std::string(s.exclude ? "^" : "") + (s.exact ? "=" : "");
  for (size_t i = 0; i < s.entries.size(); ++i) {
    if (i) t += ",";
    t += s.entries[i].name;
    if (s.entries[i].port >= 0) t += ":" + std::to_string(s.entries[i].port);
  }
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  HcaSpec spec, want;
  spec.entries.push_back({"untouched", 7});
  const HcaSpec before = spec;
  weft::Status st = weft::ib::parseHcaSpec(text, &spec);
  const bool refOk = reference(text, &want);
  if (st.isOk() != refOk) abort();
  if (!st.isOk()) {
    if (!same(spec, before)) abort();  // *out written on failure
    if (st.message().find("WEFT_IB_HCA") == std::string::npos) abort();
    return 0;
  }
  if (!same(spec, want)) abort();
  HcaSpec again;
  if (!weft::ib::parseHcaSpec(format(spec), &again).isOk() || !same(spec, again)) abort();
  for (const HcaEntry& e : spec.entries) {
    const int port = e.port < 0 ? 1 : e.port;
    if (weft::ib::hcaAllowed(spec, e.name, port) == spec.exclude) abort();
  }
  return 0;
}
