// perf/compare.d/gloo_bench.cc: Gloo's float sum allreduce timed the way
// weft-perf times weft (see sweep.h).
//
// The ranks are forked processes on this machine. They meet through a
// gloo::rendezvous::FileStore in a fresh temporary directory and connect a
// full mesh over Gloo's TCP transport on 127.0.0.1 (Gloo has no shared
// memory transport). Each call builds a gloo::AllreduceOptions and runs
// gloo::allreduce, which is what PyTorch's ProcessGroupGloo does for
// allreduce; it is out of place (input and output buffers differ).
//
//   gloo_bench allreduce -np 4 -b 8 -e 64M -w 2 -n 1000 -T 0.05
#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "sweep.h"

namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

struct GlooRank {
  std::shared_ptr<gloo::Context> ctx;
  uint32_t tag = 0;  // a new tag per operation, as PyTorch does
};

void maxF64(void* c, const void* a, const void* b, size_t n) {
  double* out = static_cast<double*>(c);
  const double* x = static_cast<const double*>(a);
  const double* y = static_cast<const double*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] > y[i] ? x[i] : y[i];
}

int allreduceRaw(GlooRank* g, const void* in, void* out, size_t count, bool f64, ReduceFn fn) {
  try {
    gloo::AllreduceOptions opts(g->ctx);
    if (f64) {
      opts.setInput(static_cast<double*>(const_cast<void*>(in)), count);
      opts.setOutput(static_cast<double*>(out), count);
    } else {
      opts.setInput(static_cast<float*>(const_cast<void*>(in)), count);
      opts.setOutput(static_cast<float*>(out), count);
    }
    opts.setReduceFunction(fn);
    opts.setTag(g->tag++);
    gloo::allreduce(opts);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_bench: rank %d: allreduce: %s\n", g->ctx->rank, e.what());
    return 1;
  }
}

int glooColl(void* ctx, sweep_coll c, const float* send, float* recv, size_t count) {
  if (c != SWEEP_ALLREDUCE) return 1;
  return allreduceRaw(static_cast<GlooRank*>(ctx), send, recv, count, false,
                      static_cast<ReduceFn>(&gloo::sum<float>));
}

int glooMax(void* ctx, double* v) {
  double in = *v;
  return allreduceRaw(static_cast<GlooRank*>(ctx), &in, v, 1, true, &maxF64);
}

int glooSum(void* ctx, double* v) {
  double in = *v;
  return allreduceRaw(static_cast<GlooRank*>(ctx), &in, v, 1, true,
                      static_cast<ReduceFn>(&gloo::sum<double>));
}

int glooBarrier(void* ctx) {
  GlooRank* g = static_cast<GlooRank*>(ctx);
  try {
    gloo::BarrierOptions opts(g->ctx);
    opts.setTag(g->tag++);
    gloo::barrier(opts);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_bench: rank %d: barrier: %s\n", g->ctx->rank, e.what());
    return 1;
  }
}

int runRank(const sweep_opts& o, const std::string& storeDir, int rank) {
  GlooRank g;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(storeDir);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, o.nprocs);
    ctx->setTimeout(std::chrono::seconds(120));
    ctx->connectFullMesh(store, dev);
    g.ctx = ctx;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_bench: rank %d: connecting: %s\n", rank, e.what());
    return 3;
  }
  sweep_backend be{};
  be.rank = rank;
  be.nranks = o.nprocs;
  be.name = "gloo_bench (Gloo, tcp 127.0.0.1, gloo::allreduce)";
  be.ctx = &g;
  be.coll = glooColl;
  be.max_f64 = glooMax;
  be.sum_f64 = glooSum;
  be.barrier = glooBarrier;
  return sweep_run(&o, &be);
}

void removeDir(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") unlink((dir + "/" + name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

}  // namespace

// Rank r on the r-th allowed CPU (round-robin), as weft-perf -B 1 and
// mpirun --bind-to core place their ranks, so all three compare alike.
// (Gloo's own I/O thread follows its rank's binding.)
void bindRoundRobin(int r) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[static_cast<size_t>(r) % cpus.size()], &one);
  sched_setaffinity(0, sizeof one, &one);
}

int main(int argc, char** argv) {
  sweep_opts o;
  const int prc = sweep_parse_args(argc, argv, &o, 1);
  if (prc == 1) return 0;
  if (prc != 0) return 2;
  if (o.coll != SWEEP_ALLREDUCE) {
    std::fprintf(stderr, "gloo_bench: only allreduce is measured\n");
    return 2;
  }
  char tmpl[] = "/tmp/gloo_bench.XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("gloo_bench: mkdtemp");
    return 3;
  }
  const std::string storeDir = tmpl;
  std::fflush(stdout);
  std::vector<pid_t> kids;
  for (int r = 0; r < o.nprocs; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("gloo_bench: fork");
      for (pid_t k : kids) kill(k, SIGKILL);
      break;
    }
    if (pid == 0) {
      bindRoundRobin(r);
      const int rc = runRank(o, storeDir, r);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(rc);  // skip static destructors shared with the parent
    }
    kids.push_back(pid);
  }
  int result = static_cast<int>(kids.size()) == o.nprocs ? 0 : 3;
  size_t left = kids.size();
  while (left > 0) {
    int status = 0;
    const pid_t pid = wait(&status);
    if (pid < 0) break;
    --left;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && result == 0) {
      result = code;
      // The others would wait for the dead rank until Gloo's timeout.
      for (pid_t k : kids)
        if (k != pid) kill(k, SIGKILL);
    }
  }
  removeDir(storeDir);
  return result;
}
