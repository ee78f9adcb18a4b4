// The device path's placement in the engine (exec/placement.h), on the CPU:
// the pure table (which endpoint set, MemType and local-work backend each
// kind of op gets), the routes of real schedules step by step, and two
// engines running real ring allreduces against each other with a host
// endpoint set and a second ("device") set, checking which set and MemType
// every transfer was posted with. The second set stands in for cuda_ipc,
// which cannot run without a GPU: it is an in-memory FIFO per direction
// that matches posts in order and checks tags, as the transports do.
#include "exec/placement.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "algo/schedule.h"
#include "core/config.h"
#include "exec/engine.h"
#include "exec/local_work.h"

using namespace weft;

namespace {

// checkRoutes' cuda_ipc endpoints: a stand-in where `reached[peer]` is set.
std::vector<Endpoint*> deviceEps(const std::vector<bool>& reached) {
  struct Unused : Endpoint {
    Status postSend(const void*, size_t, uint64_t, MemType, Completion*) override {
      return Status(WEFT_ERR_INTERNAL, "unused");
    }
    Status postRecv(void*, size_t, uint64_t, MemType, Completion*) override {
      return Status(WEFT_ERR_INTERNAL, "unused");
    }
  };
  static Unused ep;
  std::vector<Endpoint*> eps;
  for (bool r : reached) eps.push_back(r ? &ep : nullptr);
  return eps;
}

}  // namespace

TEST_CASE("placement: endpoint set, MemType and backend per kind of op", "[placement]") {
  struct Case {
    const char* name;
    bool stream, direct, devEps, local, streamLocal, devLocal;
    int nranks;
    bool ok, wantDevEps;
    MemType mem;
    LocalRun run;
  };
  const MemType H = MemType::Host, C = MemType::Cuda;
  const Case cases[] = {
      {"host op", false, false, false, false, false, false, 4, true, false, H, LocalRun::Host},
      {"host op, comm with cuda_ipc: host endpoints", false, false, true, false, false, true, 4,
       true, false, H, LocalRun::Host},
      {"host op, test backend", false, false, true, true, true, true, 4, true, false, H,
       LocalRun::Local},
      {"staged stream op, no cuda_ipc", true, false, false, false, false, false, 4, true, false, H,
       LocalRun::Host},
      {"staged stream op, WEFT_CUDA_LOCAL_WORK=gpu", true, false, false, false, true, false, 4,
       true, false, H, LocalRun::StreamLocal},
      {"staged stream op, comm with cuda_ipc: cuda_ipc on staging", true, false, true, false, false,
       true, 4, true, true, C, LocalRun::Host},
      {"direct op", true, true, true, false, false, true, 4, true, true, C, LocalRun::DeviceLocal},
      {"direct op, gpu local work set too: still the direct backend", true, true, true, true, true,
       true, 2, true, true, C, LocalRun::DeviceLocal},
      {"direct op, one rank: no endpoints", true, true, false, false, false, true, 1, true, false,
       C, LocalRun::DeviceLocal},
      {"direct op without a GPU backend", true, true, true, false, false, false, 4, false, false, H,
       LocalRun::Host},
      {"direct op without cuda_ipc", true, true, false, false, false, true, 4, false, false, H,
       LocalRun::Host},
      {"direct op that is not stream-ordered", false, true, true, false, false, true, 4, false,
       false, H, LocalRun::Host},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    PlacementFacts f;
    f.streamOp = c.stream;
    f.directOp = c.direct;
    f.deviceEndpoints = c.devEps;
    f.haveLocal = c.local;
    f.haveStreamLocal = c.streamLocal;
    f.haveDeviceLocal = c.devLocal;
    OpPlacement p;
    Status st = placeOp(f, c.nranks, &p);
    REQUIRE(st.isOk() == c.ok);
    if (!c.ok) {
      CHECK(st.code() == WEFT_ERR_INTERNAL);
      continue;
    }
    CHECK(p.deviceEndpoints == c.wantDevEps);
    CHECK(p.mem == c.mem);
    CHECK(p.local == c.run);
  }
}

