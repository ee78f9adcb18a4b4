#include "transport/harness.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "core/clock.h"
#include "fork_guard.h"

namespace weft {
namespace tpt {

const char* kindName(Kind k) {
  switch (k) {
    case Kind::Self:
      return "self";
    case Kind::Shm:
      return "shm";
    case Kind::Tcp:
      return "tcp";
    case Kind::CudaIpc:
      return "cuda_ipc";
    case Kind::UcxTcp:
      return "ucx(UCX_TLS=tcp)";
    case Kind::UcxSm:
      return "ucx(UCX_TLS=sm)";
    case Kind::Ibverbs:
      return "ibverbs";
  }
  return "?";
}

const char* modeName(Mode m) { return m == Mode::Threads ? "threads" : "processes"; }

std::unique_ptr<Transport> makeTransport(Kind k, const TransportContext& ctx) {
  switch (k) {
    case Kind::Self:
      return makeSelfTransport(ctx);
    case Kind::Shm:
      return makeShmTransport(ctx);
    case Kind::Tcp:
      return makeTcpTransport(ctx);
    case Kind::CudaIpc:
      return makeCudaIpcTransport(ctx);
    case Kind::UcxTcp:
    case Kind::UcxSm:
#ifdef WEFT_HAVE_UCX
      return makeUcxTransport(ctx);
#else
      return nullptr;
#endif
    case Kind::Ibverbs:
#ifdef WEFT_HAVE_IBVERBS
      return makeIbverbsTransport(ctx);
#else
      return nullptr;
#endif
  }
  return nullptr;
}

std::string ibverbsUnavailable() {
#ifdef WEFT_HAVE_IBVERBS
  if (ibverbsDeviceCount() == 0) return "ibv_get_device_list found no RDMA device";
  return "";
#else
  return "the ibverbs transport is not built (rdma-core not found)";
#endif
}

bool built(Kind k) {
  if (k == Kind::Ibverbs) return ibverbsUnavailable().empty();
#ifdef WEFT_HAVE_UCX
  return true;
#else
  return k != Kind::UcxTcp && k != Kind::UcxSm;
#endif
}

std::vector<Kind> withOptional(std::vector<Kind> ks) {
  if (built(Kind::UcxTcp)) {
    ks.push_back(Kind::UcxTcp);
    ks.push_back(Kind::UcxSm);
  }
  if (built(Kind::Ibverbs)) ks.push_back(Kind::Ibverbs);
  return ks;
}

namespace {

// Sets UCX_TLS for the ranks of a ucx group (threads read it at ucp_init,
// children inherit it) and puts the old value back afterwards.
class UcxTlsScope {
 public:
  explicit UcxTlsScope(Kind k) {
    if (k != Kind::UcxTcp && k != Kind::UcxSm) return;
    active_ = true;
    const char* old = getenv("UCX_TLS");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("UCX_TLS", k == Kind::UcxTcp ? "tcp" : "sm", 1);
  }
  ~UcxTlsScope() {
    if (!active_) return;
    if (had_)
      setenv("UCX_TLS", old_.c_str(), 1);
    else
      unsetenv("UCX_TLS");
  }

