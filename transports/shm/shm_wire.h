// What the shm transport publishes for its peers: one Blob, written by
// localAddress() and checked by connect() (decodeBlob, pure, so that
// tests/fuzz/fuzz_shm_blob.cc calls it as connect() does). Same build on
// both ends: the struct travels as laid out in memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "transports/base/blob.h"

namespace weft {
namespace shm {

constexpr uint32_t kBlobMagic = 0x5753424c;  // "WSBL"

struct Blob {
  uint32_t magic;  // kBlobMagic
  int32_t pid;     // the publishing process (> 0)
  uint64_t hostHash;
};
static_assert(sizeof(Blob) == 16, "Blob layout");

// Rank `p`'s blob among `blobs` (indexed by rank), for a rank of host
// `hostHash`: exactly one Blob of this magic, from a process (pid > 0) of
// this host. Otherwise BlobReader::bad() for a blob of the wrong size, or
// "address blob of rank p is not from this host".
inline Status decodeBlob(const std::vector<std::string>& blobs, int p, uint64_t hostHash,
                         Blob* out) {
  BlobReader in("shm", blobs, p);
  Blob b;
  if (!in.get(&b) || !in.atEnd()) return in.bad();
  if (b.magic != kBlobMagic || b.hostHash != hostHash || b.pid <= 0)
    return invalidArgument(
        strFormat("shm transport: address blob of rank %d is not from this host", p));
  *out = b;
  return Status::ok();
}

}  // namespace shm
}  // namespace weft
