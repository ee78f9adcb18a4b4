#include "api/comm_agree.h"

#include "core/log.h"

namespace weft {

Status agreeOnSetting(const SharedSetting& s, const std::string& env, uint64_t mine,
                      const std::vector<uint64_t>& all, int rank) {
  if (mine == s.invalid)
    return invalidArgument(strFormat("%s=%s: expected %s", s.var, env.c_str(), s.expected));
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] == mine) continue;
    return invalidUsage(strFormat(
        "rank %zu's %s (%s or the config) is %s, rank %d's %s: every rank must use the same", r,
        s.what, s.var, s.name(all[r]), rank, s.name(mine)));
  }
  return Status();
}

}  // namespace weft
