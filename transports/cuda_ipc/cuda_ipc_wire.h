// What the cuda_ipc transport publishes for its peers: a BlobHeader, then
// one BlobEntry per rank of the communicator (entry p: the device FIFO the
// publisher receives from rank p on). Written by localAddress(), checked by
// connect() through decodeBlob (pure, no CUDA: tests/fuzz/fuzz_cuda_ipc_blob.cc
// calls it as connect() does). Same build on both ends: structs travel as
// laid out in memory.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/status.h"
#include "cuda/runtime.h"
#include "transports/base/blob.h"

namespace weft {
namespace cuda_ipc {

constexpr uint32_t kBlobMagic = 0x5743554c;  // "WCUL"

struct BlobHeader {
  uint32_t magic;  // kBlobMagic
  int32_t pid;     // the publishing process (> 0)
  uint64_t hostHash;
  int32_t nranks;  // entries that follow: the communicator's size
  int32_t device;
};
static_assert(sizeof(BlobHeader) == 24, "BlobHeader layout");

// Then, for every rank p: the FIFO this rank receives from p on.
struct BlobEntry {
  char handle[cuda::kIpcHandleBytes];  // zero when none
  uint64_t addr;                       // the same FIFO, for peers in this process; 0 when none
};
static_assert(sizeof(BlobEntry) == cuda::kIpcHandleBytes + 8, "BlobEntry layout");

// What rank `rank` (of `nranks`, on host `hostHash`, in process `selfPid`)
// takes from rank p's blob: its header, and the entry of the FIFO p
// receives from `rank` on.
inline Status decodeBlob(const std::vector<std::string>& blobs, int p, int rank, int nranks,
                         uint64_t hostHash, int selfPid, BlobHeader* hdr, BlobEntry* entry) {
  BlobReader in("cuda_ipc", blobs, p);
  BlobHeader h;
  if (nranks < 1 || rank < 0 || rank >= nranks || !in.get(&h) ||
      in.left() / sizeof(BlobEntry) != static_cast<size_t>(nranks) ||
      in.left() % sizeof(BlobEntry) != 0)
    return in.bad();
  if (h.magic != kBlobMagic || h.hostHash != hostHash || h.nranks != nranks || h.pid <= 0)
    return invalidArgument(
        strFormat("cuda_ipc transport: address blob of rank %d is not from this host", p));
  BlobEntry e;
  if (!in.skip(static_cast<size_t>(rank) * sizeof e) || !in.get(&e)) return in.bad();
  // A FIFO for this rank: its address in the same process, its handle in another.
  static const char kNone[sizeof e.handle] = {};
  if (h.pid == selfPid ? e.addr == 0 : memcmp(e.handle, kNone, sizeof e.handle) == 0)
    return invalidArgument(strFormat(
        "cuda_ipc transport: rank %d published no FIFO for rank %d (it cannot reach it)", p, rank));
  *hdr = h;
  *entry = e;
  return Status::ok();
}

}  // namespace cuda_ipc
}  // namespace weft
