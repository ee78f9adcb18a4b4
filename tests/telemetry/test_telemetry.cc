// Telemetry (src/telemetry/telemetry.h) driven directly: what a finished op
// adds to the stats file, the flight recorder ring, the board's report of
// ranks that have not entered an op, and the timeline file.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "algo/schedule.h"
#include "telemetry/telemetry.h"

using namespace weft;
using namespace weft::telemetry;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Setup setup(int rank, int nranks, uint64_t commId) {
  Setup s;
  s.rank = rank;
  s.nranks = nranks;
  s.commId = commId;
  s.boardTag = 0x1234 + static_cast<uint64_t>(getpid());
  for (int r = 0; r < nranks; ++r) {
    s.hostnames.push_back("h");
    s.hostHashes.push_back(42);
    s.pids.push_back(1000 + r);
  }
  s.transports = {"self", "shm"};
  s.transportGBs = {10, 4};
  s.transportPeers = {1, nranks - 1};
  return s;
}

OpRecord allreduce(uint64_t seq, uint64_t bytes) {
  OpRecord r;
  r.seq = seq;
  r.type = static_cast<uint8_t>(CollType::AllReduce);
  r.dtype = WEFT_FLOAT32;
  r.op = WEFT_SUM;
  r.count = bytes / 4;
  r.bytes = bytes;
  r.algo = "ring";
  return r;
}

}  // namespace

TEST_CASE("telemetry: waits are charged to the last rank to arrive", "[telemetry]") {
  char dir[] = "/tmp/weft-tel-XXXXXX";
  REQUIRE(mkdtemp(dir));
  Setup s = setup(0, 4, 7);
  s.config.statsPath = std::string(dir) + "/s%r.json";
  {
    Telemetry t(s);
    // Two ops: in the first rank 2 arrives 5 ms after us, in the second we
    // are last. 10 ms of compute between them.
    OpRecord a = allreduce(1, 1 << 20);
    t.begin(a, 1000000000);
    a.stamp = laterStamp(a.stamp, makeStamp(t.toGlobal(1005000000), 2));
    a.reduceNs = 200000;
    t.end(a, 0, 1008000000);
    CHECK(a.lastRank == 2);
    CHECK(a.arrivalNs == 1005000000 - (t.toGlobal(1005000000) & 63));
    OpRecord b = allreduce(2, 1 << 20);
    t.begin(b, 1018000000);
    CHECK(b.gapNs == 10000000);
    t.end(b, 0, 1020000000);
    CHECK(b.lastRank == 0);
    CHECK(b.arrivalNs == b.entryNs);
    std::vector<OpRecord> last = t.recent(5);
    REQUIRE(last.size() == 2);
    CHECK(last[0].seq == 1);
    CHECK(last[1].seq == 2);
  }  // destroy writes the stats
  const std::string j = readFile(std::string(dir) + "/s0.json");
  INFO(j);
  CHECK(j.find("\"ops\": 2,") != std::string::npos);
  CHECK(j.find("\"gap_ns\": 10000000,") != std::string::npos);
  // 1005000000 is a multiple of 64 ns, so the stamp keeps it exactly.
  CHECK(j.find("\"waited_for\": [{\"rank\": 2, \"ns\": 5000000, \"ops\": 1}]") !=
        std::string::npos);
  CHECK(j.find("\"coll\": \"allreduce\", \"size\": \"64K-1M\", \"ops\": 2") != std::string::npos);
  CHECK(j.find("\"link_GBs\": 4.000") != std::string::npos);
  std::remove((std::string(dir) + "/s0.json").c_str());
  rmdir(dir);
}

