// weft-soak: random collectives under random faults, for a bounded time,
// ranks as processes (docs/fault-injection.md).
//
//   weft-soak --transport shm|tcp|ucx [--np N] [--seconds S] [--seed X] [--timeout T]
//
// Each round makes a communicator with the WEFT_TIMEOUT_S of T seconds and
// a fault of soak_plan.h on one rank: a transport fault (WEFT_TEST_FAULTS:
// delay, short reads and writes, a dropped connection, a corrupt header),
// or a stall (this process SIGSTOPs the rank for a third of T, or for 1.5 T)
// — then runs a few random collectives and a barrier, destroys it, and the
// ranks compare notes over a second communicator that has no faults.
// Asserted, every round:
//   - no rank ever gets a wrong result;
//   - after a benign fault (a delay, short reads and writes, a stall
//     shorter than T) every op completes on every rank;
//   - an op that fails on one rank fails on every rank: at that op, or at a
//     later one for a rank whose part in it was done before the fault (the
//     round's final barrier needs every rank; a fault in the barrier itself
//     excepted);
//   - every op and every destroy ends within its bound (2 T + the stall + 5 s);
// and at the end: no rank holds more descriptors or threads than after the
// first (clean) round, nor much more memory; /dev/shm holds no more weft
// segments than before; and a fault that must fail did fail some rounds.
// Exit status 0 when all holds.
#include <dirent.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "fork_guard.h"
#include "soak/soak_ops.h"
#include "soak/soak_plan.h"
#include "weft.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxRanks = 8;
constexpr int kMaxOps = 8;
constexpr size_t kErrBytes = 200;

// Shared with the parent (an anonymous shared mapping made before the
// fork): a rank that stops itself (stall faults) asks to be continued.
struct StopBox {
  std::atomic<uint32_t> seq[kMaxRanks];
  std::atomic<int32_t> ms[kMaxRanks];
  std::atomic<uint32_t> served[kMaxRanks];  // the last seq stopped and continued
};

struct Args {
  std::string transport = "shm";
  int np = 3;
  double seconds = 20;
  uint64_t seed = 1;
  double timeoutS = 3;
};

// What one rank reports about one round (allgathered as int32 words).
struct RoundReport {
  int32_t outcome[kMaxOps];
  int32_t ms[kMaxOps];
  int32_t destroyMs;
  int32_t initFailed;
  char error[kErrBytes];  // the first failure or wrong result
  int32_t errorOp;
};
static_assert(sizeof(RoundReport) % 4 == 0, "int32 words");

int countEntries(const char* dir, const char* prefix) {
  DIR* d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) ++n;
  closedir(d);
  return n;
}

long rssKb() {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  long kb = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
  fclose(f);
  return kb;
}

