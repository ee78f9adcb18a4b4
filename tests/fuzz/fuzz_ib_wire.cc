// Fuzz target: the ibverbs transport's wire checks
// (transports/ibverbs/ibverbs_wire.h): the address blob (ib::decodeBlob,
// from IbTransport::connect), the header of every message that lands in a
// receive slot (checkHeader, from IbPeer::onCompletion) and the Hello's
// fields and MAC (helloOk).
//
// Input: a flags byte (bit 0: give the blob's header this magic, version,
// size and QP count, so that the length and entry checks are explored;
// bit 1: re-seal the hello's MAC over its fuzzed fields, so that the
// checks behind the MAC are explored), the reading side (rank, size, QPs
// per peer, a mask of the ranks the publisher made QPs for), a blob length
// and the blob, then a Header with its byte length, then a Hello's header,
// MAC and receiver; missing bytes read as zero.
//
// Checks: a blob that decodes is exactly a header of the ibverbs magic and
// version, this size and QP count, then nranks * nqps entries; the QPs
// returned are the reader's row, each with a QP number and PSN of 24 bits
// and no QP 0; a refusal names the rank. The blob localAddress() writes
// decodes, for every other rank, exactly when the publisher made its QPs,
// to them. A header passes iff a reference model written here says so
// (kinds in check order), so an eager payload the receiver copies lies
// inside the slot and the message; every message IbPeer sends passes with
// the length it is sent with. A hello that passes carries this
// communicator, the expected sender and the HMAC for this receiver; the
// sender's hello passes, and not for another receiver or key.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "transports/base/blob.h"
#include "transports/ibverbs/ibverbs_wire.h"

