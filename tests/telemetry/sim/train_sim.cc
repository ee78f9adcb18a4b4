// weft-train-sim: a small training-like loop (compute, then allreduce the
// gradients) on N ranks forked from this process, with the faults that
// weft-report must diagnose. The telemetry tests (test_report.py) run it
// with WEFT_STATS / WEFT_TIMELINE and check what weft-report concludes.
//
//   weft-train-sim [--ranks 4] [--steps 30] [--bytes 1M] [--compute-ms 2]
//                  [--slow-rank R --slow-ms X]    rank R computes X ms longer
//                  [--stall-rank R --stall-s S]   rank R stops calling for S s
//                  [--mismatch-rank R]            rank R calls int32 max instead
//                  [--kill-rank R --kill-step K]  rank R dies (SIGKILL) at step K
//
// Each rank prints "rank R: <error>: <weft_get_last_error>" on a failed call
// and exits 1; the parent exits 0 only if every rank did.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "weft.h"

namespace {

struct Opts {
  int ranks = 4, steps = 30;
  size_t bytes = 1 << 20;
  double computeMs = 2;
  int slowRank = -1;
  double slowMs = 0;
  int stallRank = -1;
  double stallS = 0;
  int mismatchRank = -1;
  int killRank = -1, killStep = 0;
};

void sleepMs(double ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long>(ms * 1e3)));
}

int runRank(const Opts& o, const weft_unique_id_t& id, int rank) {
  weft_comm_t comm = nullptr;
  weft_result_t r = weft_comm_init_rank(&comm, o.ranks, id, rank);
  if (r != WEFT_SUCCESS) {
    fprintf(stderr, "rank %d: init: %s: %s\n", rank, weft_get_error_string(r),
            weft_get_last_error(nullptr));
    return 1;
  }
  const size_t n = o.bytes / sizeof(float);
  std::vector<float> grad(n, 1.0f);
  int rc = 0;
  for (int step = 0; step < o.steps; ++step) {
    if (rank == o.killRank && step == o.killStep) raise(SIGKILL);
    sleepMs(o.computeMs + (rank == o.slowRank ? o.slowMs : 0));
    if (rank == o.stallRank && step == o.steps / 2) {
      sleepMs(o.stallS * 1e3);
      break;  // never calls again
    }
    for (size_t i = 0; i < n; ++i) grad[i] = static_cast<float>(rank + step);
    const bool odd = rank == o.mismatchRank;
    r = weft_allreduce(grad.data(), grad.data(), n, odd ? WEFT_INT32 : WEFT_FLOAT32,
                       odd ? WEFT_MAX : WEFT_SUM, comm, nullptr);
    if (r != WEFT_SUCCESS) {
      fprintf(stderr, "rank %d: step %d: %s: %s\n", rank, step, weft_get_error_string(r),
              weft_get_last_error(comm));
      rc = 1;
      break;
    }
    // Sum over ranks of (rank + step), in every element.
    const float want = static_cast<float>(o.ranks * step + o.ranks * (o.ranks - 1) / 2);
    if (grad[0] != want || grad[n - 1] != want) {
      fprintf(stderr, "rank %d: step %d: wrong result %g, want %g\n", rank, step, grad[0], want);
      rc = 1;
      break;
    }
  }
  if (rc)
    weft_comm_abort(comm);
  else
    weft_comm_destroy(comm);
  return rc;
}

bool parse(int argc, char** argv, Opts* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (a == "--ranks") o->ranks = atoi(v);
    else if (a == "--steps") o->steps = atoi(v);
    else if (a == "--bytes") {
      char* end = nullptr;
      double b = strtod(v, &end);
      if (*end == 'K' || *end == 'k') b *= 1024;
      if (*end == 'M' || *end == 'm') b *= 1 << 20;
      o->bytes = static_cast<size_t>(b);
    } else if (a == "--compute-ms") o->computeMs = atof(v);
    else if (a == "--slow-rank") o->slowRank = atoi(v);
    else if (a == "--slow-ms") o->slowMs = atof(v);
    else if (a == "--stall-rank") o->stallRank = atoi(v);
    else if (a == "--stall-s") o->stallS = atof(v);
    else if (a == "--mismatch-rank") o->mismatchRank = atoi(v);
    else if (a == "--kill-rank") o->killRank = atoi(v);
    else if (a == "--kill-step") o->killStep = atoi(v);
    else return false;
  }
  return o->ranks >= 1 && o->steps >= 1 && o->bytes >= sizeof(float);
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  if (!parse(argc, argv, &o)) {
    fprintf(stderr, "usage: see the head of tests/telemetry/sim/train_sim.cc\n");
    return 2;
  }
  weft_unique_id_t id;
  if (weft_get_unique_id(&id) != WEFT_SUCCESS) {
    fprintf(stderr, "weft_get_unique_id: %s\n", weft_get_last_error(nullptr));
    return 1;
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < o.ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) _exit(runRank(o, id, r));
    pids.push_back(pid);
  }
  int failed = 0;
  for (int r = 0; r < o.ranks; ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (WIFSIGNALED(st)) {
      fprintf(stderr, "sim: rank %d killed by signal %d\n", r, WTERMSIG(st));
      ++failed;
    } else if (WEXITSTATUS(st) != 0) {
      ++failed;
    }
  }
  return failed ? 1 : 0;
}
