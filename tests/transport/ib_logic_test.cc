// The ibverbs transport's device-free logic: WEFT_IB_HCA parsing and
// matching, RoCE GID selection, the queue-pair state machine, credit flow
// control (a two-sided simulation that must never overrun a receiver and
// never deadlock), the registration cache and the GPUDirect RDMA choice.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "transports/ibverbs/credits.h"
#include "transports/ibverbs/gdr.h"
#include "transports/ibverbs/gid_select.h"
#include "transports/ibverbs/hca_spec.h"
#include "transports/ibverbs/qp_fsm.h"
#include "transports/ibverbs/reg_cache.h"

using namespace weft;
using namespace weft::ib;

TEST_CASE("ib: WEFT_IB_HCA parses like NCCL_IB_HCA", "[transport][ibverbs]") {
  HcaSpec s;
  REQUIRE(parseHcaSpec("", &s).isOk());
  CHECK(hcaAllowed(s, "mlx5_0", 1));

  REQUIRE(parseHcaSpec("mlx5_0:1,mlx5_1", &s).isOk());
  CHECK_FALSE(s.exclude);
  CHECK_FALSE(s.exact);
  REQUIRE(s.entries.size() == 2);
  CHECK(s.entries[0].name == "mlx5_0");
  CHECK(s.entries[0].port == 1);
  CHECK(s.entries[1].port == -1);
  CHECK(hcaAllowed(s, "mlx5_0", 1));
  CHECK_FALSE(hcaAllowed(s, "mlx5_0", 2));
  CHECK(hcaAllowed(s, "mlx5_1", 2));
  CHECK(hcaAllowed(s, "mlx5_10", 1));  // prefix match
  CHECK_FALSE(hcaAllowed(s, "mlx4_0", 1));

  REQUIRE(parseHcaSpec("=mlx5_1", &s).isOk());
  CHECK(s.exact);
  CHECK(hcaAllowed(s, "mlx5_1", 1));
  CHECK_FALSE(hcaAllowed(s, "mlx5_10", 1));

  REQUIRE(parseHcaSpec("^mlx5_2", &s).isOk());
  CHECK(s.exclude);
  CHECK_FALSE(hcaAllowed(s, "mlx5_2", 1));
  CHECK_FALSE(hcaAllowed(s, "mlx5_20", 1));
  CHECK(hcaAllowed(s, "mlx5_0", 1));

  REQUIRE(parseHcaSpec("^=mlx5_2:1", &s).isOk());
  CHECK(s.exclude);
  CHECK(s.exact);
  CHECK_FALSE(hcaAllowed(s, "mlx5_2", 1));
  CHECK(hcaAllowed(s, "mlx5_2", 2));
  CHECK(hcaAllowed(s, "mlx5_20", 1));

  for (const char* bad : {"^", "=", "mlx5_0:", "mlx5_0:x", "mlx5_0:0", ",mlx5_0", "mlx5_0,,a", ":1",
                          "mlx5_0:+1", "mlx5_0: 1", "mlx5_0:256"}) {
    INFO(bad);
    Status st = parseHcaSpec(bad, &s);
    CHECK(st.code() == WEFT_ERR_INVALID_ARGUMENT);
    CHECK(st.message().find("WEFT_IB_HCA") != std::string::npos);
  }
}

namespace {

GidEntry gid(int index, GidType t, std::initializer_list<int> bytes) {
  GidEntry e;
  e.index = index;
  e.type = t;
  int i = 0;
  for (int b : bytes) e.gid[i++] = static_cast<uint8_t>(b);
  return e;
}

GidEntry v4mapped(int index, GidType t) {
  return gid(index, t, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7});
}

}  // namespace

