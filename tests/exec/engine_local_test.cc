// The engine driven directly (one rank, no transport) with a scripted
// LocalWork backend that finishes steps only when the test releases them:
// a dependent step is not submitted before the step it depends on is done,
// an op finishes only when its last local step does, and a backend that
// fails (at submit or later) or never finishes fails the op with a clear
// error instead of hanging.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "exec/engine.h"
#include "exec/local_work.h"
#include "kernels/cpu/reduce.h"

using namespace weft;

namespace {

// Work runs when the test releases its ticket, in order.
class ScriptedLocalWork : public LocalWork {
 public:
  std::vector<std::string> submitted;  // "reduce", "copy", "divide" in submission order
  Status failSubmit, failDone;
  bool drainResult = true;
  int drains = 0;

  const char* name() const override { return "scripted"; }
  Status submitReduce(void* dst, const void* a, const void* b, size_t count, weft_datatype_t dt,
                      weft_op_t op, uint64_t* ticket) override {
    return push(
        "reduce", [=] { reduceHost(dst, a, b, count, dt, op); }, ticket);
  }
  Status submitCopy(void* dst, const void* src, size_t bytes, uint64_t* ticket) override {
    return push(
        "copy", [=] { memmove(dst, src, bytes); }, ticket);
  }
  Status submitDivide(void* dst, size_t count, weft_datatype_t dt, uint64_t n,
                      uint64_t* ticket) override {
    return push(
        "divide", [=] { divideByCount(dst, count, dt, n); }, ticket);
  }
  Status done(uint64_t t, bool* done) override {
    if (failDone.isError()) return failDone;
    *done = t <= released_;
    return Status();
  }
  bool drain(double) override {
    ++drains;
    return drainResult;
  }
  // Runs and finishes every job up to ticket t.
  void release(uint64_t t) {
    while (released_ < t && released_ < jobs_.size()) jobs_[released_++]();
  }
  uint64_t count() const { return jobs_.size(); }

 private:
  Status push(const char* what, std::function<void()> job, uint64_t* ticket) {
    if (failSubmit.isError()) return failSubmit;
    submitted.push_back(what);
    jobs_.push_back(std::move(job));
    *ticket = jobs_.size();
    return Status();
  }
  std::vector<std::function<void()>> jobs_;
  uint64_t released_ = 0;
};

struct Fixture {
  Config cfg;
  std::unique_ptr<Engine> engine;
  ScriptedLocalWork* lw = nullptr;
  std::vector<float> send, recv;
  std::shared_ptr<OpTracker> tracker = std::make_shared<OpTracker>();

  explicit Fixture(double timeoutS = 300) {
    cfg.timeoutS = timeoutS;
    PeerInfo me;
    me.rank = 0;
    me.hostHash = 1;
    me.hostname = "test";
    engine.reset(new Engine(0, 1, cfg, {nullptr}, {nullptr}, {}, {me}));
    lw = new ScriptedLocalWork();
    engine->setLocalWork(std::unique_ptr<LocalWork>(lw));
  }

  // recv = send; recv = recv + scratch; scratch = send first; recv /= 1:
  // copy -> (copy to scratch) -> reduce (needs both) -> divide (needs reduce).
  void enqueue(size_t count) {
    send.assign(count, 2.0f);
    recv.assign(count, 0.0f);
    std::unique_ptr<Op> op(new Op());
    op->args.type = CollType::AllReduce;
    op->args.count = count;
    op->args.eltSize = 4;
    op->args.op = WEFT_AVG;
    op->dtype = WEFT_FLOAT32;
    const size_t bytes = count * 4;
    Step copy;
    copy.kind = StepKind::Copy;
    copy.a = BufRef{BufId::Send, 0};
    copy.dst = BufRef{BufId::Recv, 0};
    copy.bytes = bytes;
    const uint32_t c0 = op->sched.add(copy);
    Step toScratch = copy;
    toScratch.dst = BufRef{BufId::Scratch, 0};
    const uint32_t c1 = op->sched.add(toScratch);
    Step red;
    red.kind = StepKind::Reduce;
    red.a = BufRef{BufId::Recv, 0};
    red.b = BufRef{BufId::Scratch, 0};
    red.dst = BufRef{BufId::Recv, 0};
    red.bytes = bytes;
    const uint32_t r = op->sched.add(red, {c0, c1});
    Step div;
    div.kind = StepKind::Divide;
    div.dst = BufRef{BufId::Recv, 0};
    div.bytes = bytes;
    op->sched.add(div, {r});
    op->sched.scratchBytes = bytes;
    op->send = reinterpret_cast<uint8_t*>(send.data());
    op->recv = reinterpret_cast<uint8_t*>(recv.data());
    op->sendLen = op->recvLen = bytes;
    op->tracker = tracker;
    tracker->pending++;
    engine->enqueue(std::move(op));
  }
  bool finished() const { return tracker->pending.load() == 0; }
  void spin(int rounds) {
    for (int i = 0; i < rounds; ++i) engine->progress();
  }
};

}  // namespace

TEST_CASE("engine: a local step pending holds back its dependents - the op ends with the last",
          "[local-work][engine]") {
  Fixture f;
  f.enqueue(1000);
  f.spin(10);
  // Both copies are independent: submitted. The reduce waits for both.
  REQUIRE(f.lw->submitted == std::vector<std::string>{"copy", "copy"});
  f.lw->release(1);
  f.spin(10);
  CHECK(f.lw->submitted.size() == 2);  // the scratch copy is still pending
  f.lw->release(2);
  f.spin(10);
  REQUIRE(f.lw->submitted == std::vector<std::string>{"copy", "copy", "reduce"});
  CHECK_FALSE(f.finished());
  f.lw->release(3);
  f.spin(10);
  REQUIRE(f.lw->submitted.size() == 4);
  CHECK_FALSE(f.finished());  // the divide has not run yet
  CHECK(f.recv[0] == 4.0f);   // 2 + 2, not yet divided by 1 (nothing to divide)
  f.lw->release(4);
  f.spin(10);
  CHECK(f.finished());
  CHECK(f.tracker->result().isOk());
  CHECK_FALSE(f.engine->busy());
}

