// Bootstrap: the out-of-band rendezvous that turns a unique id into a group
// of ranks that know each other, plus the few collectives that communicator
// setup needs (allgather of address blobs, barrier).
//
// The unique id holds the root's address and a random 64-bit job secret.
// The root (a thread of the process that called weft_get_unique_id, or rank 0
// under weft_comm_init_env) challenges each connection with a nonce, accepts
// one hello per rank whose HMAC proves it holds the secret, checks rank range
// and nranks, refuses anything else with a log line (port scanners, garbage,
// wrong secret, duplicate rank) and keeps serving, then sends every rank the
// table of all ranks' bootstrap addresses and a fresh session nonce, under
// its own HMAC, and exits. Ranks then form a ring of TCP connections (each
// connects to rank+1, its hello's HMAC bound to the session) over which
// allgather and barrier run. The secret itself never crosses the network
// (docs/security.md). Every wait is bounded by
// Config::bootstrapTimeoutS; a timeout names the ranks that did not arrive.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/hmac.h"
#include "core/status.h"
#include "net/socket.h"
#include "weft.h"

namespace weft {

// The most ranks one communicator may have. A hello (or a caller) claiming
// more is refused with a clear error; below it the root's tables grow with
// the ranks that join, never with a claimed count, so a misconfigured
// launcher cannot make the process holding the root allocate gigabytes.
constexpr int kMaxRanks = 1 << 22;

// The layout inside weft_unique_id_t (128 bytes).
struct UniqueIdData {
  uint32_t magic;    // kUniqueIdMagic
  uint32_t version;  // layout version, 1
  uint64_t secret;   // random job secret
  unsigned char rootAddr[32];  // net::Address::pack
  unsigned char reserved[80];
};
static_assert(sizeof(UniqueIdData) == WEFT_UNIQUE_ID_BYTES, "unique id layout");
constexpr uint32_t kUniqueIdMagic = 0x57454654;  // "WEFT"

// Creates an id and starts a root thread that serves one rendezvous of any
// size (learnt from the first valid hello) within the bootstrap timeout.
Status createUniqueId(const Config& cfg, weft_unique_id_t* id);
// Starts a root listening at `addr` (host:port) with `secret` in this
// process (weft_comm_init_env on rank 0), and fills the matching id.
Status startRootAt(const Config& cfg, const std::string& addr, uint64_t secret,
                   weft_unique_id_t* id);
// Starts a root listening on `addr` (port 0: any) with `secret`, and fills
// the matching id (weft_comm_shrink's coordinator).
Status startRootOn(const Config& cfg, const net::Address& addr, uint64_t secret,
                   weft_unique_id_t* id);
// The id of a root at `root` with `secret`.
void idOf(const net::Address& root, uint64_t secret, weft_unique_id_t* id);
// Builds the id that non-root ranks use under weft_comm_init_env.
Status idFromAddress(const std::string& addr, uint64_t secret, weft_unique_id_t* id);
// Checks magic and version; returns INVALID_ARGUMENT for anything else.
Status decodeUniqueId(const weft_unique_id_t& id, UniqueIdData* out);

class Bootstrap {
 public:
  // Rendezvous with the root of `id` as `rank` of `nranks`; then connects
  // the ring. Blocks until done or the bootstrap timeout.
  static Status create(const weft_unique_id_t& id, int rank, int nranks, const Config& cfg,
                       std::unique_ptr<Bootstrap>* out);
  ~Bootstrap();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // This communicator's key: derived from the job secret and the session
  // nonce of its rendezvous, so it differs per communicator. Transports
  // authenticate their connections with it (TransportContext::key).
  const Key& commKey() const { return commKey_; }
  // A public identifier of this communicator (it reveals nothing of the
  // secret): shared-memory names, hellos.
  uint64_t commId() const { return commId_; }

  // Every rank contributes `mine` (any length, may differ per rank); `all`
  // gets every rank's blob, indexed by rank. Bounded by `timeoutS`.
  Status allgather(const std::string& mine, std::vector<std::string>* all, double timeoutS);
  Status barrier(double timeoutS);
  // Closes the ring sockets at once (abort).
  void shutdown();

  // What weft_comm_shrink's agreement (agree.h) runs on: every rank's
  // bootstrap address, and this rank's listening socket there, kept open
  // for the comm's life (it accepts only frames under the comm key).
  const std::vector<net::Address>& addresses() const { return table_; }
  int listenFd() const { return listenFd_; }

 private:
  Bootstrap() = default;
  int rank_ = 0;
  int nranks_ = 1;
  Key commKey_{};
  uint64_t commId_ = 0;
  int nextFd_ = -1;  // connection to rank+1
  int prevFd_ = -1;  // connection from rank-1
  int listenFd_ = -1;
  std::vector<net::Address> table_;  // every rank's bootstrap address
  uint64_t round_ = 0;  // allgather rounds, stamped on every frame
};

}  // namespace weft
