#include "cuda/mem_rules.h"

namespace weft {
namespace cuda {

const char* memKindName(MemKind k) {
  switch (k) {
    case MemKind::Host:
      return "pageable host";
    case MemKind::Pinned:
      return "pinned host";
    case MemKind::Device:
      return "device";
    case MemKind::Managed:
      return "managed";
  }
  return "unknown";
}

Status choosePath(const char* name, const BufferDesc* bufs, int n, bool stream,
                  const CudaState& cuda, ExecPath* path) {
  if (!stream) {
    for (int i = 0; i < n; ++i) {
      if (!bufs[i].ptr || bufs[i].kind != MemKind::Device) continue;
      return invalidUsage(
          strFormat("%s: %s %p is CUDA device memory (device %d) but the stream is NULL; pass the "
                    "cudaStream_t its work runs on (NULL means host memory)",
                    name, bufs[i].role, bufs[i].ptr, bufs[i].device));
    }
    *path = ExecPath::Host;
    return Status();
  }
  if (!cuda.usable)
    return invalidUsage(strFormat("%s: a stream was given, but %s; pass NULL for host memory", name,
                                  cuda.why.c_str()));
  for (int i = 0; i < n; ++i) {
    const BufferDesc& b = bufs[i];
    if (!b.ptr) continue;
    switch (b.kind) {
      case MemKind::Host:
        return invalidUsage(
            strFormat("%s: %s %p is pageable host memory, which work on a stream cannot be ordered "
                      "with; use device, managed or pinned memory, or pass stream NULL",
                      name, b.role, b.ptr));
      case MemKind::Pinned:
        if (!b.devicePtr)
          return invalidUsage(
              strFormat("%s: %s %p is pinned host memory the device cannot address; register it "
                        "with cudaHostRegisterMapped or pass stream NULL",
                        name, b.role, b.ptr));
        break;
      case MemKind::Device:
      case MemKind::Managed:
        if (b.kind == MemKind::Device && b.device != cuda.device)
          return invalidUsage(
              strFormat("%s: %s %p is memory of device %d, but the current device is %d; call "
                        "cudaSetDevice(%d) first",
                        name, b.role, b.ptr, b.device, cuda.device, b.device));
        break;
    }
  }
  *path = ExecPath::Stream;
  return Status();
}

}  // namespace cuda
}  // namespace weft
