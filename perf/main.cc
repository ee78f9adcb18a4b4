// weft-perf: bandwidth benchmark for weft collectives, nccl-tests style.
//
// How the ranks come to be:
//   -np N        the parent creates a unique id, forks N processes, each joins
//                with weft_comm_init_rank; the parent waits and returns the
//                first failing child's exit code.
//   -t N         N threads of this process, communicators from
//                weft_comm_init_all (with -np: N threads per process, each
//                joining with weft_comm_init_rank).
//   neither      a launcher's environment (weft_comm_init_env) when it names a
//                rank, else a single rank.
#include <sys/types.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench.h"
#include "options.h"
#include "weft.h"

using namespace weftperf;

namespace {

constexpr double kKillGraceSeconds = 15.0;  // after a child fails, before killing the rest

double nowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

bool launcherPresent() {
  const char* vars[] = {"WEFT_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
  for (const char* v : vars) {
    const char* s = std::getenv(v);
    if (s && *s) return true;
  }
  return false;
}

// Runs body(k) for k < nthreads on threads; returns the largest exit code.
int runOnThreads(std::vector<int>& codes, int nthreads,
                 const std::function<int(int)>& body) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(nthreads));
  for (int k = 0; k < nthreads; ++k)
    threads.emplace_back([&codes, &body, k] { codes[static_cast<size_t>(k)] = body(k); });
  int code = 0;
  for (int k = 0; k < nthreads; ++k) {
    threads[static_cast<size_t>(k)].join();
    if (codes[static_cast<size_t>(k)] > code) code = codes[static_cast<size_t>(k)];
  }
  return code;
}

int runThreadsInit(const Options& o) {
  const int n = o.nthreads;
  std::vector<weft_comm_t> comms(static_cast<size_t>(n), nullptr);
  weft_result_t r = weft_comm_init_all(comms.data(), n);
  if (r != WEFT_SUCCESS) fatal(nullptr, -1, "weft_comm_init_all", r);
  std::vector<int> codes(static_cast<size_t>(n), 0);
  return runOnThreads(codes, n, [&](int k) {
    return runRank(comms[static_cast<size_t>(k)], o, "threads");
  });
}

// One forked process: its ranks are proc*T .. proc*T + T-1 of nprocs*T.
int runChild(const Options& o, const weft_unique_id_t& id, int proc) {
  const int perProc = o.nthreads > 0 ? o.nthreads : 1;
  const int nranks = o.nprocs * perProc;
  std::string desc = "processes";
  if (o.nthreads > 0)
    desc = std::to_string(o.nprocs) + " processes x " + std::to_string(perProc) + " threads";
  auto body = [&](int k) {
    weft_comm_t comm = nullptr;
    const int rank = proc * perProc + k;
    weft_result_t r = weft_comm_init_rank(&comm, nranks, id, rank);
    if (r != WEFT_SUCCESS) fatal(nullptr, rank, "weft_comm_init_rank", r);
    return runRank(comm, o, desc);
  };
  if (perProc == 1) return body(0);
  std::vector<int> codes(static_cast<size_t>(perProc), 0);
  return runOnThreads(codes, perProc, body);
}

// Pins forked process p to the p-th CPU (round-robin) of those this process
// may use, as mpirun binds ranks to cores: otherwise the scheduler may keep
// two ranks that hand work to each other on one core, and the figures swing
// between runs.
void bindToCpu(int p) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[static_cast<size_t>(p) % cpus.size()], &one);
  sched_setaffinity(0, sizeof one, &one);
}

int runForked(const Options& o) {
  weft_unique_id_t id;
  weft_result_t r = weft_get_unique_id(&id);
  if (r != WEFT_SUCCESS) {
    std::fprintf(stderr, "weft-perf: weft_get_unique_id failed: %s (%s)\n",
                 weft_get_error_string(r), weft_get_last_error(nullptr));
    return 3;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> kids;
  for (int p = 0; p < o.nprocs; ++p) {
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("weft-perf: fork");
      for (pid_t k : kids) kill(k, SIGKILL);
      for (pid_t k : kids) waitpid(k, nullptr, 0);
      return 3;
    }
    if (pid == 0) {
      if (o.bind) bindToCpu(p);
      int code = runChild(o, id, p);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    kids.push_back(pid);
  }

  // Wait for every child; remember the first failure, and if the others
  // linger long after it (stuck on a dead peer), kill them.
  int firstFail = 0;
  double failedAt = 0;
  bool killed = false;
  std::vector<bool> done(kids.size(), false);
  size_t remaining = kids.size();
  while (remaining > 0) {
    int status = 0;
    pid_t w = waitpid(-1, &status, firstFail ? WNOHANG : 0);
    if (w == 0) {
      if (!killed && nowSeconds() - failedAt > kKillGraceSeconds) {
        for (size_t k = 0; k < kids.size(); ++k)
          if (!done[k]) kill(kids[k], SIGKILL);
        killed = true;
      }
      usleep(20000);
      continue;
    }
    if (w < 0) {
      if (errno == EINTR) continue;
      break;
    }
    size_t idx = kids.size();
    for (size_t k = 0; k < kids.size(); ++k)
      if (kids[k] == w) idx = k;
    if (idx == kids.size() || done[idx]) continue;
    done[idx] = true;
    --remaining;
    int code = 0;
    if (WIFEXITED(status))
      code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
      code = 128 + WTERMSIG(status);
    if (code != 0 && firstFail == 0) {
      firstFail = code;
      failedAt = nowSeconds();
      if (code != 1)
        std::fprintf(stderr, "weft-perf: process %zu (pid %d) exited with code %d\n", idx,
                     static_cast<int>(w), code);
    }
  }
  return firstFail;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string err;
  switch (parseOptions(argc, argv, &o, &err)) {
    case ParseResult::Help:
      printUsage(stdout, "weft-perf");
      return 0;
    case ParseResult::Error:
      std::fprintf(stderr, "weft-perf: %s\n", err.c_str());
      printUsage(stderr, "weft-perf");
      return 2;
    case ParseResult::Ok:
      break;
  }
  if (!o.algo.empty()) {
    const std::string value = std::string(collName(o.coll)) + ":" + o.algo;
    setenv("WEFT_ALGO", value.c_str(), 1);
  }
  if (!o.repro.empty()) setenv("WEFT_REPRO", o.repro.c_str(), 1);
  if (!o.wire.empty()) setenv("WEFT_WIRE", o.wire.c_str(), 1);
  if (o.nprocs > 0) return runForked(o);
  if (o.nthreads > 0) return runThreadsInit(o);
  weft_comm_t comm = nullptr;
  if (launcherPresent()) {
    weft_result_t r = weft_comm_init_env(&comm);
    if (r != WEFT_SUCCESS) fatal(nullptr, -1, "weft_comm_init_env", r);
    return runRank(comm, o, "launcher");
  }
  weft_result_t r = weft_comm_init_all(&comm, 1);
  if (r != WEFT_SUCCESS) fatal(nullptr, 0, "weft_comm_init_all", r);
  return runRank(comm, o, "single process");
}
