#include "transports/ibverbs/hca_spec.h"

namespace weft {
namespace ib {

Status parseHcaSpec(const std::string& text, HcaSpec* out) {
  HcaSpec spec;
  size_t pos = 0;
  if (pos < text.size() && text[pos] == '^') {
    spec.exclude = true;
    ++pos;
  }
  if (pos < text.size() && text[pos] == '=') {
    spec.exact = true;
    ++pos;
  }
  const std::string list = text.substr(pos);
  if (list.empty()) {
    if (spec.exclude || spec.exact)
      return invalidArgument("WEFT_IB_HCA=" + text + ": no device after the prefix");
    *out = spec;
    return Status::ok();
  }
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string item =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    HcaEntry e;
    size_t colon = item.find(':');
    e.name = item.substr(0, colon);
    if (e.name.empty())
      return invalidArgument("WEFT_IB_HCA=" + text + ": empty device name in '" + item + "'");
    if (colon != std::string::npos) {
      std::string port = item.substr(colon + 1);
      // Decimal digits only: strtol would also take " 1", "+1" and "1\0junk".
      bool digits = !port.empty();
      long p = 0;
      for (char ch : port) {
        if (ch < '0' || ch > '9') {
          digits = false;
          break;
        }
        if (p <= 255) p = p * 10 + (ch - '0');
      }
      if (!digits || p < 1 || p > 255)
        return invalidArgument("WEFT_IB_HCA=" + text + ": bad port '" + port + "' in '" + item +
                               "'");
      e.port = static_cast<int>(p);
    }
    spec.entries.push_back(e);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  *out = spec;
  return Status::ok();
}

bool hcaAllowed(const HcaSpec& spec, const std::string& name, int port) {
  if (spec.entries.empty()) return true;
  bool listed = false;
  for (const HcaEntry& e : spec.entries) {
    bool nameOk = spec.exact ? name == e.name : name.compare(0, e.name.size(), e.name) == 0;
    if (nameOk && (e.port < 0 || e.port == port)) listed = true;
  }
  return spec.exclude ? !listed : listed;
}

}  // namespace ib
}  // namespace weft
