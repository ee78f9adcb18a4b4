// The half of gdr.h that needs rdma-core and the CUDA driver (dlopen'ed):
// probeGdr, registerDeviceMr, copyToDevice. Built only with ibverbs.
#include "transports/ibverbs/gdr.h"

#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

#include "core/log.h"

namespace weft {
namespace ib {
namespace {

// The few CUDA driver calls this needs, by their C signatures (CUresult is
// an int, CUdeviceptr an unsigned long long, CUdevice an int).
struct Driver {
  bool ok = false;
  int (*init)(unsigned) = nullptr;
  int (*deviceGetCount)(int*) = nullptr;
  int (*deviceGetAttribute)(int*, int, int) = nullptr;
  int (*memGetAddressRange)(unsigned long long*, size_t*, unsigned long long) = nullptr;
  int (*memGetHandleForAddressRange)(void*, unsigned long long, size_t, int, unsigned long long) =
      nullptr;
  int (*memcpyHtoD)(unsigned long long, const void*, size_t) = nullptr;
};

constexpr int kAttrDmaBufSupported = 124;  // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
constexpr int kHandleDmaBufFd = 1;         // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD

const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto sym = [lib](const char* n) { return dlsym(lib, n); };
    d.init = reinterpret_cast<decltype(d.init)>(sym("cuInit"));
    d.deviceGetCount = reinterpret_cast<decltype(d.deviceGetCount)>(sym("cuDeviceGetCount"));
    d.deviceGetAttribute =
        reinterpret_cast<decltype(d.deviceGetAttribute)>(sym("cuDeviceGetAttribute"));
    d.memGetAddressRange =
        reinterpret_cast<decltype(d.memGetAddressRange)>(sym("cuMemGetAddressRange_v2"));
    d.memGetHandleForAddressRange = reinterpret_cast<decltype(d.memGetHandleForAddressRange)>(
        sym("cuMemGetHandleForAddressRange"));
    d.memcpyHtoD = reinterpret_cast<decltype(d.memcpyHtoD)>(sym("cuMemcpyHtoD_v2"));
    d.ok = d.init && d.deviceGetCount && d.deviceGetAttribute && d.memGetAddressRange &&
           d.memcpyHtoD && d.init(0) == 0;
  });
  return d;
}

}  // namespace

GdrMode probeGdr(std::string* why) {
  const Driver& d = driver();
  int count = 0;
  const bool device = d.ok && d.deviceGetCount(&count) == 0 && count > 0;
  bool dmabuf = false;
  if (device && d.memGetHandleForAddressRange) {
    int v = 0;
    dmabuf = d.deviceGetAttribute(&v, kAttrDmaBufSupported, 0) == 0 && v != 0;
  }
  return chooseGdr(device, dmabuf, "/sys", why);
}

Status registerDeviceMr(ibv_pd* pd, GdrMode mode, uintptr_t addr, size_t len, int access,
                        ibv_mr** out) {
  if (mode == GdrMode::PeerMem) {
    *out = ibv_reg_mr(pd, reinterpret_cast<void*>(addr), len, access);
    if (!*out)
      return systemError(strFormat("ibverbs: ibv_reg_mr of %zu bytes of device memory "
                                   "(nvidia-peermem)", len), errno);
    return Status::ok();
  }
  if (mode != GdrMode::DmaBuf) return invalidUsage("ibverbs: GPUDirect RDMA is off");
  const Driver& d = driver();
  // The dma-buf covers whole host pages of the allocation holding the range.
  unsigned long long base = 0;
  size_t size = 0;
  if (d.memGetAddressRange(&base, &size, addr) != 0)
    return invalidArgument(strFormat("ibverbs: %#llx is not CUDA device memory",
                                     static_cast<unsigned long long>(addr)));
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t span = (size + page - 1) / page * page;
  int fd = -1;
  if (d.memGetHandleForAddressRange(&fd, base, span, kHandleDmaBufFd, 0) != 0 || fd < 0)
    return Status(WEFT_ERR_SYSTEM, "ibverbs: cuMemGetHandleForAddressRange (dma-buf) failed");
  *out = ibv_reg_dmabuf_mr(pd, addr - base, len, addr, fd, access);
  const int err = errno;
  close(fd);  // the registration holds its own reference
  if (!*out)
    return systemError(strFormat("ibverbs: ibv_reg_dmabuf_mr of %zu bytes", len), err);
  return Status::ok();
}

Status copyToDevice(void* dst, const void* src, size_t len) {
  const Driver& d = driver();
  if (!d.ok) return Status(WEFT_ERR_SYSTEM, "ibverbs: no CUDA driver for a device copy");
  if (d.memcpyHtoD(reinterpret_cast<uintptr_t>(dst), src, len) != 0)
    return Status(WEFT_ERR_SYSTEM, strFormat("ibverbs: cuMemcpyHtoD of %zu bytes failed", len));
  return Status::ok();
}

}  // namespace ib
}  // namespace weft