TEST_CASE("ib: RoCE GID selection prefers v2 with an IPv4 address", "[transport][ibverbs]") {
  const GidEntry linkLocal1 =
      gid(0, GidType::RoceV1, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8});
  const GidEntry linkLocal2 =
      gid(1, GidType::RoceV2, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8});
  std::vector<GidEntry> table = {linkLocal1, linkLocal2, v4mapped(2, GidType::RoceV1),
                                 v4mapped(3, GidType::RoceV2), GidEntry()};
  table.back().index = 4;  // all zero: unused
  int idx = -1;
  REQUIRE(selectGid(table, true, -1, &idx).isOk());
  CHECK(idx == 3);
  // Without the v4-mapped v2 entry: v1 beats a link-local v2.
  table.erase(table.begin() + 3);
  REQUIRE(selectGid(table, true, -1, &idx).isOk());
  CHECK((idx == 0 || idx == 2));
  CHECK(idx == 0);  // both v1: the lower index
  // Forced index: used when present, refused when empty or missing.
  REQUIRE(selectGid(table, true, 1, &idx).isOk());
  CHECK(idx == 1);
  Status st = selectGid(table, true, 3, &idx);
  CHECK(st.code() == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(st.message().find("WEFT_IB_GID_INDEX=3") != std::string::npos);
  // InfiniBand: index 0, addressed by LID.
  REQUIRE(selectGid({}, false, -1, &idx).isOk());
  CHECK(idx == 0);
  // A RoCE port without any address.
  CHECK(selectGid({GidEntry()}, true, -1, &idx).isError());
  CHECK(gidIsIpv4Mapped(v4mapped(0, GidType::RoceV2).gid));
  CHECK(gidIsLinkLocal(linkLocal1.gid));
}

TEST_CASE("ib: the queue-pair state machine allows only RESET-INIT-RTR-RTS",
          "[transport][ibverbs]") {
  QpFsm qp;
  uint32_t attrs = 0;
  RemoteQp remote;
  remote.qpn = 0x1234;
  remote.psn = 77;
  remote.lid = 5;
  remote.mtu = 4096;
  CHECK(qp.plan(QpState::Rtr, &remote, &attrs).code() == WEFT_ERR_INVALID_USAGE);
  CHECK(qp.plan(QpState::Rts, nullptr, &attrs).code() == WEFT_ERR_INVALID_USAGE);
  REQUIRE(qp.plan(QpState::Init, nullptr, &attrs).isOk());
  CHECK(attrs == (kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccess));
  qp.commit(QpState::Init);
  CHECK(qp.plan(QpState::Init, nullptr, &attrs).isError());
  CHECK(qp.plan(QpState::Rtr, nullptr, &attrs).code() == WEFT_ERR_INVALID_ARGUMENT);
  RemoteQp bad = remote;
  bad.qpn = 0;
  CHECK(qp.plan(QpState::Rtr, &bad, &attrs).message().find("QP number") != std::string::npos);
  bad = remote;
  bad.lid = 0;
  CHECK(qp.plan(QpState::Rtr, &bad, &attrs).message().find("neither a LID nor a GID") !=
        std::string::npos);
  bad.useGid = true;
  CHECK(qp.plan(QpState::Rtr, &bad, &attrs).message().find("GID is zero") != std::string::npos);
  bad.gid[15] = 1;
  CHECK(qp.plan(QpState::Rtr, &bad, &attrs).isOk());
  bad.mtu = 3000;
  CHECK(qp.plan(QpState::Rtr, &bad, &attrs).message().find("MTU") != std::string::npos);
  REQUIRE(qp.plan(QpState::Rtr, &remote, &attrs).isOk());
  CHECK((attrs & kAttrDestQpn) != 0);
  CHECK((attrs & kAttrPath) != 0);
  CHECK((attrs & kAttrSqPsn) == 0);
  qp.commit(QpState::Rtr);
  REQUIRE(qp.plan(QpState::Rts, nullptr, &attrs).isOk());
  CHECK((attrs & (kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry)) ==
        (kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry));
  qp.commit(QpState::Rts);
  REQUIRE(qp.plan(QpState::Error, nullptr, &attrs).isOk());
  qp.commit(QpState::Error);
  CHECK(qp.plan(QpState::Rts, nullptr, &attrs).isError());
  REQUIRE(qp.plan(QpState::Reset, nullptr, &attrs).isOk());
  qp.commit(QpState::Reset);
  CHECK(qp.plan(QpState::Init, nullptr, &attrs).isOk());
  CHECK(commonMtu(4096, 1024) == 1024);
  CHECK(commonMtu(4096, 1500) == 1024);
  CHECK(commonMtu(9000, 9000) == 4096);
  CHECK(commonMtu(4096, 100) == 0);
}