TEST_CASE("placement: every transfer of real schedules routed, none to oneself on cuda_ipc",
          "[placement]") {
  OpPlacement dev;
  dev.deviceEndpoints = true;
  dev.mem = MemType::Cuda;
  dev.local = LocalRun::DeviceLocal;
  OpPlacement host;
  const CollType types[] = {CollType::AllReduce, CollType::Broadcast,     CollType::Reduce,
                            CollType::AllGather, CollType::ReduceScatter, CollType::AllToAll};
  for (int n : {2, 3, 4, 8}) {
    for (CollType t : types) {
      for (int r = 0; r < n; ++r) {
        CollArgs a;
        a.type = t;
        a.count = 1000;
        a.root = n - 1;
        BuildParams bp;
        bp.rank = r;
        bp.nranks = n;
        bp.chunkBytes = 1024;
        Schedule s;
        REQUIRE(buildSchedule(a, bp, &s).isOk());
        size_t xfers = 0;
        for (const Step& st : s.steps) {
          const bool xfer = st.kind == StepKind::Send || st.kind == StepKind::Recv ||
                            st.kind == StepKind::RecvReduce;
          const StepRoute d = routeStep(dev, st, r), h = routeStep(host, st, r);
          CHECK_FALSE(h.device);
          CHECK(h.mem == MemType::Host);
          if (!xfer) {
            CHECK_FALSE(d.device);
            continue;
          }
          ++xfers;
          CHECK(st.peer != r);  // collectives never send to themselves
          CHECK(d.device);
          CHECK(d.mem == MemType::Cuda);
        }
        CHECK(xfers > 0);
        CHECK(checkRoutes(dev, s, r, deviceEps(std::vector<bool>(n, true))).isOk());
        // A peer without a cuda_ipc endpoint is named, not dereferenced.
        std::vector<bool> missing(n, true);
        missing[(r + 1) % n] = false;
        bool usesNext = false;
        for (const Step& st : s.steps) usesNext |= st.peer == (r + 1) % n;
        const Status cs = checkRoutes(dev, s, r, deviceEps(missing));
        CHECK(cs.isOk() == !usesNext);
        if (usesNext)
          CHECK(cs.message().find(strFormat("to rank %d", (r + 1) % n)) != std::string::npos);
      }
    }
  }
  // Send / recv to oneself: the host self endpoint when staged; refused when direct.
  CollArgs a;
  a.type = CollType::Send;
  a.count = 10;
  a.peer = 1;
  BuildParams bp;
  bp.rank = 1;
  bp.nranks = 2;
  Schedule s;
  REQUIRE(buildSchedule(a, bp, &s).isOk());
  OpPlacement staged = dev;
  staged.local = LocalRun::Host;
  for (const Step& st : s.steps) CHECK_FALSE(routeStep(staged, st, 1).device);
  CHECK(checkRoutes(staged, s, 1, deviceEps({true, false})).isOk());
  CHECK(checkRoutes(dev, s, 1, deviceEps({true, true})).message().find("itself") !=
        std::string::npos);
}

namespace {

// One direction of an in-memory link: posts matched in order, tags and
// lengths checked, each post's MemType recorded.
struct Wire {
  struct Post {
    uint8_t* buf;
    size_t len;
    uint64_t tag;
    Completion* c;
  };
  std::deque<Post> sends, recvs;
  Status match() {
    while (!sends.empty() && !recvs.empty()) {
      Post s = sends.front(), r = recvs.front();
      sends.pop_front();
      recvs.pop_front();
      if (s.tag != r.tag || s.len != r.len) {
        Status st(WEFT_ERR_INTERNAL, "test wire: mismatched messages");
        s.c->finish(st);
        r.c->finish(st);
        return st;
      }
      if (s.len) memcpy(r.buf, s.buf, s.len);
      s.c->finish();
      r.c->finish();
    }
    return Status();
  }
};

class WireEndpoint : public Endpoint {
 public:
  WireEndpoint(Wire* out, Wire* in, std::vector<MemType>* seen) : out_(out), in_(in), seen_(seen) {}
  Status postSend(const void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) override {
    seen_->push_back(mem);
    out_->sends.push_back({static_cast<uint8_t*>(const_cast<void*>(buf)), len, tag, c});
    WEFT_RETURN_IF_ERROR(out_->match());
    return c->done ? Status::ok() : Status::inProgress();
  }
  Status postRecv(void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) override {
    seen_->push_back(mem);
    in_->recvs.push_back({static_cast<uint8_t*>(buf), len, tag, c});
    WEFT_RETURN_IF_ERROR(in_->match());
    return c->done ? Status::ok() : Status::inProgress();
  }