 private:
  bool active_ = false, had_ = false;
  std::string old_;
};

}  // namespace

Config GroupSpec::defaultConfig() {
  Config c;
  c.bootstrapTimeoutS = 15;
  c.socketIfname = "lo";  // deterministic in CI; the transport does not care
  return c;
}

GroupSpec groupSpec(Kind k, Mode m, int nranks) {
  GroupSpec s;
  s.kind = k;
  s.mode = m;
  s.nranks = k == Kind::Self ? 1 : nranks;
  return s;
}

void expectPass(const std::vector<std::string>& failures) {
  std::string all;
  for (auto& f : failures) all += f + "\n";
  INFO(all);
  CHECK(failures.empty());
}

std::string mismatchProblem(const Status& st, int peer, uint64_t sendTag, size_t sendLen,
                            uint64_t recvTag, size_t recvLen) {
  const std::string& m = st.message();
  if (st.code() != WEFT_ERR_INVALID_USAGE)
    return strFormat("got code %d: %s", static_cast<int>(st.code()), m.c_str());
  if (!contains(m, strFormat("rank %d", peer))) return "peer not named: " + m;
  if (!contains(m, strFormat("0x%llx", static_cast<unsigned long long>(sendTag))) ||
      !contains(m, strFormat("0x%llx", static_cast<unsigned long long>(recvTag))))
    return "tags not named: " + m;
  if (!contains(m, strFormat("%zu bytes", sendLen)) ||
      !contains(m, strFormat("%zu bytes", recvLen)))
    return "lengths not named: " + m;
  return "";
}

uint64_t seedOf(int src, int dst, uint64_t i) {
  return (static_cast<uint64_t>(src) << 48) ^ (static_cast<uint64_t>(dst) << 32) ^ i;
}

bool contains(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

uint64_t randomU64() {
  static std::mutex mu;
  static std::mt19937_64 gen(std::random_device{}() ^ nowNs());
  std::lock_guard<std::mutex> lk(mu);
  return gen();
}

namespace {

uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void fillPattern(void* buf, size_t len, uint64_t seed) {
  char* p = static_cast<char*>(buf);
  uint64_t s = mix(seed + 0x9e3779b97f4a7c15ull);
  size_t words = len / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t v = s + i * 0x9e3779b97f4a7c15ull;
    v ^= v >> 29;
    memcpy(p + i * 8, &v, 8);
  }
  for (size_t i = words * 8; i < len; ++i) p[i] = static_cast<char>(s >> (i % 8 * 8)) ^ 0x5a;
}

size_t checkPattern(const void* buf, size_t len, uint64_t seed) {
  const char* p = static_cast<const char*>(buf);
  uint64_t s = mix(seed + 0x9e3779b97f4a7c15ull);
  size_t words = len / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t v = s + i * 0x9e3779b97f4a7c15ull;
    v ^= v >> 29;
    if (memcmp(p + i * 8, &v, 8) != 0) {
      for (size_t b = 0; b < 8; ++b)
        if (p[i * 8 + b] != reinterpret_cast<const char*>(&v)[b]) return i * 8 + b;
    }
  }
  for (size_t i = words * 8; i < len; ++i)
    if (p[i] != (static_cast<char>(s >> (i % 8 * 8)) ^ 0x5a)) return i;
  return len;
}

std::vector<int> Rank::peers() const {
  std::vector<int> out;
  if (kind == Kind::Self) {
    out.push_back(rank);
  } else {
    for (int p = 0; p < nranks; ++p)
      if (p != rank) out.push_back(p);
  }
  return out;
}

bool Rank::allgather(const std::string& mine, std::vector<std::string>* all) {
  return exchange(mine, all);
}

bool Rank::barrier() {
  std::vector<std::string> ignored;
  return exchange("", &ignored);
}

Status Rank::setup(const std::function<void(const std::string&)>& beforeExchange) {
  transport = makeTransport(kind, ctx);
  if (!transport) return Status(WEFT_ERR_INVALID_USAGE, "transport not built");
  std::string blob;
  WEFT_RETURN_IF_ERROR(transport->localAddress(&blob));
  if (beforeExchange) beforeExchange(blob);
  std::vector<std::string> blobs;
  if (!allgather(blob, &blobs)) return Status(WEFT_ERR_REMOTE, "test exchange of blobs failed");
  return transport->connect(peers(), blobs, &eps);
}

Status Rank::drive(const std::vector<Completion*>& cs, double timeoutS,
                   const std::vector<int>* checkRanks) {
  std::vector<int> check = checkRanks ? *checkRanks : peers();
  Deadline dl(timeoutS);
  size_t lastDone = 0;
  uint64_t lastChange = nowNs();
  uint64_t nextCheck = 0;
  for (;;) {
    Status st = transport->progress();
    if (st.isError()) return st;
    size_t done = 0;
    for (Completion* c : cs) done += c->done;
    if (done == cs.size()) break;
    uint64_t now = nowNs();
    bool changed = done != lastDone;
    if (changed) {
      lastDone = done;
      lastChange = now;
    } else if (now - lastChange > 100000000ull && now >= nextCheck) {
      for (int p : check) WEFT_RETURN_IF_ERROR(transport->checkPeer(p));
      nextCheck = now + 100000000ull;
    }
    if (dl.expired())
      return Status(WEFT_ERR_TIMEOUT, strFormat("test drive: %zu of %zu completions still pending "
                                                "after %.1f s",
                                                cs.size() - done, cs.size(), timeoutS));
    if (!changed) sched_yield();
  }
  for (Completion* c : cs)
    if (!c->status.isOk()) return c->status;
  return Status::ok();
}

// ---- threads ---------------------------------------------------------------

namespace {

struct ThreadGroup {
  std::mutex mu;
  std::condition_variable cv;
  int n = 0;
  int arrived = 0;
  uint64_t gen = 0;
  bool broken = false;
  std::vector<std::string> contrib, result;
  uint64_t deadlineNs = 0;