// Two endpoints exchanging messages through receive windows of `slots`
// buffers, each side sending whenever its (random) program wants to and
// credits allow; receivers consume with random delay. The simulation checks
// that no message ever arrives without a free slot and that everything
// queued is eventually delivered (no credit deadlock).
TEST_CASE("ib: credit flow control never overruns a receiver and never deadlocks",
          "[transport][ibverbs]") {
  for (uint32_t slots : {2u, 3u, 8u, 64u}) {
    for (unsigned seed = 1; seed <= 20; ++seed) {
      INFO("slots " << slots << " seed " << seed);
      std::mt19937 rng(seed * 7919 + slots);
      struct Msg {
        bool data;
        uint32_t credits;
      };
      struct Side {
        CreditWindow w;
        int toSend;             // data messages still to send
        std::deque<Msg> inbox;  // arrived, not yet consumed (occupy slots)
        uint32_t freeSlots;
        int received = 0;
        explicit Side(uint32_t s, int n) : w(s), toSend(n), freeSlots(s) {}
      };
      const int n = 500;
      Side side[2] = {Side(slots, n), Side(slots, n / 2 + static_cast<int>(seed))};
      const int sent[2] = {side[0].toSend, side[1].toSend};  // what each will send
      bool overrun = false;
      int idle = 0;
      for (int step = 0; step < 200000 && idle < 1000; ++step) {
        bool moved = false;
        for (int me = 0; me < 2; ++me) {
          Side& s = side[me];
          Side& peer = side[1 - me];
          int action = static_cast<int>(rng() % 3);
          if (action == 0 && s.toSend > 0 && s.w.takeForData()) {
            if (peer.freeSlots == 0)
              overrun = true;
            else
              --peer.freeSlots;
            peer.inbox.push_back({true, s.w.takeOwed()});
            --s.toSend;
            moved = true;
          } else if (action == 1 && !s.inbox.empty()) {
            Msg m = s.inbox.front();
            s.inbox.pop_front();
            ++s.freeSlots;  // consumed and posted again
            s.w.slotReposted();
            s.w.grant(m.credits);
            if (m.data) ++s.received;
            moved = true;
          } else if (action == 2 && s.w.creditReturnDue() && s.w.takeForCreditReturn()) {
            if (peer.freeSlots == 0)
              overrun = true;
            else
              --peer.freeSlots;
            peer.inbox.push_back({false, s.w.takeOwed()});
            moved = true;
          }
        }
        idle = moved ? 0 : idle + 1;
      }
      CHECK_FALSE(overrun);
      CHECK(side[0].toSend == 0);
      CHECK(side[1].toSend == 0);
      CHECK(side[1].received == sent[0]);
      CHECK(side[0].received == sent[1]);
    }
  }
}