 private:
  Wire* out_;
  Wire* in_;
  std::vector<MemType>* seen_;
};

// Two engines (ranks 0 and 1) with a host link and a "device" link.
struct Pair {
  Wire hostW[2], devW[2];  // [from]
  std::vector<MemType> hostSeen[2], devSeen[2];
  std::unique_ptr<WireEndpoint> hostEp[2], devEp[2];
  std::unique_ptr<Engine> eng[2];
  LocalWork* devLocal[2] = {nullptr, nullptr};

  explicit Pair(bool withDevice, bool withBackend = true) {
    Config cfg;
    cfg.timeoutS = 30;
    std::vector<PeerInfo> peers(2);
    for (int r = 0; r < 2; ++r) {
      peers[r].rank = r;
      peers[r].hostHash = 7;
      peers[r].hostname = "test";
    }
    for (int r = 0; r < 2; ++r) {
      const int o = 1 - r;
      hostEp[r].reset(new WireEndpoint(&hostW[r], &hostW[o], &hostSeen[r]));
      devEp[r].reset(new WireEndpoint(&devW[r], &devW[o], &devSeen[r]));
      std::vector<Endpoint*> eps(2, nullptr);
      eps[o] = hostEp[r].get();
      eng[r].reset(new Engine(r, 2, cfg, eps, {nullptr, nullptr}, {}, peers));
      if (withDevice) {
        std::vector<Endpoint*> dev(2, nullptr);
        dev[o] = devEp[r].get();
        std::unique_ptr<LocalWork> lw;
        if (withBackend) lw = makeAsyncHostLocalWork(0);
        devLocal[r] = lw.get();
        eng[r]->setDeviceTransport(nullptr, dev, std::move(lw));
      }
    }
  }

  // A ring allreduce of `count` floats on both ranks, as `kind` ops:
  // 0 host, 1 staged stream op, 2 direct. Returns each rank's status.
  std::vector<Status> allreduce(size_t count, int kind, std::vector<float>* out0) {
    std::vector<float> send[2], recv[2];
    std::shared_ptr<OpTracker> tr[2];
    for (int r = 0; r < 2; ++r) {
      send[r].assign(count, 1.0f + r);
      recv[r].assign(count, 0.0f);
      tr[r] = std::make_shared<OpTracker>();
      if (kind >= 1)
        tr[r]->gate = [](bool* open) {
          *open = true;
          return Status();
        };
      tr[r]->direct = kind == 2;
      std::unique_ptr<Op> op(new Op());
      op->args.type = CollType::AllReduce;
      op->args.count = count;
      op->args.eltSize = 4;
      op->dtype = WEFT_FLOAT32;
      BuildParams bp;
      bp.rank = r;
      bp.nranks = 2;
      bp.chunkBytes = 256;  // many chunks: scratch, receive-reduces
      bp.algo = Algo::Ring;
      REQUIRE(buildSchedule(op->args, bp, &op->sched).isOk());
      op->tag = opTag(op->args, op->dtype, 1);
      op->send = reinterpret_cast<uint8_t*>(send[r].data());
      op->recv = reinterpret_cast<uint8_t*>(recv[r].data());
      op->sendLen = op->recvLen = count * 4;
      op->tracker = tr[r];
      tr[r]->pending++;
      eng[r]->enqueue(std::move(op));
    }
    for (int i = 0; i < 2000000 && (tr[0]->pending || tr[1]->pending); ++i) {
      eng[0]->progress();
      eng[1]->progress();
    }
    REQUIRE(tr[0]->pending == 0);
    REQUIRE(tr[1]->pending == 0);
    *out0 = recv[0];
    CHECK(recv[0] == recv[1]);
    return {tr[0]->result(), tr[1]->result()};
  }
};

bool all(const std::vector<MemType>& v, MemType m) {
  for (MemType x : v)
    if (x != m) return false;
  return !v.empty();
}

}  // namespace

