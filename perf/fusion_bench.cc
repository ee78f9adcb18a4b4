// weft-fusion-bench: what tensor fusion (WEFT_FUSION_THRESHOLD,
// docs/performance.md "Tensor fusion") buys. Forks `ranks` processes on
// this host; each joins one communicator per mode and runs rounds of
// `calls` float32 sum allreduces of `bytes` each:
//
//   separate   the calls one after another, blocking (never fused)
//   group T    the calls in one group (weft_group_start / _end) on a comm
//              whose fusion threshold is T (0: fusion off)
//
// Modes take turns round by round (interleaved, so a noisy phase of the
// machine hits them all), each round after a barrier. Rank 0 prints each
// mode's median round time, the spread (min and max of the middle half, the
// quartiles) and the median's ratio to `separate`. Transports as the
// environment says (WEFT_TRANSPORTS=tcp WEFT_SOCKET_IFNAME=lo for tcp).
// Rank r is bound to core r mod cores, as weft-perf's -B 1 (unbound, the
// scheduler may keep two ranks that wait for each other on one core).
//
//   weft-fusion-bench [-n ranks] [-c calls] [-b bytes] [-r rounds] [-t T1,T2,...]
//   defaults: -n 2 -c 200 -b 4K -r 30 -t 0,default
//   T: a byte count (64K, 1M, ...), 0 (off) or "default" (WEFT_FUSION_THRESHOLD's)
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "weft.h"

namespace {

struct Options {
  int ranks = 2;
  int calls = 200;
  size_t bytes = 4096;
  int rounds = 30;
  std::vector<std::string> thresholds{"0", "default"};
};

bool parseSize(const char* s, size_t* out) {
  char* end = nullptr;
  const double v = strtod(s, &end);
  if (end == s || v < 0) return false;
  double mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1024;
  if (*end == 'M' || *end == 'm') mul = 1024 * 1024;
  if (*end == 'G' || *end == 'g') mul = 1024.0 * 1024 * 1024;
  *out = static_cast<size_t>(v * mul);
  return true;
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "-n") {
      o->ranks = atoi(v);
    } else if (k == "-c") {
      o->calls = atoi(v);
    } else if (k == "-b") {
      if (!parseSize(v, &o->bytes)) return false;
    } else if (k == "-r") {
      o->rounds = atoi(v);
    } else if (k == "-t") {
      o->thresholds.clear();
      std::string s = v;
      for (size_t at = 0; at <= s.size();) {
        size_t comma = s.find(',', at);
        if (comma == std::string::npos) comma = s.size();
        o->thresholds.push_back(s.substr(at, comma - at));
        at = comma + 1;
      }
    } else {
      return false;
    }
  }
  return (argc % 2) == 1 && o->ranks >= 1 && o->calls >= 1 && o->bytes >= 4 && o->rounds >= 1;
}

double nowUs() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

#define CHECK_WEFT(call)                                                               \
  do {                                                                                 \
    weft_result_t r_ = (call);                                                         \
    if (r_ != WEFT_SUCCESS) {                                                          \
      fprintf(stderr, "rank %d: %s: %s\n", rank, #call, weft_get_last_error(nullptr)); \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

// One rank: comms, rounds, and (rank 0) the report.
int runRank(const Options& o, const weft_unique_id_t* ids, int rank) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(rank % static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)), &set);
  sched_setaffinity(0, sizeof set, &set);
  const size_t modes = 1 + o.thresholds.size();
  std::vector<weft_comm_t> comms(modes);
  for (size_t m = 0; m < modes; ++m) {
    weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
    if (m > 0) {
      const std::string& t = o.thresholds[m - 1];
      size_t v = 0;
      if (t == "default") {
        cfg.fusion_threshold = 0;
      } else if (parseSize(t.c_str(), &v)) {
        cfg.fusion_threshold = v == 0 ? WEFT_FUSION_OFF : v;
      }
    }
    CHECK_WEFT(weft_comm_init_rank_config(&comms[m], o.ranks, ids[m], rank, &cfg));
  }
  const size_t count = o.bytes / 4;
  std::vector<std::vector<float>> bufs(o.calls, std::vector<float>(count, 1.0f));
  std::vector<std::vector<double>> times(modes);
  for (int round = -2; round < o.rounds; ++round) {  // two warm-up rounds
    for (size_t m = 0; m < modes; ++m) {
      weft_comm_t c = comms[m];
      CHECK_WEFT(weft_barrier(c, nullptr));
      const double t0 = nowUs();
      if (m == 0) {
        for (auto& b : bufs)
          CHECK_WEFT(weft_allreduce(b.data(), b.data(), count, WEFT_FLOAT32, WEFT_SUM, c, nullptr));
      } else {
        CHECK_WEFT(weft_group_start());
        for (auto& b : bufs)
          CHECK_WEFT(weft_allreduce(b.data(), b.data(), count, WEFT_FLOAT32, WEFT_SUM, c, nullptr));
        CHECK_WEFT(weft_group_end());
      }
      if (round >= 0) times[m].push_back(nowUs() - t0);
      // Keep the values small: the sums grow by a factor `ranks` per round.
      for (auto& b : bufs) std::fill(b.begin(), b.end(), 1.0f);
    }
  }
  if (rank == 0) {
    printf(
        "# weft-fusion-bench: %d ranks, %d allreduces of %zu bytes per round, %d rounds, "
        "WEFT_TRANSPORTS=%s\n",
        o.ranks, o.calls, o.bytes, o.rounds,
        getenv("WEFT_TRANSPORTS") ? getenv("WEFT_TRANSPORTS") : "(default)");
    printf("# %-16s %12s %12s %12s %10s\n", "mode", "median_us", "q1_us", "q3_us", "speedup");
    double sepMedian = 0;
    for (size_t m = 0; m < modes; ++m) {
      std::vector<double> t = times[m];
      std::sort(t.begin(), t.end());
      const double med = t[t.size() / 2], q1 = t[t.size() / 4], q3 = t[(t.size() * 3) / 4];
      if (m == 0) sepMedian = med;
      const std::string name = m == 0 ? "separate" : "group " + o.thresholds[m - 1];
      printf("  %-16s %12.1f %12.1f %12.1f %9.2fx\n", name.c_str(), med, q1, q3, sepMedian / med);
    }
    fflush(stdout);
  }
  for (weft_comm_t c : comms) CHECK_WEFT(weft_comm_destroy(c));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    fprintf(stderr, "usage: %s [-n ranks] [-c calls] [-b bytes] [-r rounds] [-t T1,T2,...]\n",
            argv[0]);
    return 2;
  }
  const int rank = -1;  // for CHECK_WEFT in the parent
  std::vector<weft_unique_id_t> ids(1 + o.thresholds.size());
  for (auto& id : ids) CHECK_WEFT(weft_get_unique_id(&id));
  std::vector<pid_t> pids;
  for (int r = 0; r < o.ranks; ++r) {
    const pid_t p = fork();
    if (p == 0) _exit(runRank(o, ids.data(), r));
    pids.push_back(p);
  }
  int failed = 0;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++failed;
  }
  if (failed) fprintf(stderr, "%d rank(s) failed\n", failed);
  return failed ? 1 : 0;
}
