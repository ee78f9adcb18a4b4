// shm-specific checks: no segment survives connect() or the transport, even
// when connect fails or a peer dies during it.
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "core/clock.h"
#include "transport/harness.h"
#include "transports/shm/shm_segment.h"

using namespace weft;
using namespace weft::tpt;

namespace {

// Names in /dev/shm of this communicator's segments.
std::vector<std::string> segments(const TransportContext& ctx) {
  std::string prefix = shm::segmentPrefix(ctx.key).substr(1);
  std::vector<std::string> out;
  DIR* d = opendir("/dev/shm");
  if (!d) return out;
  while (dirent* e = readdir(d))
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) out.push_back(e->d_name);
  closedir(d);
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& name) {
  for (auto& s : v)
    if ("/" + s == name) return true;
  return false;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (auto& s : v) out += s + " ";
  return out;
}

}  // namespace

TEST_CASE("shm: segments are gone after connect and after destroy", "[transport][shm]") {
  Mode mode = GENERATE(Mode::Threads, Mode::Procs);
  INFO(modeName(mode));
  expectPass(runGroup(groupSpec(Kind::Shm, mode), [](Rank& r) -> std::string {
    int p = r.partner();
    std::string mine = shm::segmentName(r.ctx.key, p, r.rank);
    // The name shows a tag derived from the key, not the key.
    TP_CHECK(!contains(mine, strFormat("%02x%02x%02x%02x", r.ctx.key[0], r.ctx.key[1],
                                       r.ctx.key[2], r.ctx.key[3])),
             "the key shows in %s", mine.c_str());
    bool existed = false;
    Status st = r.setup([&](const std::string&) { existed = has(segments(r.ctx), mine); });
    TP_CHECK(existed, "%s missing after localAddress", mine.c_str());
    TP_OK(st);
    TP_CHECK(r.barrier(), "barrier");
    auto left = segments(r.ctx);
    TP_CHECK(left.empty(), "left after connect: %s", join(left).c_str());
    char out[5000], in[5000];
    memset(out, 7, sizeof out);
    Completion cs, cr;
    TP_POST(r.ep(p).postSend(out, sizeof out, 1, MemType::Host, &cs));
    TP_POST(r.ep(p).postRecv(in, sizeof in, 1, MemType::Host, &cr));
    TP_OK(r.drive({&cs, &cr}));
    TP_CHECK(in[4999] == 7, "contents");
    TP_CHECK(r.barrier(), "barrier");
    r.eps.clear();
    r.transport.reset();
    TP_CHECK(r.barrier(), "barrier");
    left = segments(r.ctx);
    TP_CHECK(left.empty(), "left after destroy: %s", join(left).c_str());
    return "";
  }));
}

TEST_CASE("shm: segments are gone when connect never happens or fails", "[transport][shm]") {
  GroupSpec s = groupSpec(Kind::Shm, Mode::Threads);
  s.config.bootstrapTimeoutS = 0.5;
  SECTION("destroyed after localAddress") {
    expectPass(runGroup(s, [](Rank& r) -> std::string {
      r.transport = makeTransport(r.kind, r.ctx);
      std::string blob;
      TP_OK(r.transport->localAddress(&blob));
      TP_CHECK(r.barrier(), "barrier");
      // Two FIFOs and two arena blocks.
      TP_CHECK(segments(r.ctx).size() == 4, "expected 4 segments: %s",
               join(segments(r.ctx)).c_str());
      TP_CHECK(r.barrier(), "barrier");
      r.transport.reset();
      TP_CHECK(r.barrier(), "barrier");
      TP_CHECK(segments(r.ctx).empty(), "left: %s", join(segments(r.ctx)).c_str());
      return "";
    }));
  }
  SECTION("the peer never connects") {
    expectPass(runGroup(s, [](Rank& r) -> std::string {
      r.transport = makeTransport(r.kind, r.ctx);
      std::string blob;
      TP_OK(r.transport->localAddress(&blob));
      std::vector<std::string> blobs;
      TP_CHECK(r.allgather(blob, &blobs), "exchange");
      if (r.rank == 0) {
        Status st = r.transport->connect({1}, blobs, &r.eps);
        TP_CHECK(st.code() == WEFT_ERR_TIMEOUT, "got %d: %s", static_cast<int>(st.code()),
                 st.message().c_str());
        TP_CHECK(contains(st.message(), "still missing: 1 "), "%s", st.message().c_str());
        // Only rank 1's own segments remain (its FIFO from rank 0 and its
        // arena block): ours are gone although connect failed.
        auto left = segments(r.ctx);
        TP_CHECK(left.size() == 2 && has(left, shm::segmentName(r.ctx.key, 0, 1)) &&
                     has(left, shm::segmentName(r.ctx.key, 1, 1)),
                 "left: %s", join(left).c_str());
      }
      TP_CHECK(r.barrier(), "barrier");
      r.transport.reset();
      TP_CHECK(r.barrier(), "barrier");
      TP_CHECK(segments(r.ctx).empty(), "left: %s", join(segments(r.ctx)).c_str());
      return "";
    }));
  }
}

