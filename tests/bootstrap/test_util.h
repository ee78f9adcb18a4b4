// Helpers shared by the bootstrap tests: configs, blobs, rank threads and
// rank processes.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "core/clock.h"
#include "core/config.h"
#include "fork_guard.h"
#include "net/socket.h"

namespace weft {
namespace test {

inline Config loConfig(double bootstrapTimeoutS = 20) {
  Config c;
  c.socketIfname = "lo";
  c.bootstrapTimeoutS = bootstrapTimeoutS;
  return c;
}

// A deterministic blob for (rank, round): lengths differ per rank and round,
// including empty ones and 1 MiB ones.
inline std::string blobFor(int rank, int round, int nranks) {
  size_t len;
  switch (round % 3) {
    case 0: len = 6 + static_cast<size_t>(rank); break;
    case 1: len = rank % 2 == 0 ? 0 : static_cast<size_t>(rank) * 1000 + 7; break;
    default: len = (rank == 0 || rank == nranks - 1) ? (1u << 20) : static_cast<size_t>(rank) * 37;
  }
  std::string s(len, '\0');
  for (size_t i = 0; i < len; ++i)
    s[i] = static_cast<char>((rank * 131 + round * 17 + static_cast<int>(i) * 7) & 0xff);
  return s;
}

// Rounds of allgather with blobFor, a barrier between them; "" on success,
// else what went wrong.
inline std::string exerciseRing(Bootstrap& b, int rounds = 3) {
  const int n = b.nranks();
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::string> all;
    Status st = b.allgather(blobFor(b.rank(), round, n), &all, 20);
    if (!st.isOk()) return "allgather: " + st.message();
    if (all.size() != static_cast<size_t>(n)) return "allgather: wrong result count";
    for (int j = 0; j < n; ++j)
      if (all[static_cast<size_t>(j)] != blobFor(j, round, n))
        return strFormat("round %d: blob of rank %d differs (%zu bytes)", round, j,
                         all[static_cast<size_t>(j)].size());
    st = b.barrier(20);
    if (!st.isOk()) return "barrier: " + st.message();
  }
  return "";
}

// Runs rank r of n (ids[r]) in thread r: create, then body. Returns one
// Status per rank (a failed body is reported as WEFT_ERR_INTERNAL).
using RankBody = std::function<std::string(Bootstrap&)>;
inline std::vector<Status> runRankThreads(const std::vector<weft_unique_id_t>& ids, int n,
                                          const Config& cfg, RankBody body) {
  std::vector<Status> out(static_cast<size_t>(n));
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) {
    ts.emplace_back([&, r] {
      std::unique_ptr<Bootstrap> b;
      Status st = Bootstrap::create(ids[static_cast<size_t>(r)], r, n, cfg, &b);
      if (st.isOk() && body) {
        std::string err = body(*b);
        if (!err.empty()) st = Status(WEFT_ERR_INTERNAL, err);
      }
      out[static_cast<size_t>(r)] = st;
    });
  }
  for (auto& t : ts) t.join();
  return out;
}

inline std::vector<Status> runRankThreads(const weft_unique_id_t& id, int n, const Config& cfg,
                                          RankBody body) {
  return runRankThreads(std::vector<weft_unique_id_t>(static_cast<size_t>(n), id), n, cfg,
                        body);
}

// Runs only `ranks` of an nranks-rank job, one thread each, with no body.
inline std::vector<Status> runSomeRankThreads(const weft_unique_id_t& id,
                                              const std::vector<int>& ranks, int nranks,
                                              const Config& cfg) {
  std::vector<Status> out(ranks.size());
  std::vector<std::thread> ts;
  for (size_t i = 0; i < ranks.size(); ++i) {
    ts.emplace_back([&, i] {
      std::unique_ptr<Bootstrap> b;
      out[i] = Bootstrap::create(id, ranks[i], nranks, cfg, &b);
    });
  }
  for (auto& t : ts) t.join();
  return out;
}

// Forks n children before the caller creates the unique id, hands them the
// id through a pipe, and collects their wait statuses (killing any child
// still alive after limitS). The child runs fn(rank, id) and _exits with its
// result (0 = success).
struct ProcResult {
  std::vector<int> status;  // waitpid status per rank, -1 if never reaped
};

