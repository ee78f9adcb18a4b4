#include "transports/ibverbs/ibverbs_device.h"

#include <cstring>
#include <vector>

#include "core/log.h"
#include "transports/ibverbs/gid_select.h"
#include "transports/ibverbs/hca_spec.h"

namespace weft {
namespace ib {
namespace {

int mtuBytes(ibv_mtu m) {
  switch (m) {
    case IBV_MTU_256:
      return 256;
    case IBV_MTU_512:
      return 512;
    case IBV_MTU_1024:
      return 1024;
    case IBV_MTU_2048:
      return 2048;
    case IBV_MTU_4096:
      return 4096;
  }
  return 0;
}

// The port's GID table, as gid_select.h sees it.
std::vector<GidEntry> gidTable(ibv_context* ctx, int port, int len) {
  std::vector<GidEntry> out;
  for (int i = 0; i < len; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, static_cast<uint32_t>(port), static_cast<uint32_t>(i), &e, 0) != 0)
      continue;
    GidEntry g;
    g.index = i;
    g.type = e.gid_type == IBV_GID_TYPE_ROCE_V2   ? GidType::RoceV2
             : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? GidType::RoceV1
                                                  : GidType::Ib;
    memcpy(g.gid, e.gid.raw, 16);
    out.push_back(g);
  }
  return out;
}

}  // namespace

int ibDeviceCount() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list) ibv_free_device_list(list);
  return list ? n : 0;
}

Status openIbPort(const Config& cfg, IbPort* out) {
  HcaSpec spec;
  WEFT_RETURN_IF_ERROR(parseHcaSpec(cfg.ibHca, &spec));
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list) ibv_free_device_list(list);
    return Status(WEFT_ERR_SYSTEM, "ibverbs: ibv_get_device_list found no RDMA device");
  }
  std::string seen;
  Status result(WEFT_ERR_SYSTEM, "");
  for (int d = 0; d < n && result.isError(); ++d) {
    const char* name = ibv_get_device_name(list[d]);
    ibv_context* ctx = ibv_open_device(list[d]);
    if (!ctx) {
      seen += strFormat(" %s (cannot open)", name);
      continue;
    }
    ibv_device_attr da{};
    if (ibv_query_device(ctx, &da) != 0) {
      ibv_close_device(ctx);
      continue;
    }
    bool used = false;
    for (int port = 1; port <= da.phys_port_cnt && !used; ++port) {
      ibv_port_attr pa{};
      if (ibv_query_port(ctx, static_cast<uint8_t>(port), &pa) != 0) continue;
      const bool allowed = hcaAllowed(spec, name, port);
      seen += strFormat(" %s:%d (%s%s)", name, port, pa.state == IBV_PORT_ACTIVE ? "active" : "down",
                        allowed ? "" : ", excluded by WEFT_IB_HCA");
      if (!allowed || pa.state != IBV_PORT_ACTIVE) continue;
      IbPort p;
      p.ctx = ctx;
      p.device = name;
      p.port = port;
      p.ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
      p.lid = pa.lid;
      p.mtu = mtuBytes(pa.active_mtu);
      Status gs = selectGid(gidTable(ctx, port, pa.gid_tbl_len), p.ethernet, cfg.ibGidIndex, &p.gidIndex);
      if (gs.isError()) {
        seen += " [" + gs.message() + "]";
        continue;
      }
      if (ibv_query_gid(ctx, static_cast<uint8_t>(port), p.gidIndex, &p.gid) != 0) continue;
      *out = p;
      used = true;
      result = Status::ok();
      WEFT_INFO(kTransport, "ibverbs: using %s port %d (%s, MTU %d, GID index %d)", name, port,
                p.ethernet ? "RoCE" : "InfiniBand", p.mtu, p.gidIndex);
    }
    if (!used) ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (result.isError())
    return Status(WEFT_ERR_SYSTEM, "ibverbs: no usable RDMA port (WEFT_IB_HCA=" + cfg.ibHca +
                                       "); seen:" + seen);
  return result;
}

void closeIbPort(IbPort* p) {
  if (p->ctx) ibv_close_device(p->ctx);
  p->ctx = nullptr;
}

}  // namespace ib
}  // namespace weft
