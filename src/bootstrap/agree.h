// weft_comm_shrink's agreement: the survivors of a communicator agree on
// who is still there, without any outside rendezvous, and get the id of
// their new communicator.
//
// Every rank keeps its bootstrap listening socket open for the comm's life
// (Bootstrap::listenFd), so the ranks can reach each other there even when
// every transport is broken. The protocol, per shrink (frames: agree_wire.h):
//
//  * A rank's coordinator is the lowest rank it does not count as gone.
//    Gone: excluded by the caller, or found gone during the agreement: its
//    listening socket refuses connections (its process ended), or it did
//    not answer within WEFT_SHRINK_TIMEOUT_S (hung, or unreachable).
//  * A member connects to its coordinator and proposes; the coordinator
//    answers Wait at once, which tells the member it is alive and collecting.
//    A refused connection, a closed one, or no answer within the timeout
//    makes the member count the coordinator as gone and try the next.
//  * The coordinator (the member whose coordinator is itself) collects
//    proposals until it has heard every rank it does not count as gone. It
//    probes the silent ones every half second: refused means gone at once;
//    a rank that accepts (alive) but stays silent for the timeout is given
//    up on. Then it decides: the members are the ranks it heard, plus itself;
//    it starts the new comm's root on its own bootstrap address, sends every
//    member the decision (members, root, a nonce the new comm's secret is
//    derived from under the comm key), and tells the ranks it gave up on,
//    and any that propose too late, that they were excluded.
//
// A rank that dies during the agreement is found by the closed connection
// or the probe, and left out. A member whose coordinator dies after its
// decision fails to join the new comm (its root is gone), on every member.
// The limit: a rank silent for the timeout is assumed to stay silent; one
// that wakes up in the middle of deciding may decide alone (it is told it
// was excluded, and sees it if it reads that before it decides).
#pragma once

#include <string>
#include <vector>

#include "bootstrap/agree_wire.h"
#include "core/config.h"
#include "core/hmac.h"
#include "core/status.h"
#include "net/socket.h"
#include "weft.h"

namespace weft {
namespace agree {

// What frames are checked against: this communicator and this rank.
struct Link {
  Key key{};            // the comm key (frames are MACed under it)
  uint64_t commId = 0;  // its public id
  int rank = 0, nranks = 1;
};

// One frame, bounded by `seconds`; an error for a closed connection or a
// frame that is not an authentic one of this communicator.
Status readFrame(int fd, const Link& link, double seconds, Frame* f);
Status sendFrame(int fd, const Link& link, const Frame& f);

// A connection accepted on the bootstrap socket and its first frame, read
// before the shrink that answers it (takeEarly).
struct Early {
  int fd = -1;
  Frame frame;
};

// Revoke's notice (Kind::Revoked) to every other rank's bootstrap socket,
// so that peers on any transport learn it at their next stall check
// (takeEarly): best effort, about `seconds` in all.
void announceRevoke(const Link& link, const std::vector<net::Address>& addrs, uint32_t attempt,
                    double seconds);
// A rank that timed out waiting for `stuck` tells the others (Kind::Stuck)
// before it gives up, so that ranks which then lose their connection to it
// name the stuck ranks, not it: best effort, about `seconds` in all.
void announceStuck(const Link& link, const std::vector<net::Address>& addrs,
                   const std::vector<int>& stuck, double seconds);
// What waits on the bootstrap socket while the comm runs: a peer's revoke
// notice or shrink proposal (kept in *keep, for the shrink to answer), a
// stuck notice (appended to *stuck when given), anything else closed. The
// rank of the first peer that revoked or proposes, or -1.
int takeEarly(int listenFd, const Link& link, std::vector<Early>* keep,
              std::vector<Frame>* stuck = nullptr);

struct Params {
  int rank = 0, nranks = 1;
  Key key{};            // the parent's comm key (frames are MACed under it)
  uint64_t commId = 0;  // the parent's public id
  uint32_t attempt = 0; // this rank's count of shrinks of the parent before this one
  std::vector<Early> early;  // connections takeEarly kept (the agreement owns them)
  int listenFd = -1;    // this rank's bootstrap listening socket
  std::vector<net::Address> addrs;  // every rank's bootstrap address
  std::vector<char> gone;           // by rank: excluded by the caller
  double timeoutS = 30;             // WEFT_SHRINK_TIMEOUT_S
  Config cfg;                       // the new root's (bootstrap timeout)
};

struct Outcome {
  std::vector<int> members;  // parent ranks, ascending; this rank among them
  weft_unique_id_t id;       // the new communicator's
  std::string log;           // what happened, for the INFO log
};

// Runs the agreement. WEFT_ERR_REVOKED when the others left this rank out.
Status run(const Params& p, Outcome* out);

}  // namespace agree
}  // namespace weft
