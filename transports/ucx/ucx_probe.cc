// Whether UCX can drive an RDMA fabric here (InfiniBand, RoCE): asked of
// UCT, the layer under UCP, which lists every transport of every memory
// domain. weft prefers its own tcp over UCX's tcp, so the ucx transport is
// chosen by default only when this finds an RDMA transport (rc, dc, ud).
#include <uct/api/uct.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/log.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_tls.h"

namespace weft {
namespace {

bool isRdmaTl(const char* tl) {
  return strncmp(tl, "rc", 2) == 0 || strncmp(tl, "dc", 2) == 0 || strncmp(tl, "ud", 2) == 0;
}

// UCX_TLS, when set, limits what UCP will use: RDMA only if it may.
bool tlsAllowRdma() { return ucx::tlsMayUse({"rc", "dc", "ud", "ib"}); }

bool probe() {
  uct_component_h* comps = nullptr;
  unsigned ncomps = 0;
  if (uct_query_components(&comps, &ncomps) != UCS_OK) return false;
  bool found = false;
  for (unsigned c = 0; c < ncomps && !found; ++c) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(comps[c], &attr) != UCS_OK || attr.md_resource_count == 0) continue;
    std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds.data();
    if (uct_component_query(comps[c], &attr) != UCS_OK) continue;
    for (const uct_md_resource_desc_t& d : mds) {
      uct_md_config_t* cfg = nullptr;
      if (uct_md_config_read(comps[c], nullptr, nullptr, &cfg) != UCS_OK) continue;
      uct_md_h md = nullptr;
      ucs_status_t st = uct_md_open(comps[c], d.md_name, cfg, &md);
      uct_config_release(cfg);
      if (st != UCS_OK) continue;
      uct_tl_resource_desc_t* tls = nullptr;
      unsigned ntls = 0;
      if (uct_md_query_tl_resources(md, &tls, &ntls) == UCS_OK) {
        for (unsigned t = 0; t < ntls; ++t)
          if (isRdmaTl(tls[t].tl_name)) {
            WEFT_INFO(kTransport, "ucx: RDMA transport %s on %s", tls[t].tl_name, tls[t].dev_name);
            found = true;
          }
        uct_release_tl_resource_list(tls);
      }
      uct_md_close(md);
    }
  }
  uct_release_component_list(comps);
  return found;
}

}  // namespace

bool ucxHasRdma() {
  static std::once_flag once;
  static bool rdma = false;
  std::call_once(once, [] { rdma = probe(); });
  return rdma && tlsAllowRdma();
}

}  // namespace weft
