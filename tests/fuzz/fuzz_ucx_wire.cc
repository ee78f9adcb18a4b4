// Fuzz target: the ucx transport's wire checks (transports/ucx/ucx_wire.h):
// the address blob (ucx::decodeBlob, from UcxTransport::connect), the
// Hello of connection setup (checkHello, from UcxTransport::hello), the
// header a receiver checks (checkHeader, from UcxPeer::checkHeader), and
// the UCP tag of a message (ucpTag).
//
// Input: a blob length, a flags byte (bit 0: give the blob this magic and
// version; bit 1: make its addrLen what is left; bit 2: re-seal the hello's
// MAC over its fuzzed fields, so that the checks behind the MAC are
// explored; bit 3: give the hello this magic and version), the blob, a
// Hello and its receiver, a MsgHeader and what the receiver posted;
// missing bytes read as zero.
//
// Checks: a blob that decodes has the ucx magic and version, a real pid,
// and exactly addrLen > 0 bytes of worker address after its header, which
// is where the returned pointer points; a refusal names the rank; the blob
// localAddress() writes decodes to it. A hello that passes has the ucx
// magic and version, this communicator, the expected sender, receiver and
// endpoint, and the HMAC of its fields under this communicator's key; the
// sender's makeHello passes, and not for another receiver or endpoint. A
// header passes iff every field is what a reference model written here
// says (fault kinds in check order), so an inline payload the receiver
// copies is exactly the posted length and inside the bounce slot; what
// postSend writes passes. A tag keeps its sender, kind and message number.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "transports/base/blob.h"
#include "transports/ucx/ucx_wire.h"

