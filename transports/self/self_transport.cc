// The self transport: messages from a rank to itself. Posted sends and posted
// recvs wait in two FIFOs; whenever both fronts exist they are matched (tag
// and length checked) and copied with one memcpy, inside the post call, so
// progress() has nothing to do.
#include <cstring>
#include <memory>

#include "core/log.h"
#include "transports/base/posted_ops.h"
#include "transports/base/ring_queue.h"
#include "transports/transport.h"

namespace weft {
namespace {

struct SelfOp {
  void* buf = nullptr;
  size_t len = 0;
  uint64_t tag = 0;
  Completion* c = nullptr;
};

// Shared by the transport (shutdown) and the endpoint handed out.
struct SelfQueues {
  explicit SelfQueues(int r) : rank(r), state("self", r) {}
  int rank;
  PeerState state;       // only ever shut down: a mismatch fails the two messages alone
  uint64_t matched = 0;  // messages matched so far, for error messages
  RingQueue<SelfOp> sends;
  RingQueue<SelfOp> recvs;

  Status match(const SelfOp& s, const SelfOp& r) {
    uint64_t seq = matched++;
    if (s.tag != r.tag || s.len != r.len) {
      Status st = mismatchError("self", rank, rank, "", seq, {r.tag, r.len}, {s.tag, s.len});
      WEFT_WARN(kTransport, "%s", st.message().c_str());
      s.c->finish(st);
      r.c->finish(st);
      return st;
    }
    if (s.len) memcpy(r.buf, s.buf, s.len);
    r.c->stamp = s.c->stamp;
    s.c->finish();
    r.c->finish();
    return Status::ok();
  }

  Status post(bool isSend, const void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) {
    if (state.refuses(mem)) return state.checkPost(mem);
    SelfOp op{const_cast<void*>(buf), len, tag, c};
    RingQueue<SelfOp>& mine = isSend ? sends : recvs;
    RingQueue<SelfOp>& other = isSend ? recvs : sends;
    if (other.empty()) {
      mine.push_back(op);
      return Status::inProgress();
    }
    SelfOp o = other.front();
    other.pop_front();
    return isSend ? match(op, o) : match(o, op);
  }
};

class SelfEndpoint : public Endpoint {
 public:
  explicit SelfEndpoint(std::shared_ptr<SelfQueues> q) : q_(std::move(q)) {}
  Status postSend(const void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) override {
    return q_->post(true, buf, len, tag, mem, c);
  }
  Status postRecv(void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) override {
    return q_->post(false, buf, len, tag, mem, c);
  }

 private:
  std::shared_ptr<SelfQueues> q_;
};

class SelfTransport : public Transport {
 public:
  explicit SelfTransport(const TransportContext& ctx) : rank_(ctx.rank) {}
  ~SelfTransport() override { shutdown(); }

  const char* name() const override { return "self"; }
  bool canReach(const PeerInfo& peer) const override { return peer.rank == rank_; }
  TransportCaps caps() const override {
    TransportCaps c;
    c.scope = LinkScope::Self;
    c.preferredChunk = 4 << 20;
    c.bandwidthGBs = 10.0;
    c.latencyUs = 0.1;
    return c;
  }
  Status localAddress(std::string* blob) override {
    blob->clear();
    return Status::ok();
  }
  Status connect(const std::vector<int>& peers, const std::vector<std::string>&,
                 std::vector<std::unique_ptr<Endpoint>>* eps) override {
    for (int p : peers) {
      if (p != rank_)
        return invalidArgument(strFormat("self transport: rank %d cannot reach rank %d", rank_, p));
      if (eps->size() <= static_cast<size_t>(p)) eps->resize(p + 1);
      if (!q_) q_ = std::make_shared<SelfQueues>(rank_);
      (*eps)[p] = std::make_unique<SelfEndpoint>(q_);
    }
    return Status::ok();
  }
  Status progress() override { return Status::ok(); }
  Status checkPeer(int) override { return Status::ok(); }
  void shutdown() override {
    if (!q_) return;
    q_->state.abort();
    q_->sends.clear();
    q_->recvs.clear();
  }

 private:
  int rank_;
  std::shared_ptr<SelfQueues> q_;
};

}  // namespace

std::unique_ptr<Transport> makeSelfTransport(const TransportContext& ctx) {
  return std::make_unique<SelfTransport>(ctx);
}

}  // namespace weft
