// Engine::drive, the one loop every waiter runs (a blocking call, the
// comm's progress thread, destroy, runAlone), on one rank whose receive
// completes only when the test says: it ends on the caller's condition
// (checked before the first round), on cancel, on a deadline (without
// failing anything), or with the ops failed by the engine's own stall
// timeout; with a lock it returns holding it and lets go of it between
// rounds; runAlone fails its op when aborted and times it out naming the
// peer.
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/config.h"
#include "core/mutex.h"
#include "exec/engine.h"

using namespace weft;

namespace {

// Receives stay posted until complete(); sends are refused (none here).
class HeldEndpoint : public Endpoint {
 public:
  int posts = 0;
  Completion* pending = nullptr;
  Status postSend(const void*, size_t, uint64_t, MemType, Completion*) override {
    return Status(WEFT_ERR_INTERNAL, "no sends here");
  }
  Status postRecv(void*, size_t, uint64_t, MemType, Completion* c) override {
    ++posts;
    pending = c;
    return Status::inProgress();
  }
  void complete() {
    if (pending) pending->finish();
    pending = nullptr;
  }
};

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct OneRank {
  HeldEndpoint ep;
  std::unique_ptr<Engine> engine;
  std::vector<float> recv = std::vector<float>(16, 0.0f);
  std::shared_ptr<OpTracker> tracker = std::make_shared<OpTracker>();

  explicit OneRank(double timeoutS = 300) {
    Config cfg;
    cfg.timeoutS = timeoutS;
    PeerInfo me;
    me.rank = 0;
    me.hostHash = 1;
    me.pid = 4242;
    me.hostname = "test";
    engine.reset(new Engine(0, 1, cfg, {&ep}, {nullptr}, {}, {me}));
  }
  // One receive from this rank's own endpoint, into recv.
  void fill(Op& op) {
    op.args.type = CollType::Recv;
    op.args.count = recv.size();
    op.args.eltSize = 4;
    op.dtype = WEFT_FLOAT32;
    op.sched = Schedule();
    Step r;
    r.kind = StepKind::Recv;
    r.peer = 0;
    r.dst = BufRef{BufId::Recv, 0};
    r.bytes = recv.size() * 4;
    op.sched.add(r);
    op.recv = reinterpret_cast<uint8_t*>(recv.data());
    op.recvLen = r.bytes;
  }
  void enqueue() {
    std::unique_ptr<Op> op = engine->newOp();
    fill(*op);
    op->tracker = tracker;
    tracker->pending++;
    engine->enqueue(std::move(op));
  }
  bool finished() const { return tracker->pending.load() == 0; }
};

}  // namespace

TEST_CASE("drive: done is checked before the first round and after every round", "[engine]") {
  OneRank r;
  r.enqueue();
  Engine::Drive d;
  d.done = [] { return true; };
  CHECK(r.engine->drive(d) == Engine::DriveEnd::kDone);
  CHECK(r.ep.posts == 0);  // no round ran
  int rounds = 0;
  d.done = [&] {
    if (++rounds == 20) r.ep.complete();  // the data arrives after some idle rounds
    return r.finished();
  };
  CHECK(r.engine->drive(d) == Engine::DriveEnd::kDone);
  CHECK(r.ep.posts == 1);
  CHECK(rounds > 20);
  CHECK(r.tracker->result().isOk());
  CHECK_FALSE(r.engine->busy());
}

TEST_CASE("drive: a deadline ends it after a round, failing nothing", "[engine]") {
  OneRank r;
  r.enqueue();
  const auto t0 = std::chrono::steady_clock::now();
  const Deadline dl(0.2);
  Engine::Drive d;
  d.done = [&] { return r.finished(); };
  d.deadline = &dl;
  CHECK(r.engine->drive(d) == Engine::DriveEnd::kExpired);
  const double s = secondsSince(t0);
  CHECK(s >= 0.2);
  CHECK(s < 5);
  CHECK_FALSE(r.finished());  // the caller decides what expiry means
  CHECK(r.engine->error().isOk());
  CHECK(r.engine->busy());
}

