// Fuzz target: the cuda_ipc transport's address blob (cuda_ipc::decodeBlob,
// transports/cuda_ipc/cuda_ipc_wire.h, from CudaIpcTransport::connect).
//
// Input: the reading side (host hash, its pid, its rank and the
// communicator's size, a flags byte: bit 0 gives the blob's header this
// magic, host and size, so that the checks behind them are explored; bit 1
// gives it the reader's pid), a mask of the ranks the publisher reaches,
// then the blob; missing bytes read as zero.
//
// Checks: a blob that decodes is exactly a header of the cuda_ipc magic,
// this host and this size from a real process (pid > 0) followed by nranks
// entries; the entry returned is the reader's (its bytes), and it holds a
// FIFO: an address when the publisher is this process, a handle otherwise;
// a refusal names the rank; a rank without a blob is refused. The blob
// localAddress() writes (entries for the ranks it reaches) decodes, for
// every reader, exactly when the publisher reaches that reader, to the
// entry written for it.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "transports/base/blob.h"
#include "transports/cuda_ipc/cuda_ipc_wire.h"

namespace {

using namespace weft::cuda_ipc;

struct Side {
  uint64_t hostHash;
  int32_t selfPid;
  uint8_t rank, nranks, flags, pad;
  uint32_t reach;  // the ranks the publisher made a FIFO for (round trip)
};

void mustNameRank(const weft::Status& st, int p) {
  if (st.isOk() || st.message().find("cuda_ipc transport") == std::string::npos ||
      st.message().find("rank " + std::to_string(p)) == std::string::npos)
    abort();
}

bool empty(const BlobEntry& e, bool sameProcess) {
  if (sameProcess) return e.addr == 0;
  for (char c : e.handle)
    if (c) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::fuzz::Input in{data, size};
  const Side s = in.get<Side>();
  const int nranks = 1 + s.nranks % 12;
  const int rank = s.rank % nranks;
  const int selfPid = s.selfPid > 0 ? s.selfPid : 1;
  std::string blob(reinterpret_cast<const char*>(data) + in.pos, size - in.pos);
  if ((s.flags & 1) && blob.size() >= sizeof(BlobHeader)) {
    BlobHeader h;
    memcpy(&h, blob.data(), sizeof h);
    h.magic = kBlobMagic;
    h.hostHash = s.hostHash;
    h.nranks = nranks;
    if (s.flags & 2) h.pid = selfPid;
    memcpy(&blob[0], &h, sizeof h);
  }
  const std::vector<std::string> blobs = {blob};

  BlobHeader h;
  BlobEntry e;
  weft::Status st = decodeBlob(blobs, 0, rank, nranks, s.hostHash, selfPid, &h, &e);
  if (st.isOk()) {
    if (blob.size() != sizeof h + static_cast<size_t>(nranks) * sizeof e) abort();
    if (memcmp(&h, blob.data(), sizeof h) != 0) abort();
    if (h.magic != kBlobMagic || h.hostHash != s.hostHash || h.nranks != nranks || h.pid <= 0)
      abort();
    if (memcmp(&e, blob.data() + sizeof h + static_cast<size_t>(rank) * sizeof e, sizeof e) != 0)
      abort();
    if (empty(e, h.pid == selfPid)) abort();
  } else {
    mustNameRank(st, 0);
  }
  for (int p : {1, -1})
    mustNameRank(decodeBlob(blobs, p, rank, nranks, s.hostHash, selfPid, &h, &e), p);

  // What localAddress() writes: a header, then an entry per rank, filled
  // (handle and address) for the ranks it reaches, zero for the others.
  const int32_t pub = (s.flags & 2) ? selfPid : selfPid == INT32_MAX ? 1 : selfPid + 1;
  const BlobHeader wh{kBlobMagic, pub, s.hostHash, nranks, s.pad};
  std::vector<BlobEntry> entries(static_cast<size_t>(nranks));
  memset(entries.data(), 0, entries.size() * sizeof(BlobEntry));
  for (int r = 0; r < nranks; ++r) {
    if (!(s.reach >> r & 1)) continue;
    for (size_t i = 0; i < sizeof entries[r].handle; ++i)
      entries[r].handle[i] = static_cast<char>(r * 31 + i + 1);
    entries[r].addr = 0x7f0000000000ull + static_cast<uint64_t>(r) * 4096;
  }
  std::vector<std::string> written(1);
  weft::BlobWriter(&written[0]).put(wh).putArray(entries);
  for (int r = 0; r < nranks; ++r) {
    st = decodeBlob(written, 0, r, nranks, s.hostHash, selfPid, &h, &e);
    if (st.isOk() != static_cast<bool>(s.reach >> r & 1)) abort();
    if (st.isOk() && (memcmp(&h, &wh, sizeof h) != 0 || memcmp(&e, &entries[r], sizeof e) != 0))
      abort();
  }
  // ... and is refused by a communicator of another size.
  mustNameRank(decodeBlob(written, 0, 0, nranks + 1, s.hostHash, selfPid, &h, &e), 0);
  return 0;
}