TEST_CASE(
    "telemetry: records opened in the ring are filed in place, and recent() never shows one half "
    "done",
    "[telemetry]") {
  Setup s = setup(0, 2, 8);
  Telemetry t(s);
  const OpRecord shape = allreduce(0, 4096);
  uint64_t now = 1000000;
  // More ops than the ring holds (64), alternating the two ways of filing.
  for (uint64_t seq = 1; seq <= 150; ++seq) {
    if (seq % 3) {
      OpRecord& r = t.openInRing(shape);
      r.seq = seq;
      t.begin(r, now);
      // While it runs, recent() shows the ops before it only.
      std::vector<OpRecord> mid = t.recent(1000);
      CHECK(mid.size() == std::min<uint64_t>(seq - 1, 63));
      if (!mid.empty()) CHECK(mid.back().seq == seq - 1);
      for (const OpRecord& m : mid) CHECK(m.seq != seq);
      t.end(r, 0, now + 500);
    } else {
      OpRecord r = allreduce(seq, 4096);
      t.begin(r, now);
      t.end(r, 0, now + 500);
    }
    now += 1000;
  }
  std::vector<OpRecord> last = t.recent(1000);
  REQUIRE(last.size() == 64);
  for (size_t i = 0; i < last.size(); ++i) {
    CHECK(last[i].seq == 150 - 63 + i);
    CHECK(last[i].bytes == 4096);
    CHECK(last[i].endNs - last[i].entryNs == 500);
    CHECK(last[i].gapNs == 500);
  }
}

TEST_CASE("telemetry: the board names the ranks that have not entered an op", "[telemetry]") {
  // Three ranks of one host, as three Telemetry objects over one real board.
  Setup s0 = setup(0, 3, 99), s1 = setup(1, 3, 99), s2 = setup(2, 3, 99);
  Telemetry t0(s0), t1(s1), t2(s2);
  REQUIRE(t0.openBoard().isOk());  // the lowest rank creates it
  REQUIRE(t1.openBoard().isOk());
  REQUIRE(t2.openBoard().isOk());
  t0.unlinkBoard();
  for (Telemetry* t : {&t0, &t1, &t2}) {
    OpRecord r = allreduce(1, 4096);
    t->begin(r, 1000);
    t->end(r, 0, 2000);
  }
  // Ranks 0 and 1 enter #2; rank 2 does not.
  OpRecord r0 = allreduce(2, 4096), r1 = allreduce(2, 4096);
  t0.begin(r0, 3000);
  t1.begin(r1, 3000);
  const std::string m = t0.whoIsMissing(2, 2000000000ull);
  INFO(m);
  CHECK(m.find("rank 2 (pid 1002) has not entered it") != std::string::npos);
  CHECK(m.find("allreduce #1 (1024 x float") != std::string::npos);
  CHECK(m.find("rank 1") == std::string::npos);
  // Once rank 2 enters, nobody is missing.
  OpRecord r2 = allreduce(2, 4096);
  t2.begin(r2, 4000);
  CHECK(t0.whoIsMissing(2, 2000000000ull).empty());
}

TEST_CASE("telemetry: the timeline is valid JSON after every flush", "[telemetry]") {
  char dir[] = "/tmp/weft-tel-XXXXXX";
  REQUIRE(mkdtemp(dir));
  Setup s = setup(1, 2, 5);
  s.config.timelinePath = std::string(dir) + "/t%r.json";
  const std::string path = std::string(dir) + "/t1.json";
  {
    Telemetry t(s);
    REQUIRE(t.wantSpans());
    // Right after open: metadata only, closed.
    std::string j = readFile(path);
    CHECK(j.rfind("\n]}\n") == j.size() - 4);
    for (uint64_t i = 1; i <= 3; ++i) {
      OpRecord r = allreduce(i, 65536);
      t.begin(r, i * 1000000);
      r.addWork(SpanKind::Reduce, i * 1000000 + 100, i * 1000000 + 600, true);
      t.end(r, 0, i * 1000000 + 1000);
    }
  }
  const std::string j = readFile(path);
  INFO(j);
  CHECK(j.rfind("\n]}\n") == j.size() - 4);
  CHECK(j.find("\"name\":\"allreduce #3\"") != std::string::npos);
  CHECK(j.find("\"name\":\"REDUCE\"") != std::string::npos);
  CHECK(j.find("\"name\":\"TRANSFER\"") != std::string::npos);
  // Exactly one opening and one closing of the event list.
  CHECK(j.find("]}") == j.rfind("]}"));
  std::remove(path.c_str());
  rmdir(dir);
}
