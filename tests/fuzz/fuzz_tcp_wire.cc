// Fuzz target: the tcp transport's wire checks (transports/tcp/): the
// Hello check of connection setup (tcp::checkHello, tcp_connect.h), the
// part-header check of the data path (tcp::checkPartHeader, tcp_peer.h),
// and the split of a message into parts (numParts, partRange, firstStream,
// tcp_wire.h).
//
// Input: a Hello, the receiving side of it (secret, communicator, ranks,
// streams, which peers and streams it has, whether to re-seal the hello's
// MAC over its fuzzed fields, so that the checks behind the MAC are
// explored too), a PartHeader, what the receiver expects of it, and a
// message length; missing bytes read as zero.
//
// Checks: a hello that passes says this rank's magic, version,
// communicator and stream count, carries the MAC of its fields under this
// communicator's key, is meant for this rank, has a stream index in range, and comes from
// the peer and for the stream expected (answer) or from a lower rank among
// the peers on a stream not yet open (incoming: establish() then indexes
// fds[rank][stream] with it); the hello the other side builds passes; any
// refusal says why. A part header passes iff every field is what the
// receiver expects, and the kind of fault is the first one in wire order.
// The split covers [0, len) with numParts contiguous parts, each at least
// kMinPartBytes when there are several, on distinct streams; and every part
// header postSend writes passes the check of the part postRecv expects on
// that stream.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "transports/tcp/tcp_connect.h"
#include "transports/tcp/tcp_peer.h"
#include "transports/tcp/tcp_wire.h"

namespace {

using namespace weft::tcp;

using weft::fuzz::Input;

struct Side {  // the receiving side of a hello
  uint64_t secret;
  uint64_t commId;
  uint8_t rank, nsocks, flags, peer, sock, peerMask, openMask, pad;
};

void hello(Input& in) {
  Hello h = in.get<Hello>();
  const Side s = in.get<Side>();
  HelloCheck want;
  want.key = weft::jobKey(s.secret);
  if (s.flags & 2) {
    const weft::Mac m = helloMac(want.key, h);
    memcpy(h.mac, m.data(), sizeof h.mac);
  }
  want.commId = s.commId;
  want.rank = s.rank % 8;
  want.nsocks = 1 + s.nsocks % 16;
  want.outgoing = s.flags & 1;
  want.peer = s.peer % 8;
  want.sock = s.sock % want.nsocks;
  std::vector<int> peers;
  std::vector<std::vector<int>> fds(8, std::vector<int>(want.nsocks, -1));
  for (int r = 0; r < 8; ++r) {
    if (r != want.rank && (s.peerMask >> r & 1)) peers.push_back(r);
    for (int k = 0; k < want.nsocks; ++k)
      if (s.openMask >> ((r + k) % 8) & 1) fds[r][k] = 3;
  }
  const std::string why = checkHello(h, want, peers, fds);
  if (why.empty()) {
    if (h.magic != kHelloMagic || h.version != kWireVersion || h.commId != want.commId ||
        h.to != want.rank || h.nsocks != want.nsocks || h.sockIndex < 0 ||
        h.sockIndex >= want.nsocks || !weft::macEqual(h.mac, helloMac(want.key, h).data()))
      abort();
    if (want.outgoing) {
      if (h.rank != want.peer || h.sockIndex != want.sock) abort();
    } else {
      if (h.rank < 0 || h.rank >= want.rank) abort();
      if (std::find(peers.begin(), peers.end(), h.rank) == peers.end()) abort();
      if (fds[h.rank][h.sockIndex] >= 0) abort();  // a second socket for an open stream
    }
  }
  // What the other side's makeHello writes passes.
  if (want.outgoing) {
    const Hello good =
        makeHello(want.key, want.commId, want.peer, want.rank, want.sock, want.nsocks);
    if (!checkHello(good, want, peers, fds).empty()) abort();
    return;
  }
  for (int r : peers)
    for (int k = 0; k < want.nsocks && r < want.rank; ++k) {
      const Hello good = makeHello(want.key, want.commId, r, want.rank, k, want.nsocks);
      if (checkHello(good, want, peers, fds).empty() != (fds[r][k] < 0)) abort();
    }
}

void header(Input& in) {
  const PartHeader h = in.get<PartHeader>();
  const uint64_t tag = in.get<uint64_t>(), msgLen = in.get<uint64_t>(), op = in.get<uint64_t>(),
                 partLen = in.get<uint64_t>();
  HeaderFault want = HeaderFault::kNone;
  if (h.magic != kDataMagic)
    want = HeaderFault::kMagic;
  else if (h.tag != tag || h.msgLen != msgLen)
    want = HeaderFault::kMismatch;
  else if (h.seq != static_cast<uint32_t>(op) || h.partLen != partLen)
    want = HeaderFault::kOutOfStep;
  if (checkPartHeader(h, tag, msgLen, op, partLen) != want) abort();
}

void split(Input& in) {
  const size_t len = in.get<uint64_t>();
  const uint64_t seq = in.get<uint64_t>(), tag = in.get<uint64_t>();
  const int nsocks = 1 + in.get<uint8_t>() % 16;  // WEFT_NSOCKS_PER_PEER: 1..16
  const int n = numParts(len, nsocks);
  const size_t whole = len / kMinPartBytes;
  if (n != static_cast<int>(std::min<size_t>(std::max<size_t>(whole, 1), nsocks))) abort();
  const int first = firstStream(len, seq, nsocks);
  if (first < 0 || first >= nsocks) abort();
  unsigned __int128 next = 0;
  std::vector<bool> used(nsocks, false);
  size_t minLen = SIZE_MAX, maxLen = 0;
  for (int j = 0; j < n; ++j) {
    size_t off = 1, plen = 1;
    partRange(len, n, j, &off, &plen);
    if (off != next) abort();  // a gap or an overlap
    next += plen;
    if (n > 1 && plen < kMinPartBytes) abort();
    minLen = std::min(minLen, plen);
    maxLen = std::max(maxLen, plen);
    const int sock = (first + j) % nsocks;
    if (used[sock]) abort();  // two parts of one message on one stream
    used[sock] = true;
    // Sender (postSend) and receiver (postRecv) agree on this part.
    const PartHeader sent{kDataMagic, static_cast<uint32_t>(seq), tag, len, plen, 0};
    if (checkPartHeader(sent, tag, len, seq, plen) != HeaderFault::kNone) abort();
  }
  if (next != len || maxLen - minLen > 1) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  hello(in);
  header(in);
  split(in);
  return 0;
}