TEST_CASE("ib: the registration cache reuses, holds and evicts registrations",
          "[transport][ibverbs]") {
  int regs = 0, deregs = 0;
  std::vector<std::pair<uintptr_t, size_t>> live;
  RegCache cache(
      3, 4096,
      [&](uintptr_t start, size_t len, Registration* r) {
        ++regs;
        live.emplace_back(start, len);
        r->lkey = static_cast<uint32_t>(regs);
        r->rkey = static_cast<uint32_t>(regs) + 100;
        return Status::ok();
      },
      [&](const Registration& r) {
        ++deregs;
        for (size_t i = 0; i < live.size(); ++i)
          if (live[i].first == r.start) {
            live.erase(live.begin() + static_cast<long>(i));
            break;
          }
      });
  static char buf[64 * 4096] __attribute__((aligned(4096)));
  const Registration* a = nullptr;
  REQUIRE(cache.acquire(buf + 100, 5000, &a).isOk());
  CHECK(a->start == reinterpret_cast<uintptr_t>(buf));
  CHECK(a->len == 8192);
  cache.release(a);
  // Inside the same pages: a hit, no new registration.
  const Registration* b = nullptr;
  REQUIRE(cache.acquire(buf + 4096, 100, &b).isOk());
  CHECK(b == a);
  CHECK(regs == 1);
  CHECK(cache.hits() == 1);
  // Three more buffers with b held: the idle ones go first, b never.
  const Registration* c[3];
  for (int i = 0; i < 3; ++i) {
    REQUIRE(cache.acquire(buf + (10 + 10 * i) * 4096, 4096, &c[i]).isOk());
    cache.release(c[i]);
  }
  CHECK(cache.size() <= 3);
  CHECK(regs == 4);
  bool bAlive = false;
  for (auto& l : live) bAlive |= l.first == reinterpret_cast<uintptr_t>(buf);
  CHECK(bAlive);
  cache.release(b);
  // A larger buffer starting at the same page replaces the idle entry.
  const Registration* d = nullptr;
  REQUIRE(cache.acquire(buf, 6 * 4096, &d).isOk());
  CHECK(d->len == 6 * 4096);
  cache.release(d);
  cache.invalidate(buf, 4096);
  for (auto& l : live) CHECK(l.first != reinterpret_cast<uintptr_t>(buf));
  // A failing registration is reported and leaves nothing behind.
  RegCache failing(
      2, 4096,
      [](uintptr_t, size_t, Registration*) { return Status(WEFT_ERR_SYSTEM, "ibv_reg_mr: no"); },
      [](const Registration&) {});
  const Registration* e = nullptr;
  CHECK(failing.acquire(buf, 10, &e).code() == WEFT_ERR_SYSTEM);
  CHECK(failing.size() == 0);
  cache.clear();
  CHECK(live.empty());
  CHECK(deregs == regs);
}

TEST_CASE("ib: WEFT_NET_GDR and the GPUDirect RDMA choice", "[transport][ibverbs]") {
  int v = 7;
  REQUIRE(parseGdrSetting("", &v).isOk());
  CHECK(v == -1);
  REQUIRE(parseGdrSetting("auto", &v).isOk());
  CHECK(v == -1);
  REQUIRE(parseGdrSetting("0", &v).isOk());
  CHECK(v == 0);
  REQUIRE(parseGdrSetting("1", &v).isOk());
  CHECK(v == 1);
  Status bad = parseGdrSetting("yes", &v);
  CHECK(bad.code() == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(bad.message().find("WEFT_NET_GDR=yes") != std::string::npos);

  // A fake sysfs: the peer-memory module appears under module/ or
  // kernel/mm/memory_peers/ depending on the driver generation.
  char tmpl[] = "/tmp/weft-gdr-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string root = tmpl;
  std::string why;
  CHECK(chooseGdr(false, true, root, &why) == GdrMode::Off);
  CHECK(why.find("no CUDA") != std::string::npos);
  CHECK(chooseGdr(true, false, root, &why) == GdrMode::Off);
  CHECK(why.find("nvidia-peermem") != std::string::npos);
  CHECK(chooseGdr(true, true, root, &why) == GdrMode::DmaBuf);
  for (const char* dir :
       {"/module/nvidia_peermem", "/module/nv_peer_mem", "/kernel/mm/memory_peers/nv_mem"}) {
    INFO(dir);
    REQUIRE(std::system(("mkdir -p " + root + dir).c_str()) == 0);
    CHECK(chooseGdr(true, false, root, &why) == GdrMode::PeerMem);
    // dma-buf wins where both work: no kernel module in the path.
    CHECK(chooseGdr(true, true, root, &why) == GdrMode::DmaBuf);
    REQUIRE(std::system(("rm -rf " + root + "/module " + root + "/kernel").c_str()) == 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  CHECK(std::string(gdrModeName(GdrMode::PeerMem)) == "nvidia-peermem");
}

#ifdef WEFT_HAVE_IBVERBS
TEST_CASE("ib: GPUDirect RDMA probe on this machine", "[transport][ibverbs]") {
  std::string why;
  const GdrMode m = probeGdr(&why);
  // Either it is on, or it says why not (here: no CUDA driver).
  if (m == GdrMode::Off) {
    CHECK_FALSE(why.empty());
    WARN("GPUDirect RDMA off here: " << why);
  }
}
#endif
