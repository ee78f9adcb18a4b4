// Connection setup of the tcp transport: nsocks streams per pair of ranks,
// the lower rank connecting to the higher one, each stream opened by a Hello
// exchange (tcp_wire.h). The acceptor refuses, with a warning naming the
// remote address, anything that is not a real peer: wrong magic,
// communicator or HMAC (another job's secret), garbage, or silence for
// kHelloTimeoutS; it keeps waiting for
// the real peers meanwhile. Everything is bounded by the bootstrap timeout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "net/socket.h"
#include "transports/tcp/tcp_wire.h"
#include "transports/transport.h"

namespace weft {
namespace tcp {

constexpr double kHelloTimeoutS = 5.0;

// What one stream's Hello must say: this rank's side of the exchange.
struct HelloCheck {
  Key key;
  uint64_t commId;
  int rank;       // this rank
  int nsocks;     // streams per pair
  bool outgoing;  // the answer to this rank's hello to `peer` on stream `sock`
  int peer;
  int sock;
};

// The hello rank `rank` sends to rank `to` on stream `sock` of a pair
// (establish() writes it; tests and the fuzz target build the peer's with it).
Hello makeHello(const Key& key, uint64_t commId, int rank, int to, int sock, int nsocks);

// Why hello `h` is not acceptable, or "" when it is (pure: establish()
// calls it on every hello it reads). An answer must come from `peer` for
// `sock`; an incoming hello from one of `peers` below this rank, for a
// stream that `fds` (indexed [rank][stream], -1 where not yet open) does
// not have yet.
std::string checkHello(const Hello& h, const HelloCheck& want, const std::vector<int>& peers,
                       const std::vector<std::vector<int>>& fds);

// On success (*fds)[p][s] is stream s with peer p for every p in `peers`:
// non-blocking, TCP_NODELAY, WEFT_SOCKET_BUF_BYTES buffers. `addrs` is indexed by rank
// (the listening addresses of the peers). On failure every socket is closed.
Status establish(const TransportContext& ctx, int listenFd, const std::vector<int>& peers,
                 const std::vector<net::Address>& addrs, std::vector<std::vector<int>>* fds);

}  // namespace tcp
}  // namespace weft