TEST_CASE("drive: cancel ends it before the next round, failing nothing", "[engine]") {
  OneRank r;
  r.enqueue();
  std::atomic<bool> cancel{false};
  Engine::Drive d;
  d.done = [&] { return r.finished(); };
  d.cancel = &cancel;
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cancel = true;
  });
  CHECK(r.engine->drive(d) == Engine::DriveEnd::kCancelled);
  t.join();
  CHECK_FALSE(r.finished());
  CHECK(r.engine->error().isOk());
}

TEST_CASE("drive: with a lock it takes it, lets go of it between rounds, returns holding it",
          "[engine]") {
  OneRank r;
  r.enqueue();
  Mutex mu;
  std::unique_lock<Mutex> lk(mu, std::defer_lock);  // not held at the start
  std::atomic<bool> cancel{false};
  const Deadline dl(30);  // a drive that never let go would end here, not hang
  bool heldForDone = true;
  Engine::Drive d;
  d.done = [&] {
    heldForDone &= lk.owns_lock();
    return r.finished();
  };
  d.cancel = &cancel;
  d.deadline = &dl;
  d.lock = &lk;
  // Another thread takes the lock while the engine waits, as an API call or
  // the progress thread would, and completes the posted receive under it.
  std::thread t([&] {
    for (;;) {
      {
        std::lock_guard<Mutex> g(mu);
        if (r.ep.posts) {
          r.ep.complete();
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  CHECK(r.engine->drive(d) == Engine::DriveEnd::kDone);
  CHECK(lk.owns_lock());
  CHECK(heldForDone);
  lk.unlock();
  t.join();
  CHECK(r.tracker->result().isOk());
  // Held on entry: the same, ended by a thread that sets cancel under the lock.
  lk.lock();
  r.tracker = std::make_shared<OpTracker>();
  r.enqueue();
  std::thread c([&] {
    std::lock_guard<Mutex> g(mu);
    cancel = true;
  });
  CHECK(r.engine->drive(d) == Engine::DriveEnd::kCancelled);
  CHECK(lk.owns_lock());
  CHECK(heldForDone);
  lk.unlock();
  c.join();
}

TEST_CASE("drive: the engine's stall timeout fails the ops, naming the peer", "[engine]") {
  OneRank r(1.0);  // WEFT_TIMEOUT_S=1
  r.enqueue();
  Mutex mu;
  std::unique_lock<Mutex> lk(mu);
  Engine::Drive d;
  d.done = [&] { return r.finished(); };
  d.lock = &lk;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(r.engine->drive(d) == Engine::DriveEnd::kDone);
  const double s = secondsSince(t0);
  CHECK(s >= 0.9);
  CHECK(s < 5);
  const Status st = r.tracker->result();
  CHECK(st.code() == WEFT_ERR_TIMEOUT);
  CHECK(st.message().find("made no progress") != std::string::npos);
  CHECK(st.message().find("rank 0 (test, pid 4242)") != std::string::npos);
}

TEST_CASE("runAlone: aborted, its op fails with ABORTED, stalled with TIMEOUT", "[engine]") {
  SECTION("aborted") {
    OneRank r;
    REQUIRE(r.engine->canRunAlone());
    std::atomic<bool> aborting{false};
    std::thread t([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      aborting = true;
    });
    Op& op = r.engine->aloneOp();
    r.fill(op);
    const Status st = r.engine->runAlone(op, aborting);
    t.join();
    CHECK(st.code() == WEFT_ERR_ABORTED);
    CHECK(st.message() == "communicator was aborted");
    CHECK(r.engine->error().code() == WEFT_ERR_ABORTED);  // sticky
    CHECK(r.ep.posts == 1);
    CHECK_FALSE(r.engine->busy());
  }
  SECTION("stalled") {
    OneRank r(1.0);
    std::atomic<bool> aborting{false};
    Op& op = r.engine->aloneOp();
    r.fill(op);
    const auto t0 = std::chrono::steady_clock::now();
    const Status st = r.engine->runAlone(op, aborting);
    const double s = secondsSince(t0);
    CHECK(s >= 0.9);
    CHECK(s < 5);
    CHECK(st.code() == WEFT_ERR_TIMEOUT);
    CHECK(st.message().find("rank 0 (test, pid 4242)") != std::string::npos);
  }
}