TEST_CASE("shm: a peer dying during connect is reported at once", "[transport][shm][processes]") {
  GroupSpec s = groupSpec(Kind::Shm, Mode::Procs);
  s.mayDieBySigkill = 1;
  expectPass(runGroup(s, [](Rank& r) -> std::string {
    r.transport = makeTransport(r.kind, r.ctx);
    std::string blob;
    TP_OK(r.transport->localAddress(&blob));
    std::vector<std::string> blobs;
    TP_CHECK(r.allgather(blob, &blobs), "exchange");
    if (r.rank == 1) raise(SIGKILL);
    double t0 = nowSeconds();
    Status st = r.transport->connect({1}, blobs, &r.eps);
    TP_CHECK(st.code() == WEFT_ERR_REMOTE || st.code() == WEFT_ERR_TIMEOUT, "got %d: %s",
             static_cast<int>(st.code()), st.message().c_str());
    TP_CHECK(contains(st.message(), "rank 1"), "%s", st.message().c_str());
    TP_CHECK(nowSeconds() - t0 < 5, "took %.1f s", nowSeconds() - t0);
    // The dead rank's own FIFO (0 -> 1) and arena block are its to unlink;
    // clean up after it.
    shm_unlink(shm::segmentName(r.ctx.key, 0, 1).c_str());
    shm_unlink(shm::segmentName(r.ctx.key, 1, 1).c_str());
    r.transport.reset();
    TP_CHECK(segments(r.ctx).empty(), "left: %s", join(segments(r.ctx)).c_str());
    return "";
  }));
}

TEST_CASE("shm: the sender of a mismatched message learns of it", "[transport][shm]") {
  expectPass(runGroup(groupSpec(Kind::Shm, Mode::Threads), [](Rank& r) -> std::string {
    TP_OK(r.setup());
    std::vector<int> none;
    if (r.rank == 0) {
      Buffer big(32u << 20);  // more than the FIFO holds: the send waits for the receiver
      Completion c;
      Status st = r.ep(1).postSend(big.data(), big.len, 5, MemType::Host, &c);
      if (!st.isError()) st = r.drive({&c}, 10, &none);
      TP_CHECK(st.code() == WEFT_ERR_INVALID_USAGE, "got %d: %s", static_cast<int>(st.code()),
               st.message().c_str());
      TP_CHECK(contains(st.message(), "rank 1") && contains(st.message(), "mismatched"), "%s",
               st.message().c_str());
    } else {
      char small[100];
      Completion c;
      Status st = r.ep(0).postRecv(small, sizeof small, 5, MemType::Host, &c);
      if (!st.isError()) st = r.drive({&c}, 10, &none);
      TP_CHECK(st.code() == WEFT_ERR_INVALID_USAGE, "got %d: %s", static_cast<int>(st.code()),
               st.message().c_str());
    }
    TP_CHECK(r.barrier(), "barrier");
    return "";
  }));
}