  bool exchange(int rank, const std::string& mine, std::vector<std::string>* out) {
    std::unique_lock<std::mutex> lk(mu);
    if (broken) return false;
    contrib[rank] = mine;
    if (++arrived == n) {
      result = contrib;
      arrived = 0;
      ++gen;
      cv.notify_all();
      *out = result;
      return true;
    }
    uint64_t g = gen;
    while (gen == g && !broken) {
      uint64_t now = nowNs();
      if (now >= deadlineNs) {
        broken = true;
        cv.notify_all();
        return false;
      }
      cv.wait_for(lk, std::chrono::nanoseconds(deadlineNs - now));
    }
    if (gen == g) return false;
    *out = result;
    return true;
  }
  void breakGroup() {
    std::lock_guard<std::mutex> lk(mu);
    broken = true;
    cv.notify_all();
  }
};

void initRank(Rank& r, const GroupSpec& spec, int rank, uint64_t secret, uint64_t commId,
              const std::vector<int>& pids) {
  r.rank = rank;
  r.nranks = spec.nranks;
  r.kind = spec.kind;
  r.mode = spec.mode;
  r.ctx.rank = rank;
  r.ctx.nranks = spec.nranks;
  r.ctx.key = jobKey(secret);
  r.ctx.commId = commId;
  r.ctx.config = spec.config;
  r.ctx.peers.resize(spec.nranks);
  for (int p = 0; p < spec.nranks; ++p) {
    r.ctx.peers[p].rank = p;
    r.ctx.peers[p].hostHash = kTestHostHash;
    r.ctx.peers[p].pid = pids[p];
    r.ctx.peers[p].hostname = "testhost";
  }
}

std::string runBody(const Body& body, Rank& r) {
  try {
    return body(r);
  } catch (const std::exception& e) {
    return std::string("exception: ") + e.what();
  }
}

std::vector<std::string> runThreads(const GroupSpec& spec, const Body& body, uint64_t secret,
                                    uint64_t commId) {
  ThreadGroup g;
  g.n = spec.nranks;
  g.contrib.resize(spec.nranks);
  g.deadlineNs = nowNs() + static_cast<uint64_t>(spec.timeoutS * 1e9);
  std::vector<std::string> results(spec.nranks);
  std::vector<int> pids(spec.nranks, getpid());
  std::vector<std::thread> threads;
  for (int i = 0; i < spec.nranks; ++i) {
    threads.emplace_back([&, i] {
      Rank r;
      initRank(r, spec, i, secret, commId, pids);
      r.exchange = [&g, i](const std::string& m, std::vector<std::string>* out) {
        return g.exchange(i, m, out);
      };
      results[i] = runBody(body, r);
      if (!results[i].empty()) g.breakGroup();
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

// ---- processes -------------------------------------------------------------
// Frames on the pipes: type byte ('A' allgather contribution / result of an
// allgather, 'R' the body's result), u32 length, payload.

bool writeAll(int fd, const void* buf, size_t len) {
  const char* p = static_cast<const char*>(buf);
  while (len) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool readAll(int fd, void* buf, size_t len, const Deadline& dl) {
  char* p = static_cast<char*>(buf);
  while (len) {
    pollfd pf{fd, POLLIN, 0};
    int rc = poll(&pf, 1, dl.remainingMs());
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return false;
    ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool writeFrame(int fd, char type, const std::string& payload) {
  uint32_t len = static_cast<uint32_t>(payload.size());
  return writeAll(fd, &type, 1) && writeAll(fd, &len, 4) && writeAll(fd, payload.data(), len);
}

bool readFrame(int fd, char* type, std::string* payload, const Deadline& dl) {
  uint32_t len = 0;
  if (!readAll(fd, type, 1, dl) || !readAll(fd, &len, 4, dl)) return false;
  payload->resize(len);
  return readAll(fd, payload->data(), len, dl);
}

std::string pack(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) {
    uint32_t len = static_cast<uint32_t>(s.size());
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += s;
  }
  return out;
}

std::vector<std::string> unpack(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos + 4 <= s.size()) {
    uint32_t len;
    memcpy(&len, s.data() + pos, 4);
    out.push_back(s.substr(pos + 4, len));
    pos += 4 + len;
  }
  return out;
}

[[noreturn]] void childMain(const GroupSpec& spec, const Body& body, int i, int up, int down,
                            uint64_t secret, uint64_t commId) {
  Deadline dl(spec.timeoutS);
  auto exchange = [&](const std::string& m, std::vector<std::string>* out) {
    char type;
    std::string payload;
    if (!writeFrame(up, 'A', m) || !readFrame(down, &type, &payload, dl) || type != 'A')
      return false;
    *out = unpack(payload);
    return true;
  };
  std::string result;
  std::vector<std::string> pidStrs;
  if (!exchange(std::to_string(getpid()), &pidStrs) ||
      pidStrs.size() != static_cast<size_t>(spec.nranks)) {
    result = "pid exchange failed";
  } else {
    std::vector<int> pids;
    for (auto& s : pidStrs) pids.push_back(atoi(s.c_str()));
    Rank r;
    initRank(r, spec, i, secret, commId, pids);
    r.exchange = exchange;
    result = runBody(body, r);
  }  // r (and its transport) is destroyed before the result goes out
  writeFrame(up, 'R', result);
  _exit(0);
}

std::vector<std::string> runProcs(const GroupSpec& spec, const Body& body, uint64_t secret,
                                  uint64_t commId) {
  const int n = spec.nranks;
  std::vector<int> up(n, -1), down(n, -1), pids(n, -1);
  std::vector<std::string> results(n);
  if (wtest::forkSkipped()) return results;
  std::string unsafe = wtest::awaitOneThread();  // fork with one thread only
  if (!unsafe.empty()) {
    results.assign(n, unsafe);
    return results;
  }
  for (int i = 0; i < n; ++i) {
    int u[2], d[2];
    if (pipe2(u, O_CLOEXEC) != 0 || pipe2(d, O_CLOEXEC) != 0) {
      results[i] = "pipe failed";
      return results;
    }
    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      close(u[0]);
      close(d[1]);
      for (int j = 0; j < i; ++j) {
        close(up[j]);
        close(down[j]);
      }
      childMain(spec, body, i, u[1], d[0], secret, commId);
    }
    close(u[1]);
    close(d[0]);
    up[i] = u[0];
    down[i] = d[1];
    pids[i] = pid;
  }
  // Relay allgathers until every child reported (or died, or time ran out).
  Deadline dl(spec.timeoutS + 5);
  std::vector<bool> finished(n, false), waiting(n, false);
  std::vector<std::string> contrib(n);
  int open = n;
  while (open > 0 && !dl.expired()) {
    std::vector<pollfd> pf;
    std::vector<int> who;
    for (int i = 0; i < n; ++i)
      if (!finished[i] && !waiting[i]) {
        pf.push_back({up[i], POLLIN, 0});
        who.push_back(i);
      }
    if (pf.empty()) break;
    int rc = poll(pf.data(), pf.size(), std::min(dl.remainingMs(), 200));
    if (rc < 0 && errno != EINTR) break;
    for (size_t k = 0; k < pf.size() && rc > 0; ++k) {
      if (!pf[k].revents) continue;
      int i = who[k];
      char type = 0;
      std::string payload;
      if (!readFrame(up[i], &type, &payload, Deadline(5))) {
        finished[i] = true;  // died without a result
        results[i] = "\x01";
        --open;
      } else if (type == 'R') {
        finished[i] = true;
        results[i] = payload;
        --open;
      } else {
        waiting[i] = true;
        contrib[i] = payload;
      }
    }
    bool all = true, anyWaiting = false, anyGone = false;
    for (int i = 0; i < n; ++i) {
      all = all && waiting[i];
      anyWaiting = anyWaiting || waiting[i];
      anyGone = anyGone || finished[i];
    }
    if (all) {
      std::string packed = pack(contrib);
      for (int i = 0; i < n; ++i) {
        writeFrame(down[i], 'A', packed);
        waiting[i] = false;
      }
    } else if (anyWaiting && anyGone) {
      // This allgather can never complete: release the waiters (EOF).
      for (int i = 0; i < n; ++i)
        if (waiting[i]) {
          close(down[i]);
          down[i] = -1;
          waiting[i] = false;
        }
    }
  }
  for (int i = 0; i < n; ++i) {
    if (down[i] >= 0) close(down[i]);
    close(up[i]);
  }
  // Reap: children that did not finish in time are killed.
  for (int i = 0; i < n; ++i) {
    int status = 0;
    Deadline reap(finished[i] ? 10 : 0);
    pid_t rc;
    while ((rc = waitpid(pids[i], &status, WNOHANG)) == 0 && !reap.expired()) usleep(1000);
    if (rc == 0) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], &status, 0);
      results[i] = "did not finish within the group timeout (killed)";
      continue;
    }
    if (results[i] == "\x01") {
      if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && i == spec.mayDieBySigkill)
        results[i].clear();
      else if (WIFSIGNALED(status))
        results[i] = strFormat("process died by signal %d", WTERMSIG(status));
      else
        results[i] = strFormat("process exited (%d) without a result", WEXITSTATUS(status));
    }
  }
  return results;
}

}  // namespace

std::vector<std::string> runGroup(const GroupSpec& spec, const Body& body) {
  uint64_t secret = randomU64();
  uint64_t commId = randomU64();
  UcxTlsScope tls(spec.kind);
  std::vector<std::string> results = spec.mode == Mode::Threads
                                         ? runThreads(spec, body, secret, commId)
                                         : runProcs(spec, body, secret, commId);
  std::vector<std::string> failures;
  for (int i = 0; i < spec.nranks; ++i)
    if (!results[i].empty())
      failures.push_back(strFormat("%s/%s rank %d: %s", kindName(spec.kind), modeName(spec.mode), i,
                                   results[i].c_str()));
  return failures;
}

}  // namespace tpt
}  // namespace weft