namespace {

using namespace weft::ib;
using weft::fuzz::Input;

struct Reader {
  uint8_t rank, nranks, nqps, len;
  uint32_t reach;
};

void blob(Input& in, uint8_t flags) {
  const Reader r = in.get<Reader>();
  const int nranks = 1 + r.nranks % 8;
  const int rank = r.rank % nranks;
  const int nqps = 1 + r.nqps % 16;  // WEFT_IB_QPS_PER_PEER: 1..16
  // r.len counts 8-byte units after the header, so whole blobs are common.
  const size_t n = std::min<size_t>(sizeof(BlobHeader) + 8 * size_t{r.len}, in.size - in.pos);
  std::string b(reinterpret_cast<const char*>(in.data) + in.pos, n);
  in.pos += n;
  if ((flags & 1) && b.size() >= sizeof(BlobHeader)) {
    BlobHeader h;
    memcpy(&h, b.data(), sizeof h);
    h.magic = kBlobMagic;
    h.version = kWireVersion;
    h.nranks = nranks;
    h.nqps = nqps;
    memcpy(&b[0], &h, sizeof h);
  }
  const std::vector<std::string> blobs(static_cast<size_t>(nranks), b);
  const int p = (rank + 1) % nranks;  // the publisher (== rank when alone: refused)
  BlobHeader h;
  std::vector<QpAddr> qps;
  weft::Status st = decodeBlob(blobs, p, rank, nranks, nqps, &h, &qps);
  if (st.isOk()) {
    const size_t row = static_cast<size_t>(nqps) * sizeof(QpAddr);
    if (p == rank || b.size() != sizeof h + static_cast<size_t>(nranks) * row) abort();
    if (memcmp(&h, b.data(), sizeof h) != 0 || h.magic != kBlobMagic || h.version != kWireVersion ||
        h.nranks != nranks || h.nqps != nqps)
      abort();
    if (qps.size() != static_cast<size_t>(nqps) ||
        memcmp(qps.data(), b.data() + sizeof h + static_cast<size_t>(rank) * row, row) != 0)
      abort();
    for (const QpAddr& q : qps)
      if (q.qpn == 0 || q.qpn > 0xffffff || q.psn > 0xffffff) abort();
  } else if (st.message().find("rank " + std::to_string(p)) == std::string::npos) {
    abort();
  }
  for (int q : {-1, nranks})
    if (decodeBlob(blobs, q, rank, nranks, nqps, &h, &qps).isOk()) abort();

  // What localAddress() writes: the header, then for every rank its nqps
  // QPs (zero where the publisher made none: itself, or r.reach says so).
  BlobHeader wh{};
  wh.magic = kBlobMagic;
  wh.version = kWireVersion;
  wh.hostHash = r.reach;
  wh.pid = 1;
  wh.nranks = nranks;
  wh.nqps = nqps;
  wh.mtu = 1024;
  std::vector<QpAddr> all(static_cast<size_t>(nranks) * nqps, QpAddr{0, 0});
  for (int q = 0; q < nranks; ++q)
    if (q != p && (r.reach >> q & 1))
      for (int k = 0; k < nqps; ++k)
        all[static_cast<size_t>(q) * nqps + k] = {static_cast<uint32_t>(1 + q * 16 + k),
                                                  (r.reach + static_cast<uint32_t>(k)) & 0xffffff};
  std::vector<std::string> written(static_cast<size_t>(nranks));
  weft::BlobWriter(&written[p]).put(wh).putArray(all);
  for (int q = 0; q < nranks; ++q) {
    if (q == p) continue;
    st = decodeBlob(written, p, q, nranks, nqps, &h, &qps);
    if (st.isOk() != static_cast<bool>(r.reach >> q & 1)) abort();
    if (st.isOk() &&
        (memcmp(&h, &wh, sizeof h) != 0 ||
         memcmp(qps.data(), &all[static_cast<size_t>(q) * nqps], qps.size() * sizeof(QpAddr)) != 0))
      abort();
  }
  // ... and is refused by a rank with another QP count.
  if (nranks > 1 && decodeBlob(written, p, rank, nranks, nqps % 16 + 1, &h, &qps).isOk()) abort();
}

void header(Input& in) {
  const Header h = in.get<Header>();
  const uint32_t byteLen = in.get<uint16_t>() % (kSlotBytes + 64);
  HeaderFault want = HeaderFault::kNone;
  const MsgType t = static_cast<MsgType>(h.type);
  const size_t body = byteLen >= sizeof h ? byteLen - sizeof h : 0;
  if (byteLen < sizeof h || h.magic != kHdrMagic)
    want = HeaderFault::kGarbage;
  else if (h.type < 1 || h.type > 5)
    want = HeaderFault::kType;
  else if (t == MsgType::Eager ? (h.len > kEager || body != h.len)
                               : body != (t == MsgType::Hello ? weft::kMacBytes : 0))
    want = HeaderFault::kLength;
  const HeaderFault f = checkHeader(h, byteLen);
  if (f != want) abort();
  // An eager payload the receiver copies lies in the message and the slot.
  if (f == HeaderFault::kNone && t == MsgType::Eager &&
      (sizeof h + h.len > byteLen || sizeof h + h.len > kSlotBytes))
    abort();

  // What IbPeer sends passes, with the length it sends it with.
  Header s = h;
  s.magic = kHdrMagic;
  s.type = static_cast<uint8_t>(MsgType::Eager);
  s.len = h.len % (kEager + 1);
  if (checkHeader(s, sizeof s + s.len) != HeaderFault::kNone) abort();
  if (checkHeader(s, sizeof s + s.len + 1) != HeaderFault::kLength) abort();
  for (MsgType k : {MsgType::Rts, MsgType::Cts, MsgType::Credit}) {
    s.type = static_cast<uint8_t>(k);
    s.len = h.len;
    if (checkHeader(s, sizeof s) != HeaderFault::kNone) abort();
  }
  s = helloHeader(h.len, h.rank);
  if (checkHeader(s, sizeof s + weft::kMacBytes) != HeaderFault::kNone) abort();
}

struct HelloSide {
  uint64_t secret, commId;
  int32_t from, to;
};

void hello(Input& in, uint8_t flags) {
  const Header h = in.get<Header>();
  weft::Mac mac = in.get<weft::Mac>();
  const HelloSide s = in.get<HelloSide>();
  const weft::Key key = weft::jobKey(s.secret);
  if (flags & 2) mac = helloMac(key, h.len, h.rank, s.to);
  if (helloOk(h, mac.data(), key, s.commId, s.from, s.to)) {
    if (h.type != static_cast<uint8_t>(MsgType::Hello) || h.len != s.commId || h.rank != s.from ||
        !weft::macEqual(mac.data(), helloMac(key, s.commId, s.from, s.to).data()))
      abort();
  }
  // The sender's hello passes, and not for another receiver or key.
  const Header good = helloHeader(s.commId, s.from);
  const weft::Mac m = helloMac(key, s.commId, s.from, s.to);
  if (!helloOk(good, m.data(), key, s.commId, s.from, s.to)) abort();
  if (s.to != INT32_MAX && helloOk(good, m.data(), key, s.commId, s.from, s.to + 1)) abort();
  if (helloOk(good, m.data(), weft::jobKey(s.secret + 1), s.commId, s.from, s.to)) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  const uint8_t flags = in.get<uint8_t>();
  blob(in, flags);
  header(in);
  hello(in, flags);
  return 0;
}
