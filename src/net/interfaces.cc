// pickLocalAddress: the interface to listen on, from WEFT_SOCKET_IFNAME.
//
// Syntax (as NCCL_SOCKET_IFNAME): a comma list of interface-name prefixes;
// a leading "^" turns the list into exclusions, a leading "=" (after any "^")
// makes the names exact. Examples: "eth", "eth0,ib", "^docker,lo", "=eth0".
// Loopback is used only when the list names it explicitly (an inclusion list
// that matches it) or when no other interface qualifies.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/log.h"
#include "net/socket.h"

namespace weft {
namespace net {

namespace {

struct IfSpec {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;
};

IfSpec parseSpec(const std::string& spec) {
  IfSpec s;
  size_t pos = 0;
  if (pos < spec.size() && spec[pos] == '^') {
    s.exclude = true;
    ++pos;
  }
  if (pos < spec.size() && spec[pos] == '=') {
    s.exact = true;
    ++pos;
  }
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string tok =
        spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    // Trim blanks so "eth0, ib0" works.
    size_t b = tok.find_first_not_of(" \t");
    size_t e = tok.find_last_not_of(" \t");
    if (b != std::string::npos) s.names.push_back(tok.substr(b, e - b + 1));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return s;
}

bool nameListed(const IfSpec& s, const char* name) {
  for (const auto& n : s.names) {
    if (s.exact ? n == name : strncmp(name, n.c_str(), n.size()) == 0) return true;
  }
  return false;
}

struct Candidate {
  std::string ifname;
  Address addr;
  bool loopback;
};

bool usableFamily(const sockaddr* sa) {
  if (!sa) return false;
  if (sa->sa_family == AF_INET) return true;
  if (sa->sa_family == AF_INET6) {
    // Link-local addresses need a scope id that means nothing on other hosts.
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(sa);
    return !IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr);
  }
  return false;
}

// First IPv4 candidate, else first IPv6, among those accepted by `want`.
template <typename Pred>
const Candidate* firstOf(const std::vector<Candidate>& cs, Pred want) {
  for (const auto& c : cs)
    if (c.addr.ss.ss_family == AF_INET && want(c)) return &c;
  for (const auto& c : cs)
    if (c.addr.ss.ss_family == AF_INET6 && want(c)) return &c;
  return nullptr;
}

}  // namespace

Status pickLocalAddress(const std::string& ifnameSpec, Address* out, std::string* ifname) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    int err = errno;
    WEFT_WARN(kBootstrap, "getifaddrs failed: %s", strerror(err));
    return systemError("getifaddrs", err);
  }
  std::vector<Candidate> all;
  std::vector<std::string> upNames;  // for the error message
  for (ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!(ifa->ifa_flags & IFF_UP) || !usableFamily(ifa->ifa_addr)) continue;
    Candidate c;
    c.ifname = ifa->ifa_name;
    c.loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    size_t len = ifa->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    memcpy(&c.addr.ss, ifa->ifa_addr, len);
    c.addr.len = static_cast<socklen_t>(len);
    c.addr.setPort(0);
    bool seen = false;
    for (const auto& n : upNames) seen = seen || n == c.ifname;
    if (!seen) upNames.push_back(c.ifname);
    all.push_back(std::move(c));
  }
  freeifaddrs(list);
  std::string upList;
  for (const auto& n : upNames) upList += (upList.empty() ? "" : ", ") + n;

  const Candidate* pick = nullptr;
  IfSpec spec = parseSpec(ifnameSpec);
  bool haveSpec = !spec.names.empty();
  if (!haveSpec) {
    pick = firstOf(all, [](const Candidate& c) { return !c.loopback; });
    if (!pick) pick = firstOf(all, [](const Candidate&) { return true; });
  } else if (spec.exclude) {
    auto allowed = [&](const Candidate& c) { return !nameListed(spec, c.ifname.c_str()); };
    pick = firstOf(all, [&](const Candidate& c) { return allowed(c) && !c.loopback; });
    if (!pick) pick = firstOf(all, allowed);
  } else {
    // An inclusion list asks for these interfaces, loopback included.
    pick = firstOf(all, [&](const Candidate& c) { return nameListed(spec, c.ifname.c_str()); });
  }
  if (!pick) {
    std::string msg =
        haveSpec ? strFormat("WEFT_SOCKET_IFNAME=%s matches no interface that is up with an "
                             "IPv4/IPv6 address (up: %s)",
                             ifnameSpec.c_str(), upList.empty() ? "none" : upList.c_str())
                 : std::string("no network interface is up with an IPv4/IPv6 address");
    WEFT_WARN(kBootstrap, "%s", msg.c_str());
    return Status(WEFT_ERR_SYSTEM, msg);
  }
  *out = pick->addr;
  if (ifname) *ifname = pick->ifname;
  WEFT_TRACE(kBootstrap, "picked interface %s address %s (WEFT_SOCKET_IFNAME=%s)",
             pick->ifname.c_str(), pick->addr.toString().c_str(), ifnameSpec.c_str());
  return Status::ok();
}

}  // namespace net
}  // namespace weft