TEST_CASE("placement: engines post each kind of op on its endpoint set with its MemType",
          "[placement]") {
  const size_t count = 3000;  // 12000 bytes in 256-byte chunks
  std::vector<float> out;
  SECTION("without device endpoints everything stays on the host set") {
    Pair p(false);
    for (int kind : {0, 1}) {
      std::vector<Status> st = p.allreduce(count, kind, &out);
      CHECK(st[0].isOk());
      CHECK(out == std::vector<float>(count, 3.0f));
    }
    CHECK(all(p.hostSeen[0], MemType::Host));
    CHECK(p.devSeen[0].empty());
  }
  SECTION("with them: host ops on the host set, stream ops (staged or direct) on the device set") {
    Pair p(true);
    const uint64_t before = localWorkCounters().steps.load();
    std::vector<Status> st = p.allreduce(count, 0, &out);
    CHECK(st[0].isOk());
    CHECK(out == std::vector<float>(count, 3.0f));
    CHECK(all(p.hostSeen[0], MemType::Host));
    CHECK(all(p.hostSeen[1], MemType::Host));
    CHECK(p.devSeen[0].empty());
    // The host op's local steps ran inline, not on the device backend.
    CHECK(localWorkCounters().steps.load() == before);
    const size_t hostPosts = p.hostSeen[0].size();

    st = p.allreduce(count, 1, &out);  // staged: pinned staging through cuda_ipc
    CHECK(st[0].isOk());
    CHECK(out == std::vector<float>(count, 3.0f));
    CHECK(p.hostSeen[0].size() == hostPosts);
    CHECK(all(p.devSeen[0], MemType::Cuda));
    CHECK(localWorkCounters().steps.load() == before);  // staged: host reductions
    const size_t devPosts = p.devSeen[0].size();
    CHECK(devPosts == hostPosts);  // the same schedule, the other set

    st = p.allreduce(count, 2, &out);  // direct: device set, device backend
    CHECK(st[0].isOk());
    CHECK(st[1].isOk());
    CHECK(out == std::vector<float>(count, 3.0f));
    CHECK(p.hostSeen[0].size() == hostPosts);
    CHECK(p.devSeen[0].size() == 2 * devPosts);
    CHECK(all(p.devSeen[1], MemType::Cuda));
    CHECK(localWorkCounters().steps.load() > before);  // every reduce on the backend
  }
  SECTION("a direct op on an engine without a GPU backend fails, naming why") {
    Pair p(true, false);
    std::vector<Status> st = p.allreduce(count, 2, &out);
    CHECK(st[0].code() == WEFT_ERR_INTERNAL);
    CHECK(st[0].message().find("no GPU backend") != std::string::npos);
    CHECK(p.devSeen[0].empty());
    CHECK(p.hostSeen[0].empty());
  }
}

// The direct path binds only the buffers a call uses (a non-root's reduce
// receive buffer or broadcast send buffer may be anything, even host
// memory): no schedule may touch them.
TEST_CASE("placement: non-roots' unused buffers are never touched by any schedule", "[placement]") {
  const Algo algos[] = {Algo::Auto, Algo::Chain, Algo::BinomialTree, Algo::Direct};
  for (int n : {2, 3, 4, 5, 8}) {
    for (CollType t : {CollType::Reduce, CollType::Broadcast}) {
      for (Algo al : algos) {
        if (!algoSupports(al, t)) continue;
        for (int r = 0; r < n; ++r) {
          for (size_t count : {size_t{1}, size_t{1000}, size_t{100000}}) {
            CollArgs a;
            a.type = t;
            a.count = count;
            a.root = 1 % n;
            if (r == a.root) continue;
            BuildParams bp;
            bp.rank = r;
            bp.nranks = n;
            bp.chunkBytes = 4096;
            bp.algo = al;
            Schedule s;
            REQUIRE(buildSchedule(a, bp, &s).isOk());
            const BufId unused = t == CollType::Reduce ? BufId::Recv : BufId::Send;
            for (const Step& st : s.steps) {
              INFO(collName(t) << " " << algoName(al) << " n " << n << " rank " << r);
              const bool reads = st.kind == StepKind::Send || st.kind == StepKind::Copy ||
                                 st.kind == StepKind::Reduce || st.kind == StepKind::RecvReduce;
              const bool twoIn = st.kind == StepKind::Reduce || st.kind == StepKind::RecvReduce;
              const bool writes = st.kind != StepKind::Send;
              CHECK_FALSE((reads && st.a.buf == unused));
              CHECK_FALSE((twoIn && st.b.buf == unused));
              CHECK_FALSE((writes && st.dst.buf == unused));
            }
          }
        }
      }
    }
  }
}