namespace {

using namespace weft::ucx;
using weft::fuzz::Input;

void blob(Input& in, uint8_t flags) {
  const size_t want = in.get<uint8_t>();
  const size_t n = std::min(want, in.size - in.pos);
  std::string b(reinterpret_cast<const char*>(in.data) + in.pos, n);
  in.pos += n;
  if (b.size() >= sizeof(BlobHeader)) {
    BlobHeader h;
    memcpy(&h, b.data(), sizeof h);
    if (flags & 1) {
      h.magic = kBlobMagic;
      h.version = kWireVersion;
    }
    if (flags & 2) h.addrLen = static_cast<uint32_t>(b.size() - sizeof h);
    memcpy(&b[0], &h, sizeof h);
  }
  const std::vector<std::string> blobs = {b};
  BlobHeader h;
  const char* addr = nullptr;
  weft::Status st = decodeBlob(blobs, 0, &h, &addr);
  if (st.isOk()) {
    if (b.size() < sizeof h || memcmp(&h, b.data(), sizeof h) != 0) abort();
    if (h.magic != kBlobMagic || h.version != kWireVersion || h.pid <= 0 || h.addrLen == 0 ||
        b.size() - sizeof h != h.addrLen || addr != blobs[0].data() + sizeof h)
      abort();
  } else if (st.message().find("rank 0") == std::string::npos) {
    abort();
  }
  for (int p : {1, -1})
    if (decodeBlob(blobs, p, &h, &addr).message().find("rank " + std::to_string(p)) ==
        std::string::npos)
      abort();
  // What localAddress() writes: a header, then the worker address.
  const std::string worker = b.empty() ? std::string("w") : b;
  const BlobHeader wh{kBlobMagic, kWireVersion, 7, 1 + (flags >> 1),
                      static_cast<uint32_t>(worker.size())};
  std::vector<std::string> written(1);
  weft::BlobWriter(&written[0]).put(wh).bytes(worker.data(), worker.size());
  if (!decodeBlob(written, 0, &h, &addr).isOk() || memcmp(&h, &wh, sizeof h) != 0 ||
      memcmp(addr, worker.data(), worker.size()) != 0)
    abort();
}

struct Receiver {
  uint64_t secret, commId;
  int32_t from, to;
  uint8_t endpoint, pad[3];
};

void hello(Input& in, uint8_t flags) {
  Hello h = in.get<Hello>();
  const Receiver r = in.get<Receiver>();
  const weft::Key key = weft::jobKey(r.secret);
  const int e = r.endpoint & 1;
  if (flags & 8) {
    h.magic = kHelloMagic;
    h.version = kWireVersion;
  }
  if (flags & 4) {
    const weft::Mac m = helloMac(key, h);
    memcpy(h.mac, m.data(), sizeof h.mac);
  }
  weft::Status st = checkHello(h, key, r.commId, r.from, r.to, e);
  if (st.isOk()) {
    if (h.magic != kHelloMagic || h.version != kWireVersion || h.commId != r.commId ||
        h.rank != r.from || h.to != r.to || h.endpoint != e ||
        !weft::macEqual(h.mac, helloMac(key, h).data()))
      abort();
  } else if (st.code() != WEFT_ERR_REMOTE ||
             st.message().find("rank " + std::to_string(r.from)) == std::string::npos) {
    abort();
  }
  // The hello the sender makes passes, and only where it was meant to go.
  const Hello good = makeHello(key, r.commId, r.from, r.to, e);
  if (!checkHello(good, key, r.commId, r.from, r.to, e).isOk()) abort();
  if (checkHello(good, key, r.commId, r.from, r.to, 1 - e).isOk()) abort();
  if (r.to != INT32_MAX && checkHello(good, key, r.commId, r.from, r.to + 1, e).isOk()) abort();
  if (checkHello(good, weft::jobKey(r.secret + 1), r.commId, r.from, r.to, e).isOk()) abort();
}

struct Posted {
  uint64_t seq, tag, len;
  uint32_t got;  // the header message's length (bit 31: unknown)
  uint32_t src;
};

void header(Input& in) {
  const MsgHeader h = in.get<MsgHeader>();
  const Posted p = in.get<Posted>();
  const uint64_t len = p.len >> (p.got & 63);  // small lengths too
  const size_t got = (p.got >> 31) ? kUnknownLength : p.got & 0x3ffff;
  HeaderFault want = HeaderFault::kNone;
  if (got != kUnknownLength && got < sizeof h)
    want = HeaderFault::kShort;
  else if (h.magic != kHdrMagic || h.seq != static_cast<uint32_t>(p.seq))
    want = HeaderFault::kGarbage;
  else if (h.tag != p.tag || h.len != len)
    want = HeaderFault::kMismatch;
  else if (got != kUnknownLength && (len <= kInline ? got != sizeof h + len : got != sizeof h))
    want = HeaderFault::kInlineLength;
  const HeaderFault f = checkHeader(h, got, p.seq, p.tag, len);
  if (f != want) abort();
  // An inline payload the receiver copies lies inside its bounce slot.
  if (f == HeaderFault::kNone && len <= kInline && got != kUnknownLength &&
      got > sizeof h + kInline)
    abort();
  // What postSend writes for this message passes, whatever UCX reports.
  const MsgHeader sent{kHdrMagic, static_cast<uint32_t>(p.seq), p.tag, len, h.stamp};
  const size_t sentLen = sizeof sent + (len <= kInline ? len : 0);
  if (checkHeader(sent, sentLen, p.seq, p.tag, len) != HeaderFault::kNone ||
      checkHeader(sent, kUnknownLength, p.seq, p.tag, len) != HeaderFault::kNone)
    abort();
  // The header of the next message, or of another length, does not.
  if (checkHeader(sent, sentLen, p.seq + 1, p.tag, len) != HeaderFault::kGarbage) abort();
  if (checkHeader(sent, sentLen, p.seq, p.tag, len + 1) != HeaderFault::kMismatch) abort();

  // The UCP tag keeps sender, kind and message number apart.
  const int src = static_cast<int>(p.src % kMaxRanks);
  for (Kind k : {Kind::Header, Kind::Data, Kind::Hello}) {
    const uint64_t t = ucpTag(src, k, p.seq);
    if ((t >> 40) != static_cast<uint64_t>(src) ||
        ((t >> kSeqBits) & 3) != static_cast<uint64_t>(k) || (t & kSeqMask) != (p.seq & kSeqMask))
      abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  const uint8_t flags = in.get<uint8_t>();
  blob(in, flags);
  hello(in, flags);
  header(in);
  return 0;
}
