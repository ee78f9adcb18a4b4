// GPUDirect RDMA for the ibverbs transport: the NIC reads and writes CUDA
// device memory directly, so a device buffer crosses the network without a
// copy through host memory. Two ways the driver stack offers it, probed in
// this order:
//   dma-buf   the CUDA driver exports the allocation as a dma-buf
//             (cuMemGetHandleForAddressRange) and the NIC registers that
//             (ibv_reg_dmabuf_mr); upstream kernels >= 5.12, CUDA >= 11.7;
//   peermem   the nvidia-peermem (or older nv_peer_mem) kernel module lets
//             ibv_reg_mr take a device pointer as it is.
// WEFT_NET_GDR: auto (default; used where either works), 0 (never), 1 (the
// transport fails to start without it, saying why).
//
// The CUDA driver is dlopen'ed here (libcuda.so.1), so the transport loads
// and runs where there is none. Nothing of this has run on a machine with
// both a GPU and an RDMA NIC: the probe's decisions are unit-tested on
// fake sysfs trees (tests/transport/ib_logic_test.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

struct ibv_pd;
struct ibv_mr;

namespace weft {
namespace ib {

enum class GdrMode { Off, DmaBuf, PeerMem };
const char* gdrModeName(GdrMode m);  // "off", "dma-buf", "nvidia-peermem"

// WEFT_NET_GDR's value: -1 auto, 0 off, 1 required; anything else is
// INVALID_ARGUMENT naming it.
Status parseGdrSetting(const std::string& text, int* out);

// What the machine offers, from what was found: `cudaDevice` (a CUDA driver
// with at least one device), `dmabufCapable` (that device reports dma-buf
// support and libibverbs has ibv_reg_dmabuf_mr), and the peer-memory module
// seen under `sysRoot` ("/sys" normally: module/nvidia_peermem,
// module/nv_peer_mem or kernel/mm/memory_peers/nv_mem). Off with `why` set
// when neither works.
GdrMode chooseGdr(bool cudaDevice, bool dmabufCapable, const std::string& sysRoot,
                  std::string* why);

// This machine: the CUDA driver and libibverbs asked, sysfs at /sys.
GdrMode probeGdr(std::string* why);

// Registers device memory [addr, addr + len) with `pd` the way `mode` says.
Status registerDeviceMr(ibv_pd* pd, GdrMode mode, uintptr_t addr, size_t len, int access,
                        ibv_mr** out);
// Host-to-device copy for eager payloads landing in device memory (the
// driver's synchronous cuMemcpyHtoD).
Status copyToDevice(void* dst, const void* src, size_t len);

}  // namespace ib
}  // namespace weft