TEST_CASE("engine: a backend error at submit or when polled fails the op, naming it",
          "[local-work][engine]") {
  for (bool atSubmit : {true, false}) {
    INFO((atSubmit ? "at submit" : "when polled"));
    Fixture f;
    const Status boom(WEFT_ERR_CUDA, "kernel launch failed: boom");
    if (atSubmit)
      f.lw->failSubmit = boom;
    else
      f.lw->failDone = boom;
    f.enqueue(64);
    f.spin(10);
    REQUIRE(f.finished());
    const Status st = f.tracker->result();
    CHECK(st.code() == WEFT_ERR_CUDA);
    CHECK(st.message().find("boom") != std::string::npos);
    CHECK(st.message().find("allreduce") != std::string::npos);
    CHECK(f.engine->error().isError());  // sticky
  }
}

TEST_CASE("engine: local work that never finishes times out, drained before the op ends",
          "[local-work][engine]") {
  Fixture f(1.0);             // WEFT_TIMEOUT_S=1
  f.lw->drainResult = false;  // and it does not drain either: buffers are leaked, not freed
  f.enqueue(64);
  const auto t0 = std::chrono::steady_clock::now();
  while (!f.finished() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    f.engine->progress();
    f.engine->idleWait(100);
  }
  REQUIRE(f.finished());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(s >= 0.9);
  CHECK(s < 5);
  const Status st = f.tracker->result();
  CHECK(st.code() == WEFT_ERR_TIMEOUT);
  CHECK(st.message().find("local step(s) (scripted)") != std::string::npos);
  CHECK(f.lw->drains >= 1);
}

// One rank, no transport, no backend: local steps run inline.
static std::unique_ptr<Engine> oneRankEngine() {
  Config cfg;
  PeerInfo me;
  me.rank = 0;
  me.hostHash = 1;
  return std::unique_ptr<Engine>(new Engine(0, 1, cfg, {nullptr}, {nullptr}, {}, {me}));
}

TEST_CASE("engine: without a backend local steps run inline (the host path)",
          "[local-work][engine]") {
  std::unique_ptr<Engine> engine = oneRankEngine();
  Engine& e = *engine;
  auto tracker = std::make_shared<OpTracker>();
  std::vector<float> send(100, 3.0f), recv(100, 0.0f);
  std::unique_ptr<Op> op(new Op());
  op->args.count = 100;
  op->dtype = WEFT_FLOAT32;
  Step copy;
  copy.kind = StepKind::Copy;
  copy.a = BufRef{BufId::Send, 0};
  copy.dst = BufRef{BufId::Recv, 0};
  copy.bytes = 400;
  op->sched.add(copy);
  op->send = reinterpret_cast<uint8_t*>(send.data());
  op->recv = reinterpret_cast<uint8_t*>(recv.data());
  op->tracker = tracker;
  tracker->pending++;
  const uint64_t before = localWorkCounters().steps.load();
  e.enqueue(std::move(op));
  e.progress();  // one pass: done, nothing pending
  CHECK(tracker->pending.load() == 0);
  CHECK(recv[99] == 3.0f);
  CHECK(localWorkCounters().steps.load() == before);
}

TEST_CASE("engine: the scratch of a group's ops is kept for the next group, up to a bound",
          "[engine]") {
  std::unique_ptr<Engine> engine = oneRankEngine();
  Engine& e = *engine;
  std::vector<float> send(1024, 1.0f);
  // `ops` ops in flight together, each with `scratch` bytes of scratch.
  auto group = [&](int ops, size_t scratch) {
    auto tracker = std::make_shared<OpTracker>();
    for (int i = 0; i < ops; ++i) {
      std::unique_ptr<Op> op = e.newOp();
      op->args.count = send.size();
      op->dtype = WEFT_FLOAT32;
      op->sched = Schedule();
      Step copy;
      copy.kind = StepKind::Copy;
      copy.a = BufRef{BufId::Send, 0};
      copy.dst = BufRef{BufId::Scratch, 0};
      copy.bytes = send.size() * 4;
      op->sched.add(copy);
      op->sched.scratchBytes = scratch;
      op->send = reinterpret_cast<uint8_t*>(send.data());
      op->sendLen = copy.bytes;
      op->tracker = tracker;
      tracker->pending++;
      e.enqueue(std::move(op));
    }
    for (int i = 0; i < 10000 && tracker->pending.load() > 0; ++i) e.progress();
    REQUIRE(tracker->pending.load() == 0);
    REQUIRE(tracker->result().isOk());
  };
  const size_t small = 32 << 10;
  group(200, small);
  // Every buffer kept: the next group of the loop allocates none.
  CHECK(e.spareScratchBytes(false) == 200 * small);
  group(200, small);
  CHECK(e.spareScratchBytes(false) == 200 * small);  // the same buffers again
  CHECK(e.releaseSpareScratch() == 200 * small);
  CHECK(e.spareScratchBytes(false) == 0);
  // 100 MiB in flight together: the pool keeps 64 MiB of it.
  group(100, 1 << 20);
  CHECK(e.spareScratchBytes(false) == size_t{64} << 20);
}
