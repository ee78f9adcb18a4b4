// What UCX_TLS lets UCP use, read as UCX reads it: unset, empty or an
// exclusion list ("^...") allows every transport; otherwise it names
// transports and aliases ("all", "sm", "tcp", "rc", "ib", ...).
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <string>

namespace weft {
namespace ucx {

// Whether UCX_TLS allows any of `names` (matched as substrings of the list,
// so "rc" covers rc_verbs and rc_mlx5).
inline bool tlsMayUse(std::initializer_list<const char*> names) {
  const char* tls = getenv("UCX_TLS");
  if (!tls || !*tls || tls[0] == '^') return true;
  const std::string s(tls);
  if (s.find("all") != std::string::npos) return true;
  for (const char* k : names)
    if (s.find(k) != std::string::npos) return true;
  return false;
}

}  // namespace ucx
}  // namespace weft