inline ProcResult runRankProcesses(int n, const std::function<Status(weft_unique_id_t*)>& makeId,
                                   const std::function<int(int, const weft_unique_id_t&)>& fn,
                                   double limitS) {
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  if (wtest::forkSkipped()) return ProcResult{std::vector<int>(n, 0)};
  std::string unsafe = wtest::awaitOneThread();  // fork with one thread only
  if (!unsafe.empty()) {
    fprintf(stderr, "%s\n", unsafe.c_str());
    return ProcResult{std::vector<int>(n, -1)};
  }
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (pipe(p) != 0) break;
    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      close(p[1]);
      for (int fd : pipes) close(fd);
      alarm(static_cast<unsigned>(limitS) + 5);  // never outlive the test
      weft_unique_id_t id;
      size_t got = 0;
      Deadline dl(limitS);
      while (got < sizeof id) {
        pollfd pf{p[0], POLLIN, 0};
        if (poll(&pf, 1, dl.remainingMs()) <= 0) _exit(90);
        ssize_t k = read(p[0], reinterpret_cast<char*>(&id) + got, sizeof id - got);
        if (k <= 0) _exit(91);
        got += static_cast<size_t>(k);
      }
      close(p[0]);
      int rc = fn(r, id);
      fflush(nullptr);
      _exit(rc);
    }
    close(p[0]);
    pids.push_back(pid);
    pipes.push_back(p[1]);
  }
  weft_unique_id_t id;
  Status st = makeId(&id);
  for (int fd : pipes) {
    if (st.isOk()) {
      ssize_t k = write(fd, &id, sizeof id);
      (void)k;
    }
    close(fd);
  }
  ProcResult res;
  res.status.assign(static_cast<size_t>(n), -1);
  Deadline dl(limitS);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (res.status[i] != -1) continue;
      int ws = 0;
      if (waitpid(pids[i], &ws, WNOHANG) == pids[i]) {
        res.status[i] = ws;
        --left;
      }
    }
    if (left == 0) break;
    if (dl.expired()) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (res.status[i] == -1) {
          kill(pids[i], SIGKILL);
          int ws = 0;
          waitpid(pids[i], &ws, 0);
        }
      break;
    }
    usleep(2000);
  }
  return res;
}

inline std::string describeWait(int ws) {
  if (ws == -1) return "hung (killed by the test)";
  if (WIFEXITED(ws)) return "exit " + std::to_string(WEXITSTATUS(ws));
  if (WIFSIGNALED(ws)) return "signal " + std::to_string(WTERMSIG(ws));
  return "status " + std::to_string(ws);
}

inline net::Address rootOf(const weft_unique_id_t& id) {
  UniqueIdData d;
  decodeUniqueId(id, &d);
  net::Address a;
  net::Address::unpack(d.rootAddr, &a);
  return a;
}

inline uint64_t secretOf(const weft_unique_id_t& id) {
  UniqueIdData d;
  decodeUniqueId(id, &d);
  return d.secret;
}

// What a rank does by hand on a fresh connection `fd` to the root: reads the
// root's challenge (into *rootNonce when given) and returns a hello for
// `rank` of `nranks` at `ringAddr` whose MAC answers it under `secret`'s
// key. A failed read leaves a hello that answers nothing.
inline boot::RootHello helloFor(int fd, uint64_t secret, int rank, int nranks,
                                const char* ringAddr = "127.0.0.1:9", Nonce* rootNonce = nullptr,
                                Nonce* myNonce = nullptr) {
  boot::RootChallenge c{};
  net::recvAll(fd, &c, sizeof c, Deadline(5));
  boot::RootHello h{};
  h.magic = boot::kRootHelloMagic;
  h.version = boot::kWireVersion;
  for (size_t i = 0; i < kNonceBytes; ++i) h.nonce[i] = static_cast<uint8_t>(i * 37 + rank);
  h.rank = rank;
  h.nranks = nranks;
  net::Address a;
  net::Address::parse(ringAddr, &a);
  a.pack(h.addr);
  const Mac m = boot::rootHelloMac(jobKey(secret), c.nonce, h);
  memcpy(h.mac, m.data(), kMacBytes);
  if (rootNonce) memcpy(rootNonce->data(), c.nonce, kNonceBytes);
  if (myNonce) memcpy(myNonce->data(), h.nonce, kNonceBytes);
  return h;
}

}  // namespace test
}  // namespace weft
