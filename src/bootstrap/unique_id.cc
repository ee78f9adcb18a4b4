// Unique ids: creating one (with its root thread), building one from an
// address, and decoding one.
#include <cerrno>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "core/hmac.h"
#include "core/log.h"
#include "net/socket.h"

namespace weft {

namespace {

constexpr uint32_t kUniqueIdVersion = 1;
constexpr int kRootBacklog = 4096;

Status randomSecret(uint64_t* out) {
  Status st = randomBytes(out, sizeof *out);
  if (!st.isOk()) WEFT_WARN(kBootstrap, "getrandom failed: %s", st.message().c_str());
  return st.withContext("the job secret");
}

void fillId(const net::Address& root, uint64_t secret, weft_unique_id_t* id) {
  UniqueIdData d;
  memset(&d, 0, sizeof d);
  d.magic = kUniqueIdMagic;
  d.version = kUniqueIdVersion;
  d.secret = secret;
  root.pack(d.rootAddr);
  memset(id, 0, sizeof *id);
  memcpy(id->internal, &d, sizeof d);
}

// Listens on `addr` and starts the root thread there; *bound gets the
// address actually bound (the real port when `addr` has port 0).
Status listenAndServe(const Config& cfg, const net::Address& addr, uint64_t secret,
                      net::Address* bound) {
  int fd = -1;
  WEFT_RETURN_IF_ERROR(net::listenOn(addr, kRootBacklog, &fd, bound));
  return boot::startRoot(fd, *bound, secret, cfg.bootstrapTimeoutS);
}

}  // namespace

Status startRootOn(const Config& cfg, const net::Address& addr, uint64_t secret,
                   weft_unique_id_t* id) {
  net::Address bound;
  WEFT_RETURN_IF_ERROR(listenAndServe(cfg, addr, secret, &bound));
  fillId(bound, secret, id);
  return Status::ok();
}

void idOf(const net::Address& root, uint64_t secret, weft_unique_id_t* id) {
  fillId(root, secret, id);
}

Status createUniqueId(const Config& cfg, weft_unique_id_t* id) {
  if (!id) return invalidArgument("weft_get_unique_id: id is NULL");
  uint64_t secret = 0;
  WEFT_RETURN_IF_ERROR(randomSecret(&secret));
  net::Address addr;
  std::string ifname;
  WEFT_RETURN_IF_ERROR(net::pickLocalAddress(cfg.socketIfname, &addr, &ifname));
  net::Address bound;
  WEFT_RETURN_IF_ERROR(listenAndServe(cfg, addr, secret, &bound));
  fillId(bound, secret, id);
  WEFT_INFO(kBootstrap, "unique id: root at %s (interface %s)", bound.toString().c_str(),
            ifname.c_str());
  return Status::ok();
}

Status startRootAt(const Config& cfg, const std::string& addr, uint64_t secret,
                   weft_unique_id_t* id) {
  if (!id) return invalidArgument("startRootAt: id is NULL");
  net::Address a;
  WEFT_RETURN_IF_ERROR(net::Address::parse(addr, &a));
  net::Address bound;
  WEFT_RETURN_IF_ERROR(listenAndServe(cfg, a, secret, &bound));
  // Keep the host as given (a wildcard listen address stays reachable as
  // itself on this host), with the real port.
  a.setPort(bound.port());
  fillId(a, secret, id);
  return Status::ok();
}

Status idFromAddress(const std::string& addr, uint64_t secret, weft_unique_id_t* id) {
  if (!id) return invalidArgument("idFromAddress: id is NULL");
  net::Address a;
  WEFT_RETURN_IF_ERROR(net::Address::parse(addr, &a));
  fillId(a, secret, id);
  return Status::ok();
}

Status decodeUniqueId(const weft_unique_id_t& id, UniqueIdData* out) {
  UniqueIdData d;
  memcpy(&d, id.internal, sizeof d);
  std::string why;
  net::Address root;
  if (d.magic != kUniqueIdMagic)
    why = strFormat("bad magic 0x%08x", d.magic);
  else if (d.version != kUniqueIdVersion)
    why = strFormat("version %u, expected %u", d.version, kUniqueIdVersion);
  else if (!net::Address::unpack(d.rootAddr, &root))
    why = "bad root address";
  if (!why.empty()) {
    WEFT_WARN(kBootstrap, "not a weft unique id (%s)", why.c_str());
    return invalidArgument("not a weft unique id (" + why + ")");
  }
  if (out) *out = d;
  return Status::ok();
}

}  // namespace weft
