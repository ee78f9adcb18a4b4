// Fuzz target: the shm transport's address blob (shm::decodeBlob,
// transports/shm/shm_wire.h, from ShmTransport::connect).
//
// Input: the receiver's host hash, a flags byte (bit 0: give the blob this
// magic and host, so that the checks behind them are explored; bit 1: make
// the pid positive), then the blob; missing bytes read as zero.
//
// Checks: a blob that decodes is exactly one Blob of the shm magic, from
// this host and a real process (pid > 0), and the decoded struct is its
// bytes; a refusal names the transport and the rank; a rank without a
// blob is refused; the blob localAddress() writes (any pid > 0) decodes to
// what was written.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "transports/base/blob.h"
#include "transports/shm/shm_wire.h"

namespace {

using namespace weft::shm;

void mustNameRank(const weft::Status& st, int p) {
  if (st.isOk() || st.message().find("shm transport") == std::string::npos ||
      st.message().find("rank " + std::to_string(p)) == std::string::npos)
    abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::fuzz::Input in{data, size};
  const uint64_t hostHash = in.get<uint64_t>();
  const uint8_t flags = in.get<uint8_t>();
  std::string blob(reinterpret_cast<const char*>(data) + in.pos, size - in.pos);
  if ((flags & 1) && blob.size() >= sizeof(Blob)) {
    memcpy(&blob[0], &kBlobMagic, 4);
    memcpy(&blob[8], &hostHash, 8);
  }
  if ((flags & 2) && blob.size() >= 8) blob[7] &= 0x7f;  // pid >= 0
  const std::vector<std::string> blobs = {std::string(), blob};

  Blob b;
  memset(&b, 0x5a, sizeof b);
  weft::Status st = decodeBlob(blobs, 1, hostHash, &b);
  if (st.isOk()) {
    if (blob.size() != sizeof b || memcmp(&b, blob.data(), sizeof b) != 0) abort();
    if (b.magic != kBlobMagic || b.hostHash != hostHash || b.pid <= 0) abort();
  } else {
    mustNameRank(st, 1);
  }
  // Ranks with no blob (empty, outside the vector, negative).
  for (int p : {0, 2, -1}) mustNameRank(decodeBlob(blobs, p, hostHash, &b), p);

  // What localAddress() writes decodes back.
  int32_t pid = 0;
  memcpy(&pid, blob.data(), blob.size() < 4 ? blob.size() : 4);
  pid = pid == INT32_MIN ? 1 : (pid < 0 ? -pid : pid) + (pid == 0);
  std::vector<std::string> written(1);
  weft::BlobWriter(&written[0]).put(Blob{kBlobMagic, pid, hostHash});
  Blob c;
  if (!decodeBlob(written, 0, hostHash, &c).isOk() || c.magic != kBlobMagic || c.pid != pid ||
      c.hostHash != hostHash)
    abort();
  // ... and is refused on another host.
  mustNameRank(decodeBlob(written, 0, hostHash + 1, &c), 0);
  return 0;
}
