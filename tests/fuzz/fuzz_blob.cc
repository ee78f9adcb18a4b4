// Fuzz target: address blobs (transports/base/blob.h), what each transport
// publishes for its peers and decodes in connect(), and the tcp transport's
// decoding of its own (tcp::decodeBlob, transports/tcp/tcp_wire.h).
//
// Input: byte 0 is a count k of reads, the next k bytes say which reads
// (get of 1, 4, 8 or 40 bytes, getArray of a small or a huge count, take,
// skip), and what follows is the blob.
//
// Checks: BlobReader does exactly what a model of its offset says: a read
// succeeds iff that many bytes are left, returns the bytes at the offset
// and moves it, never reads past the blob (ASan) and never overflows a
// count times a size; a reader of a rank that has no blob reads nothing;
// BlobWriter to BlobReader round trips a header and an array; and
// tcp::decodeBlob accepts only one whole blob of the right magic and
// version, whose address is canonical and decodes back from the blob
// written for it.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "transports/base/blob.h"
#include "transports/tcp/tcp_wire.h"

namespace {

struct Header {
  uint32_t magic;
  uint16_t kind;
  uint16_t count;
  uint64_t word;
};

template <class T>
void getOne(weft::BlobReader& in, const std::string& blob, size_t* off) {
  T v;
  memset(&v, 0x5a, sizeof v);
  const bool fits = blob.size() - *off >= sizeof v;
  if (in.get(&v) != fits) abort();
  if (fits) {
    if (memcmp(&v, blob.data() + *off, sizeof v) != 0) abort();
    *off += sizeof v;
  }
}

void oneRead(weft::BlobReader& in, const std::string& blob, uint8_t op, size_t* off) {
  const size_t left = blob.size() - *off;
  const size_t n = op >> 3;  // 0..31
  switch (op & 7) {
    case 0:
      return getOne<uint8_t>(in, blob, off);
    case 1:
      return getOne<uint32_t>(in, blob, off);
    case 2:
      return getOne<uint64_t>(in, blob, off);
    case 3:
      return getOne<weft::tcp::Blob>(in, blob, off);
    case 4: {
      uint32_t v[32];
      const bool fits = n * sizeof(uint32_t) <= left;
      if (in.getArray(v, n) != fits) abort();
      if (fits) {
        if (n && memcmp(v, blob.data() + *off, n * sizeof(uint32_t)) != 0) abort();
        *off += n * sizeof(uint32_t);
      }
      return;
    }
    case 5: {  // a count whose byte size wraps: must fail without writing
      uint64_t v = 0;
      const size_t huge = SIZE_MAX / sizeof(uint64_t) + 1 + n;
      if (in.getArray(&v, huge)) abort();
      return;
    }
    case 6: {
      const char* p = in.take(n);
      if ((p != nullptr) != (n <= left)) abort();
      if (p) {
        if (p != blob.data() + *off) abort();
        *off += n;
      }
      return;
    }
    default: {
      const size_t m = n == 31 ? SIZE_MAX : n;
      if (in.skip(m) != (m <= left)) abort();
      if (m <= left) *off += m;
      return;
    }
  }
}

void checkTcp(const std::vector<std::string>& blobs, int rank) {
  weft::net::Address a;
  weft::Status st = weft::tcp::decodeBlob(blobs, rank, &a);
  if (!st.isOk()) {
    if (st.message().find("tcp transport: bad address blob") == std::string::npos) abort();
    return;
  }
  const std::string& blob = blobs[rank];
  weft::tcp::Blob b;
  if (blob.size() != sizeof b) abort();
  memcpy(&b, blob.data(), sizeof b);
  if (b.magic != weft::tcp::kBlobMagic || b.version != weft::tcp::kWireVersion) abort();
  // What localAddress() would publish for this address decodes back to it.
  weft::tcp::Blob again{};
  again.magic = weft::tcp::kBlobMagic;
  again.version = weft::tcp::kWireVersion;
  a.pack(again.addr);
  if (memcmp(&again, &b, sizeof b) != 0) abort();  // the address is not canonical
  std::vector<std::string> written(1);
  weft::BlobWriter(&written[0]).put(again);
  weft::net::Address c;
  if (!weft::tcp::decodeBlob(written, 0, &c).isOk() || c.len != a.len ||
      memcmp(&c.ss, &a.ss, a.len) != 0)
    abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t k = data[0] % 16;
  const size_t ops = 1 + k <= size ? k : size - 1;
  const std::vector<std::string> blobs = {
      "", std::string(reinterpret_cast<const char*>(data) + 1 + ops, size - 1 - ops)};
  const std::string& blob = blobs[1];

  {
    weft::BlobReader in("fuzz", blobs, 1);
    size_t off = 0;
    for (size_t i = 0; i < ops; ++i) {
      oneRead(in, blob, data[1 + i], &off);
      if (in.left() != blob.size() - off || in.atEnd() != (off == blob.size())) abort();
    }
  }
  // A rank with no blob (outside the vector, or negative) reads nothing.
  for (int rank : {-1, 2}) {
    weft::BlobReader in("fuzz", blobs, rank);
    uint8_t v;
    if (in.get(&v) || in.take(0) || in.left() != 0 || in.atEnd()) abort();
    if (in.bad().message().find("rank " + std::to_string(rank)) == std::string::npos) abort();
  }

  // Writer to reader: a header from the blob's first bytes, then the rest
  // as 32-bit words.
  Header h{};
  memcpy(&h, blob.data(), blob.size() < sizeof h ? blob.size() : sizeof h);
  std::vector<uint32_t> words((blob.size() > sizeof h ? blob.size() - sizeof h : 0) / 4);
  if (!words.empty()) memcpy(words.data(), blob.data() + sizeof h, words.size() * 4);
  std::vector<std::string> written(1);
  weft::BlobWriter(&written[0]).put(h).putArray(words);
  {
    weft::BlobReader in("fuzz", written, 0);
    Header h2;
    std::vector<uint32_t> w2(words.size());
    if (!in.get(&h2) || memcmp(&h, &h2, sizeof h) != 0) abort();
    if (!in.getArray(w2.data(), w2.size()) || w2 != words || !in.atEnd()) abort();
  }

  checkTcp(blobs, 1);
  checkTcp(blobs, 0);
  return 0;
}
