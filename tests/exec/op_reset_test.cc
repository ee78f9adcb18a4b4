// Op::reset (exec/op.h): the engine recycles ops, so a reset op must be
// indistinguishable from a new one in every member the engine reads, while
// its vectors keep their capacity.
#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "exec/op.h"

using namespace weft;

namespace {

struct CountingRunner : OpRunner {
  bool* destroyed;
  explicit CountingRunner(bool* d) : destroyed(d) {}
  ~CountingRunner() override { *destroyed = true; }
  bool progress(Status*, bool*) override { return true; }
  void waitingFor(std::vector<int>*) const override {}
};

}  // namespace

TEST_CASE("op: reset gives a new op that keeps its vectors' capacity", "[engine]") {
  const Op fresh{};
  Op op;
  op.args.type = CollType::Broadcast;
  op.args.count = 77;
  op.args.root = 3;
  op.args.inPlace = true;
  op.dtype = WEFT_BFLOAT16;
  op.sched.steps.resize(5);
  op.sched.deps.resize(9);
  op.sched.scratchBytes = 4096;
  op.sched.algorithm = "ring";
  auto cachedSched = std::make_shared<Schedule>();
  op.shared = cachedSched;
  bool runnerGone = false;
  op.runner.reset(new CountingRunner(&runnerGone));
  op.seq = 12;
  op.tag = 0xabc;
  uint8_t a[8], b[8];
  op.send = a;
  op.recv = b;
  op.sendLen = op.recvLen = 8;
  op.scratch = ScratchPtr(new uint8_t[16]);
  op.scratchLen = 16;
  op.staged.assign(32, 1);
  op.state.assign(5, Op::kDone);
  op.comps.resize(5);
  op.comps[2].finish(Status(WEFT_ERR_REMOTE, "lost"));
  op.local.assign(5, 7);
  op.deviceEps = true;
  op.mem = MemType::Cuda;
  op.firstPending = 4;
  op.doneCount = 5;
  op.enqueueNs = 99;
  op.rec.seq = 12;
  op.rec.entryNs = 1000;
  op.rec.sent[1] = 64;
  op.rec.nspans = 3;
  op.gateOpen = true;
  op.finished = true;
  op.status = Status(WEFT_ERR_TIMEOUT, "late");
  op.tracker = std::make_shared<OpTracker>();
  const size_t capSteps = op.sched.steps.capacity(), capState = op.state.capacity();
  const size_t capComps = op.comps.capacity(), capStaged = op.staged.capacity();

  op.reset();

  CHECK(runnerGone);
  CHECK(op.args.type == fresh.args.type);
  CHECK(op.args.count == fresh.args.count);
  CHECK(op.args.root == fresh.args.root);
  CHECK(op.args.inPlace == fresh.args.inPlace);
  CHECK(op.dtype == fresh.dtype);
  CHECK(op.sched.steps.empty());
  CHECK(op.sched.deps.empty());
  CHECK(op.sched.scratchBytes == 0);
  CHECK(std::string(op.sched.algorithm).empty());
  CHECK(!op.shared);
  CHECK(cachedSched.use_count() == 1);  // the op let go of the cache's schedule
  CHECK(&op.schedule() == &op.sched);
  CHECK(!op.runner);
  CHECK(op.seq == 0);
  CHECK(op.tag == 0);
  CHECK(op.send == nullptr);
  CHECK(op.recv == nullptr);
  CHECK(op.sendLen == 0);
  CHECK(op.recvLen == 0);
  CHECK(!op.scratch);
  CHECK(op.scratch.get_deleter().fn == nullptr);
  CHECK(op.scratchLen == 0);
  CHECK(op.staged.empty());
  CHECK(op.state.empty());
  CHECK(op.comps.empty());
  CHECK(op.local.empty());
  CHECK(op.lw == nullptr);
  CHECK(!op.deviceEps);
  CHECK(op.mem == MemType::Host);
  CHECK(op.firstPending == 0);
  CHECK(op.doneCount == 0);
  CHECK(op.enqueueNs == 0);
  CHECK(op.rec.seq == 0);
  CHECK(op.rec.entryNs == 0);
  CHECK(op.rec.sent[1] == 0);
  CHECK(op.rec.nspans == 0);
  CHECK(op.rec.lastRank == -1);
  CHECK(op.rec.root == -1);
  CHECK(!op.gateOpen);
  CHECK(!op.finished);
  CHECK(op.status.isOk());
  CHECK(op.status.message().empty());
  CHECK(!op.tracker);
  // The point of recycling: no allocation when the op is used again.
  CHECK(op.sched.steps.capacity() == capSteps);
  CHECK(op.state.capacity() == capState);
  CHECK(op.comps.capacity() == capComps);
  CHECK(op.staged.capacity() == capStaged);
  // A completion made again after the reset starts clean.
  op.comps.resize(5);
  CHECK(!op.comps[2].done);
  CHECK(op.comps[2].status.isOk());
}
