// Sockets for the bootstrap and the tcp transport: addresses, interface
// choice, and connect / accept / exact reads and writes bounded by deadlines.
// Every function returns a Status whose message names the address and errno.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/clock.h"
#include "core/status.h"

namespace weft {
namespace net {

// An IPv4 or IPv6 socket address, fixed size so it can travel in blobs and
// in the unique id (28 bytes used of 32).
struct Address {
  sockaddr_storage ss{};
  socklen_t len = 0;

  std::string toString() const;  // "10.0.0.1:4242" / "[::1]:4242"
  uint16_t port() const;
  void setPort(uint16_t p);
  // Compact encoding (family, port, ip): 32 bytes.
  static constexpr size_t kPackedSize = 32;
  void pack(void* out32) const;
  static bool unpack(const void* in32, Address* out);
  // Parses "host:port", "[v6]:port" (host may be a name resolved with getaddrinfo).
  static Status parse(const std::string& hostPort, Address* out);
};

// Picks the address to listen on: WEFT_SOCKET_IFNAME (comma list of
// interface-name prefixes, "^" excludes, "=" exact), else the first interface
// that is up and not loopback, else loopback. Sets port 0. Writes the chosen
// interface name to *ifname when non-NULL.
Status pickLocalAddress(const std::string& ifnameSpec, Address* out, std::string* ifname);

// A listening TCP socket on `addr` (port 0 = any); *bound gets the real
// address. Non-blocking, CLOEXEC.
Status listenOn(const Address& addr, int backlog, int* fd, Address* bound);
// Connects (retrying refused connections until the deadline: the peer may
// not listen yet). Returns a blocking fd with TCP_NODELAY set.
Status connectTo(const Address& addr, const Deadline& dl, int* fd);
// One connect attempt, without retries: 0 and a blocking fd with
// TCP_NODELAY, or the errno (ETIMEDOUT when the deadline came first).
// Liveness probes use it: a refused connection means nothing listens there.
int tryConnect(const Address& addr, const Deadline& dl, int* fd);
// Accepts one connection from a non-blocking listening fd, waiting until the
// deadline. Returns a blocking fd with TCP_NODELAY set.
Status acceptOne(int listenFd, const Deadline& dl, int* fd, Address* peer);

// Writes / reads exactly len bytes, waiting with poll() until the deadline.
// A peer that closes gives WEFT_ERR_REMOTE, a deadline WEFT_ERR_TIMEOUT.
Status sendAll(int fd, const void* buf, size_t len, const Deadline& dl);
Status recvAll(int fd, void* buf, size_t len, const Deadline& dl);

Status setNonBlocking(int fd, bool on);
void setNoDelay(int fd);
void setBufferSizes(int fd, int bytes);
void closeFd(int* fd);  // closes when >= 0 and sets -1

// Host identity: equal on processes that can share memory (same hostname,
// boot id and network namespace).
uint64_t hostHash();
std::string hostName();

}  // namespace net
}  // namespace weft