// Waits (up to `seconds`) until process `pid` is stopped (/proc's state T).
void waitStopped(pid_t pid, double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  while (Clock::now() < end) {
    FILE* f = fopen(path.c_str(), "r");
    if (!f) return;
    char buf[512] = {};
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    const char* close = strrchr(buf, ')');  // after the command name
    if (n && close && close[1] == ' ' && (close[2] == 'T' || close[2] == 't')) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Rank 0 checks a round's reports; returns the violations ("" if none).
std::string checkRound(const soak::RoundPlan& p, const std::vector<RoundReport>& rep, int n,
                       double timeoutS, int round) {
  std::string bad;
  auto say = [&](const std::string& s) {
    bad += "round " + std::to_string(round) + " (" + soak::faultName(p.fault) + " on rank " +
           std::to_string(p.faultRank) + (p.spec.empty() ? "" : " " + p.spec) + "): " + s + "\n";
  };
  const int nops = static_cast<int>(p.ops.size());
  const double boundMs = 2 * timeoutS * 1000 + p.stallMs + 5000;
  for (int r = 0; r < n; ++r) {
    if (rep[r].initFailed) say("rank " + std::to_string(r) + ": init failed: " + rep[r].error);
    if (rep[r].destroyMs > boundMs)
      say("rank " + std::to_string(r) + ": destroy took " + std::to_string(rep[r].destroyMs) + " ms");
  }
  for (int k = 0; k < nops; ++k) {
    for (int r = 0; r < n; ++r) {
      const auto o = static_cast<soak::Outcome>(rep[r].outcome[k]);
      const std::string who = "rank " + std::to_string(r) + " op " + std::to_string(k) + " (" +
                              soak::collName(p.ops[k].coll) + " of " +
                              std::to_string(p.ops[k].count) + ")";
      if (o == soak::Outcome::Wrong) say(who + ": WRONG RESULT: " + rep[r].error);
      if (rep[r].ms[k] > boundMs)
        say(who + ": took " + std::to_string(rep[r].ms[k]) + " ms, bound " +
            std::to_string(static_cast<int>(boundMs)));
      if (o == soak::Outcome::Failed && soak::benign(p.fault))
        say(who + ": failed after a benign fault: " + rep[r].error);
    }
  }
  // Failed somewhere before the final barrier: failed everywhere, at that
  // op or at a later one (a rank whose part was done, its sends buffered,
  // goes on until an op needs what a failed rank would have sent; the final
  // barrier needs every rank).
  int first = nops;
  for (int r = 0; r < n; ++r)
    if (rep[r].errorOp >= 0 && rep[r].errorOp < first) first = rep[r].errorOp;
  if (first < nops - 1)
    for (int r = 0; r < n; ++r)
      if (rep[r].errorOp < 0 && !rep[r].initFailed)
        say("op " + std::to_string(first) + " (" + soak::collName(p.ops[first].coll) +
            ") failed on some rank, but rank " + std::to_string(r) + " completed every op");
  return bad;
}

int child(const Args& a, int rank, int idFd, StopBox* box) {
  weft_unique_id_t ctlId;
  if (read(idFd, &ctlId, sizeof ctlId) != static_cast<ssize_t>(sizeof ctlId)) return 2;
  close(idFd);
  const int n = a.np;
  weft_config_t ctlCfg = WEFT_CONFIG_INITIALIZER;
  ctlCfg.timeout_s = 120;
  weft_comm_t ctl;
  weft_result_t r = weft_comm_init_rank_config(&ctl, n, ctlId, rank, &ctlCfg);
  if (r != WEFT_SUCCESS) {
    fprintf(stderr, "rank %d: control comm: %s\n", rank, weft_get_last_error(nullptr));
    return 2;
  }
  const bool shortOk = a.transport == "tcp";
  const auto end = Clock::now() + std::chrono::duration<double>(a.seconds);
  int fdsBase = 0, threadsBase = 0;
  [[maybe_unused]] long rssBase = 0;
  int failedRounds = 0, mustFailRounds = 0, failedMustFail = 0, rounds = 0, violations = 0;
  int counts[7] = {};
  for (int round = 0;; ++round) {
    // Rank 0 says whether to go on, and hands out the round's unique id.
    struct {
      int32_t go;
      weft_unique_id_t id;
    } msg{};
    if (rank == 0) {
      msg.go = Clock::now() < end || round < 2;
      if (msg.go && weft_get_unique_id(&msg.id) != WEFT_SUCCESS) msg.go = 0;
    }
    if (weft_broadcast(&msg, &msg, sizeof msg, WEFT_UINT8, 0, ctl, nullptr) != WEFT_SUCCESS) {
      fprintf(stderr, "rank %d: control broadcast: %s\n", rank, weft_get_last_error(ctl));
      return 2;
    }
    if (!msg.go) break;
    const soak::RoundPlan p = soak::makePlan(a.seed, round, n, shortOk, a.timeoutS);
    RoundReport rep{};
    for (int k = 0; k < kMaxOps; ++k) rep.outcome[k] = static_cast<int32_t>(soak::Outcome::NotRun);
    rep.errorOp = -1;
    const bool faulty = rank == p.faultRank;
    if (faulty && !p.spec.empty()) setenv("WEFT_TEST_FAULTS", p.spec.c_str(), 1);
    weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
    cfg.timeout_s = a.timeoutS;
    cfg.bootstrap_timeout_s = 60;
    weft_comm_t comm = nullptr;
    r = weft_comm_init_rank_config(&comm, n, msg.id, rank, &cfg);
    unsetenv("WEFT_TEST_FAULTS");
    if (r != WEFT_SUCCESS) {
      rep.initFailed = 1;
      snprintf(rep.error, kErrBytes, "%s", weft_get_last_error(nullptr));
    } else {
      for (size_t k = 0; k < p.ops.size(); ++k) {
        if (faulty && p.stallMs && static_cast<int>(k) == p.stallOp) {
          box->ms[rank].store(p.stallMs);
          box->seq[rank].fetch_add(1);
          raise(SIGSTOP);  // the driver continues it after stallMs
        }
        const auto t0 = Clock::now();
        soak::OpResult res = soak::runOp(p.ops[k], comm, rank, n);
        rep.ms[k] = static_cast<int32_t>(msSince(t0));
        rep.outcome[k] = static_cast<int32_t>(res.outcome);
        if (res.outcome != soak::Outcome::Ok && rep.errorOp < 0) {
          rep.errorOp = static_cast<int32_t>(k);
          snprintf(rep.error, kErrBytes, "%s", res.error.c_str());
        }
        if (res.outcome != soak::Outcome::Ok) break;  // the comm is done for
      }
      // The stall belongs to this round: wait until it happened (after the
      // ops, when they were quicker than its delay).
      if (faulty && p.stallMs) {
        const auto limit = Clock::now() + std::chrono::milliseconds(p.stallMs + 10000);
        while (box->served[rank].load() != box->seq[rank].load() && Clock::now() < limit)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      const auto t0 = Clock::now();
      weft_comm_destroy(comm);
      rep.destroyMs = static_cast<int32_t>(msSince(t0));
    }
    // Compare notes.
    std::vector<RoundReport> all(n);
    if (weft_allgather(&rep, all.data(), sizeof rep / 4, WEFT_INT32, ctl, nullptr) !=
        WEFT_SUCCESS) {
      fprintf(stderr, "rank %d: control allgather: %s\n", rank, weft_get_last_error(ctl));
      return 2;
    }
    ++rounds;
    ++counts[static_cast<int>(p.fault)];
    bool failed = false;
    for (int q = 0; q < n; ++q) failed |= all[q].errorOp >= 0 || all[q].initFailed;
    failedRounds += failed;
    if (!soak::benign(p.fault)) {
      ++mustFailRounds;
      failedMustFail += failed;
    }
    if (rank == 0) {
      const std::string bad = checkRound(p, all, n, a.timeoutS, round);
      if (!bad.empty()) {
        ++violations;
        fprintf(stderr, "%s", bad.c_str());
      }
      if (getenv("WEFT_SOAK_VERBOSE"))
        fprintf(stderr, "round %d: %s on rank %d %s: %zu ops, %s (%s)\n", round,
                soak::faultName(p.fault), p.faultRank, p.spec.c_str(), p.ops.size(),
                failed ? "failed" : "completed", failed ? all[p.faultRank].error : "");
    }
    if (round == 0) {
      fdsBase = countEntries("/proc/self/fd", "");
      threadsBase = wtest::threadCount();
      rssBase = rssKb();
    }
  }
  // Resources, after every round's communicator is gone.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int fds = countEntries("/proc/self/fd", ""), threads = wtest::threadCount();
  [[maybe_unused]] const long rss = rssKb();
  int leaks = 0;
  if (fds > fdsBase) {
    fprintf(stderr, "rank %d: %d descriptors open, %d after the first round\n", rank, fds, fdsBase);
    ++leaks;
  }
  if (threads > threadsBase) {
    fprintf(stderr, "rank %d: %d threads, %d after the first round\n", rank, threads, threadsBase);
    ++leaks;
  }
#if !defined(WEFT_ASAN)
  if (rss - rssBase > 64 * 1024) {
    fprintf(stderr, "rank %d: RSS grew by %ld MiB\n", rank, (rss - rssBase) / 1024);
    ++leaks;
  }
#endif
  weft_comm_destroy(ctl);
  if (rank == 0) {
    printf("weft-soak %s np=%d seed=%llu: %d rounds (", a.transport.c_str(), n,
           static_cast<unsigned long long>(a.seed), rounds);
    for (int f = 0; f < 7; ++f)
      printf("%s%s %d", f ? ", " : "", soak::faultName(static_cast<soak::Fault>(f)), counts[f]);
    printf("); %d failed (%d of %d with a fault that must fail); %d rounds broke a rule\n",
           failedRounds, failedMustFail, mustFailRounds, violations);
    if (mustFailRounds >= 3 && failedMustFail == 0) {
      fprintf(stderr, "no fault that must fail did: the faults were not injected\n");
      ++violations;
    }
  }
  return violations || leaks ? 1 : 0;
}

bool parseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (k == "--transport") a->transport = v;
    else if (k == "--np") a->np = atoi(v);
    else if (k == "--seconds") a->seconds = atof(v);
    else if (k == "--seed") a->seed = strtoull(v, nullptr, 10);
    else if (k == "--timeout") a->timeoutS = atof(v);
    else return false;
  }
  return a->np >= 2 && a->np <= kMaxRanks && a->seconds > 0 && a->timeoutS > 0 &&
         (a->transport == "shm" || a->transport == "tcp" || a->transport == "ucx");
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parseArgs(argc, argv, &a)) {
    fprintf(stderr,
            "usage: weft-soak --transport shm|tcp|ucx [--np 2..8] [--seconds S] [--seed X] "
            "[--timeout T]\n");
    return 2;
  }
  if (!strstr(weft_get_build_info(), "test_hooks=yes")) {
    printf("SKIP: this libweft was built without test hooks (-DWEFT_TEST_HOOKS=ON)\n");
    return 77;
  }
  if (a.transport == "ucx" && !strstr(weft_get_build_info(), ",ucx")) {
    printf("SKIP: this libweft has no ucx transport\n");
    return 77;
  }
  setenv("WEFT_TRANSPORTS", a.transport.c_str(), 1);
  const int shmBefore = countEntries("/dev/shm", "weft-");
  auto* box = static_cast<StopBox*>(mmap(nullptr, sizeof(StopBox), PROT_READ | PROT_WRITE,
                                         MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (box == MAP_FAILED) return 2;
  new (box) StopBox();
  std::vector<pid_t> pids(a.np);
  std::vector<int> idFds(a.np);
  for (int i = 0; i < a.np; ++i) {
    int q[2];
    if (pipe(q) != 0) return 2;
    fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      close(q[1]);
      const int rc = child(a, i, q[0], box);
      fflush(nullptr);  // _exit does not
      _exit(rc);
    }
    close(q[0]);
    pids[i] = pid;
    idFds[i] = q[1];
  }
  weft_unique_id_t id;
  if (weft_get_unique_id(&id) != WEFT_SUCCESS) return 2;
  for (int i = 0; i < a.np; ++i) {
    if (write(idFds[i], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) return 2;
    close(idFds[i]);
  }
  // Serve stall requests until every rank has exited, within the bound.
  const auto deadline =
      Clock::now() + std::chrono::duration<double>(a.seconds + 120 + 4 * a.timeoutS);
  std::vector<uint32_t> served(a.np, 0);
  int left = a.np, worst = 0;
  while (left > 0) {
    for (int i = 0; i < a.np; ++i) {
      if (!pids[i]) continue;
      const uint32_t s = box->seq[i].load();
      if (s != served[i]) {
        served[i] = s;
        // The rank stops itself as it starts the op; its stall counts from then.
        waitStopped(pids[i], 5.0);
        std::this_thread::sleep_for(std::chrono::milliseconds(box->ms[i].load()));
        kill(pids[i], SIGCONT);
        box->served[i].store(s);
      }
      int st = 0;
      if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (code) fprintf(stderr, "rank %d exited with %d\n", i, code);
        worst = std::max(worst, code);
        pids[i] = 0;
        --left;
      }
    }
    if (Clock::now() > deadline) {
      fprintf(stderr, "weft-soak: ranks still running past the bound: a hang\n");
      for (pid_t p : pids)
        if (p) kill(p, SIGKILL);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // The parent's bootstrap root is done once every rank joined; segments
  // are unlinked by their ranks.
  const int shmAfter = countEntries("/dev/shm", "weft-");
  if (shmAfter > shmBefore) {
    fprintf(stderr, "/dev/shm: %d weft segments, %d before the soak\n", shmAfter, shmBefore);
    worst = std::max(worst, 1);
  }
  return worst;
}
