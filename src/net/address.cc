// net::Address: formatting, the 32-byte packed form, and "host:port" parsing.
#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/log.h"
#include "net/socket.h"

namespace weft {
namespace net {

namespace {

// Packed layout (all multi-byte fields big-endian):
//   [0]      family tag: 4 or 6 (0 = empty)
//   [1]      reserved, 0
//   [2..3]   port
//   [4..7]   IPv6 scope id
//   [8..11]  IPv6 flow info
//   [12..27] address (IPv4 uses the first 4 bytes)
//   [28..31] reserved, 0
constexpr unsigned char kTagV4 = 4;
constexpr unsigned char kTagV6 = 6;

void putBe32(unsigned char* p, uint32_t v) {
  p[0] = static_cast<unsigned char>(v >> 24);
  p[1] = static_cast<unsigned char>(v >> 16);
  p[2] = static_cast<unsigned char>(v >> 8);
  p[3] = static_cast<unsigned char>(v);
}
uint32_t getBe32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

bool parsePort(const std::string& s, uint16_t* port) {
  if (s.empty() || s.size() > 5) return false;
  unsigned long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned long>(c - '0');
  }
  if (v > 65535) return false;
  *port = static_cast<uint16_t>(v);
  return true;
}

}  // namespace

std::string Address::toString() const {
  char host[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = {0};
  if (ss.ss_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
    return strFormat("%s:%u", host, static_cast<unsigned>(ntohs(sin->sin_port)));
  }
  if (ss.ss_family == AF_INET6) {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &sin6->sin6_addr, host, INET6_ADDRSTRLEN);
    std::string h = host;
    if (sin6->sin6_scope_id != 0) {
      char ifn[IF_NAMESIZE] = {0};
      if (if_indextoname(sin6->sin6_scope_id, ifn))
        h += std::string("%") + ifn;
      else
        h += "%" + std::to_string(sin6->sin6_scope_id);
    }
    return strFormat("[%s]:%u", h.c_str(), static_cast<unsigned>(ntohs(sin6->sin6_port)));
  }
  return "<no address>";
}

uint16_t Address::port() const {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

void Address::setPort(uint16_t p) {
  if (ss.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(p);
  if (ss.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(p);
}

void Address::pack(void* out32) const {
  auto* o = static_cast<unsigned char*>(out32);
  memset(o, 0, kPackedSize);
  uint16_t p = port();
  if (ss.ss_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(&ss);
    o[0] = kTagV4;
    memcpy(o + 12, &sin->sin_addr, 4);
  } else if (ss.ss_family == AF_INET6) {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    o[0] = kTagV6;
    putBe32(o + 4, sin6->sin6_scope_id);
    putBe32(o + 8, ntohl(sin6->sin6_flowinfo));
    memcpy(o + 12, &sin6->sin6_addr, 16);
  } else {
    return;
  }
  o[2] = static_cast<unsigned char>(p >> 8);
  o[3] = static_cast<unsigned char>(p);
}

bool Address::unpack(const void* in32, Address* out) {
  const auto* in = static_cast<const unsigned char*>(in32);
  Address a;
  uint16_t p = static_cast<uint16_t>((in[2] << 8) | in[3]);
  if (in[1] != 0) return false;
  if (in[0] == kTagV4) {
    // Bytes 4..11 (v6's scope and flow) and 16.. are zero: one encoding per
    // address, as pack() writes it.
    for (size_t i = 4; i < kPackedSize; ++i)
      if (in[i] != 0 && (i < 12 || i >= 16)) return false;
    auto* sin = reinterpret_cast<sockaddr_in*>(&a.ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(p);
    memcpy(&sin->sin_addr, in + 12, 4);
    a.len = sizeof(sockaddr_in);
  } else if (in[0] == kTagV6) {
    for (size_t i = 28; i < kPackedSize; ++i)
      if (in[i] != 0) return false;
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&a.ss);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(p);
    sin6->sin6_scope_id = getBe32(in + 4);
    sin6->sin6_flowinfo = htonl(getBe32(in + 8));
    memcpy(&sin6->sin6_addr, in + 12, 16);
    a.len = sizeof(sockaddr_in6);
  } else {
    return false;
  }
  *out = a;
  return true;
}

Status Address::parse(const std::string& hostPort, Address* out) {
  std::string host, portStr;
  if (!hostPort.empty() && hostPort[0] == '[') {
    size_t close = hostPort.find(']');
    if (close == std::string::npos || close + 1 >= hostPort.size() || hostPort[close + 1] != ':')
      return invalidArgument("bad address \"" + hostPort + "\": expected [v6-address]:port");
    host = hostPort.substr(1, close - 1);
    portStr = hostPort.substr(close + 2);
  } else {
    size_t colon = hostPort.rfind(':');
    if (colon == std::string::npos)
      return invalidArgument("bad address \"" + hostPort + "\": expected host:port");
    if (hostPort.find(':') != colon)
      return invalidArgument("bad address \"" + hostPort +
                             "\": write IPv6 addresses as [address]:port");
    host = hostPort.substr(0, colon);
    portStr = hostPort.substr(colon + 1);
  }
  uint16_t port = 0;
  if (!parsePort(portStr, &port))
    return invalidArgument("bad address \"" + hostPort + "\": port \"" + portStr +
                           "\" is not a number in [0, 65535]");
  if (host.empty()) return invalidArgument("bad address \"" + hostPort + "\": empty host");

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), portStr.c_str(), &hints, &res);
  if (rc != 0) {
    std::string why = rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc);
    WEFT_INFO(kBootstrap, "cannot resolve \"%s\": %s", host.c_str(), why.c_str());
    return invalidArgument("bad address \"" + hostPort + "\": cannot resolve \"" + host +
                           "\": " + why);
  }
  // Prefer IPv4 when a name resolves to both.
  const addrinfo* pick = nullptr;
  for (const addrinfo* ai = res; ai; ai = ai->ai_next)
    if (ai->ai_family == AF_INET) {
      pick = ai;
      break;
    }
  if (!pick)
    for (const addrinfo* ai = res; ai; ai = ai->ai_next)
      if (ai->ai_family == AF_INET6) {
        pick = ai;
        break;
      }
  if (!pick || pick->ai_addrlen > sizeof(sockaddr_storage)) {
    freeaddrinfo(res);
    return invalidArgument("bad address \"" + hostPort + "\": \"" + host +
                           "\" has no IPv4 or IPv6 address");
  }
  Address a;
  memcpy(&a.ss, pick->ai_addr, pick->ai_addrlen);
  a.len = static_cast<socklen_t>(pick->ai_addrlen);
  a.setPort(port);
  freeaddrinfo(res);
  *out = a;
  return Status::ok();
}

}  // namespace net
}  // namespace weft
