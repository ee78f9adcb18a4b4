/* perf/compare.d/sweep.h: the size sweep and timing loop shared by
 * mpi_bench.c (C) and gloo_bench.cc (C++), written to measure exactly the
 * way weft-perf does (perf/bench.cc), so the three tables line up:
 *
 *   per size: fill inputs, -w warmup calls (their mean is the per-call
 *   estimate), with -T the number of timed calls is
 *   clamp(floor(T / estimate), 1, -n) with the estimate agreed as a max over
 *   ranks, a barrier, the timed loop, mean time per call on each rank, max
 *   over ranks. With -c 1, one more call on fresh inputs is checked.
 *
 * Sizes and bus bandwidth follow nccl-tests (and weft-perf): allreduce and
 * broadcast use count = size / 4; allgather uses count = size / 4 / n per
 * rank and reports the whole gathered buffer as its size. busbw = algbw *
 * 2(n-1)/n (allreduce), * 1 (broadcast), * (n-1)/n (allgather), GB = 1e9 B.
 *
 * Check values: every rank contributes rank + 1 (as float32) in every
 * element, so an allreduce sum must give n(n+1)/2 everywhere, a broadcast
 * from root 0 must give 1, and block j of an allgather must hold j + 1.
 *
 * Output rows have the column order of weft-perf's out-of-place group:
 *   size count type redop root time(us) algbw busbw #wrong
 */
#ifndef WEFT_COMPARE_SWEEP_H
#define WEFT_COMPARE_SWEEP_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum sweep_coll { SWEEP_ALLREDUCE = 0, SWEEP_BROADCAST = 1, SWEEP_ALLGATHER = 2 };

struct sweep_opts {
  enum sweep_coll coll;
  size_t min_bytes;
  size_t max_bytes;
  size_t factor;
  int iters;
  int warmup;
  int check;
  double budget_s; /* 0: none */
  double warmup_s; /* -W: warm-up seconds after the -w calls; 0: none */
  int nprocs;      /* forked ranks (Gloo); 0 when a launcher starts them */
};

/* What a benchmark program provides: the collective itself and the three
 * helpers the timing loop needs. Every function returns 0 on success. */
struct sweep_backend {
  int rank;
  int nranks;
  const char* name; /* shown in the header line */
  void* ctx;
  int (*coll)(void* ctx, enum sweep_coll c, const float* send, float* recv, size_t count);
  int (*max_f64)(void* ctx, double* v); /* in place, max over ranks */
  int (*sum_f64)(void* ctx, double* v); /* in place, sum over ranks */
  int (*barrier)(void* ctx);
};

static const char* sweep_coll_name(enum sweep_coll c) {
  switch (c) {
    case SWEEP_ALLREDUCE: return "allreduce";
    case SWEEP_BROADCAST: return "broadcast";
    case SWEEP_ALLGATHER: return "allgather";
  }
  return "?";
}

static double sweep_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "64M", "1K", "4096", "2kB" -> bytes (powers of 1024). 0 on garbage. */
static int sweep_parse_size(const char* s, size_t* out) {
  char* end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned shift = 0;
  if (end == s) return 0;
  switch (*end) {
    case 'k': case 'K': shift = 10; ++end; break;
    case 'm': case 'M': shift = 20; ++end; break;
    case 'g': case 'G': shift = 30; ++end; break;
    default: break;
  }
  if (*end == 'b' || *end == 'B') ++end;
  if (*end != '\0') return 0;
  *out = (size_t)(v << shift);
  return 1;
}

static void sweep_usage(FILE* f, const char* prog, int with_np) {
  fprintf(f,
          "usage: %s allreduce|broadcast|allgather [flags]\n"
          "  -b N  first size in bytes (K/M/G suffixes), default 8\n"
          "  -e N  last size, default 64M\n"
          "  -f N  size factor between rows, default 2\n"
          "  -n N  timed calls per row (upper bound with -T), default 20\n"
          "  -w N  warmup calls per row, default 5\n"
          "  -c 0|1  check one extra call per row, default 1\n"
          "  -T S  time budget per row in seconds, default none\n"
          "  -W S  after the -w calls, warm up for about S more seconds, default 0\n",
          prog);
  if (with_np) fprintf(f, "  -np N  fork N ranks, default 2\n");
}

/* Parses argv into *o. Returns 0 when the program should go on, 1 for -h,
 * 2 on a bad command line (already reported). */
static int sweep_parse_args(int argc, char** argv, struct sweep_opts* o, int with_np) {
  int i;
  o->coll = SWEEP_ALLREDUCE;
  o->min_bytes = 8;
  o->max_bytes = (size_t)64 << 20;
  o->factor = 2;
  o->iters = 20;
  o->warmup = 5;
  o->check = 1;
  o->budget_s = 0;
  o->warmup_s = 0;
  o->nprocs = with_np ? 2 : 0;
  for (i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      sweep_usage(stdout, argv[0], with_np);
      return 1;
    }
    if (a[0] != '-') {
      if (!strcmp(a, "allreduce") || !strcmp(a, "all_reduce")) o->coll = SWEEP_ALLREDUCE;
      else if (!strcmp(a, "broadcast") || !strcmp(a, "bcast")) o->coll = SWEEP_BROADCAST;
      else if (!strcmp(a, "allgather") || !strcmp(a, "all_gather")) o->coll = SWEEP_ALLGATHER;
      else {
        fprintf(stderr, "%s: unknown collective '%s'\n", argv[0], a);
        return 2;
      }
      continue;
    }
    if (!v) {
      fprintf(stderr, "%s: %s needs a value\n", argv[0], a);
      return 2;
    }
    ++i;
    if (!strcmp(a, "-b")) {
      if (!sweep_parse_size(v, &o->min_bytes)) goto bad;
    } else if (!strcmp(a, "-e")) {
      if (!sweep_parse_size(v, &o->max_bytes)) goto bad;
    } else if (!strcmp(a, "-f")) {
      o->factor = (size_t)strtoull(v, NULL, 10);
      if (o->factor < 2) goto bad;
    } else if (!strcmp(a, "-n")) {
      o->iters = atoi(v);
      if (o->iters < 1) goto bad;
    } else if (!strcmp(a, "-w")) {
      o->warmup = atoi(v);
      if (o->warmup < 0) goto bad;
    } else if (!strcmp(a, "-c")) {
      o->check = atoi(v) != 0;
    } else if (!strcmp(a, "-T")) {
      o->budget_s = atof(v);
      if (o->budget_s < 0) goto bad;
    } else if (!strcmp(a, "-W")) {
      o->warmup_s = atof(v);
      if (o->warmup_s < 0) goto bad;
    } else if (with_np && !strcmp(a, "-np")) {
      o->nprocs = atoi(v);
      if (o->nprocs < 1) goto bad;
    } else {
      fprintf(stderr, "%s: unknown flag %s\n", argv[0], a);
      return 2;
    }
    continue;
  bad:
    fprintf(stderr, "%s: bad value '%s' for %s\n", argv[0], v, a);
    return 2;
  }
  if (o->min_bytes == 0 || o->max_bytes < o->min_bytes) {
    fprintf(stderr, "%s: need 0 < -b <= -e\n", argv[0]);
    return 2;
  }
  return 0;
}

/* Element counts of one row: what is passed to the call and what the
 * size column shows. */
static size_t sweep_count(enum sweep_coll c, size_t bytes, int n) {
  return c == SWEEP_ALLGATHER ? bytes / sizeof(float) / (size_t)n : bytes / sizeof(float);
}
static size_t sweep_row_bytes(enum sweep_coll c, size_t count, int n) {
  return c == SWEEP_ALLGATHER ? count * (size_t)n * sizeof(float) : count * sizeof(float);
}
static double sweep_busbw_factor(enum sweep_coll c, int n) {
  switch (c) {
    case SWEEP_ALLREDUCE: return 2.0 * (n - 1) / n;
    case SWEEP_ALLGATHER: return (double)(n - 1) / n;
    default: return 1.0;
  }
}

/* Writes this rank's inputs for a call: rank + 1 in the send buffer, or for
 * a broadcast in the root's (rank 0) receive buffer, which MPI and weft's
 * in-place form use. Non-root broadcast receivers get a byte pattern that
 * is not a valid result (so a missing write is caught). */
static void sweep_fill(enum sweep_coll c, int rank, float* send, float* recv, size_t count, int n) {
  const float mine = (float)(rank + 1);
  size_t i;
  size_t out_elems = c == SWEEP_ALLGATHER ? count * (size_t)n : count;
  memset(recv, 0xA5, out_elems * sizeof(float));
  if (c == SWEEP_BROADCAST) {
    if (rank == 0)
      for (i = 0; i < count; ++i) recv[i] = mine;
    for (i = 0; i < count; ++i) send[i] = mine;
    return;
  }
  for (i = 0; i < count; ++i) send[i] = mine;
}

static size_t sweep_count_wrong(enum sweep_coll c, const float* recv, size_t count, int n) {
  size_t wrong = 0, i;
  int j;
  switch (c) {
    case SWEEP_ALLREDUCE: {
      const float want = (float)(n * (n + 1) / 2);
      for (i = 0; i < count; ++i) wrong += recv[i] != want;
      break;
    }
    case SWEEP_BROADCAST:
      for (i = 0; i < count; ++i) wrong += recv[i] != 1.0f;
      break;
    case SWEEP_ALLGATHER:
      for (j = 0; j < n; ++j)
        for (i = 0; i < count; ++i) wrong += recv[(size_t)j * count + i] != (float)(j + 1);
      break;
  }
  return wrong;
}

static void sweep_format_time(char* buf, size_t len, double us) {
  if (us >= 10000.0) snprintf(buf, len, "%9.0f", us);
  else if (us >= 100.0) snprintf(buf, len, "%9.1f", us);
  else if (us >= 1.0) snprintf(buf, len, "%9.2f", us);
  else snprintf(buf, len, "%9.3f", us);
}

#define SWEEP_TRY(expr)                                                     \
  do {                                                                      \
    if ((expr) != 0) {                                                      \
      fprintf(stderr, "%s: rank %d: %s failed\n", be->name, be->rank, #expr); \
      return 3;                                                             \
    }                                                                       \
  } while (0)

/* Runs the whole sweep on this rank; rank 0 prints the table. Returns 0,
 * 1 when some element was wrong, 3 when a call failed. */
/* The time per call, the same on every rank (the maximum: every rank must
 * make the same number of calls), from *per_call (the calls just made) or,
 * when that is 0, from one probe call. */
static int sweep_agreed_per_call(const struct sweep_opts* o, const struct sweep_backend* be,
                                 const float* send, float* recv, size_t count, double* per_call) {
  if (*per_call <= 0) {
    const double t0 = sweep_now();
    if (be->coll(be->ctx, o->coll, send, recv, count) != 0) return 1;
    *per_call = sweep_now() - t0;
  }
  return be->max_f64(be->ctx, per_call);
}

static int sweep_run(const struct sweep_opts* o, const struct sweep_backend* be) {
  const int n = be->nranks;
  const size_t buf_bytes = (o->max_bytes + 4095) / 4096 * 4096;
  const double factor = sweep_busbw_factor(o->coll, n);
  void* smem = NULL;
  void* rmem = NULL;
  float* send;
  float* recv;
  double total_wrong = 0;
  size_t size;
  if (posix_memalign(&smem, 4096, buf_bytes) != 0 || posix_memalign(&rmem, 4096, buf_bytes) != 0) {
    fprintf(stderr, "%s: rank %d: cannot allocate 2 x %zu bytes\n", be->name, be->rank, buf_bytes);
    return 3;
  }
  send = (float*)smem;
  recv = (float*)rmem;
  memset(send, 0, buf_bytes); /* first touch outside any timed loop */
  memset(recv, 0, buf_bytes);

  if (be->rank == 0) {
    printf("# %s: collective %s, ranks %d, float sum, out-of-place\n", be->name,
           sweep_coll_name(o->coll), n);
    printf("#  minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %d iters: %d "
           "validation: %d ",
           o->min_bytes, o->max_bytes, o->factor, o->warmup, o->iters, o->check);
    if (o->warmup_s > 0) printf("warmup time: %gs ", o->warmup_s);
    printf("time budget: ");
    if (o->budget_s > 0) printf("%gs\n", o->budget_s);
    else printf("none\n");
    printf("#%11s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s\n", "size", "count", "type", "redop",
           "root", "time", "algbw", "busbw", "#wrong");
    printf("#%11s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s\n", "(B)", "(elements)", "", "", "",
           "(us)", "(GB/s)", "(GB/s)", "");
    fflush(stdout);
  }
  SWEEP_TRY(be->barrier(be->ctx));

  for (size = o->min_bytes;;) {
    const size_t count = sweep_count(o->coll, size, n);
    if (count > 0) {
      const size_t bytes = sweep_row_bytes(o->coll, count, n);
      double t0, per_call = 0, local, seconds, wrong = -1;
      int iters = o->iters, k;
      sweep_fill(o->coll, be->rank, send, recv, count, n);
      t0 = sweep_now();
      for (k = 0; k < o->warmup; ++k) SWEEP_TRY(be->coll(be->ctx, o->coll, send, recv, count));
      if (o->warmup > 0) per_call = (sweep_now() - t0) / o->warmup;
      if (o->warmup_s > 0) {
        double extra;
        SWEEP_TRY(sweep_agreed_per_call(o, be, send, recv, count, &per_call));
        extra = ceil(o->warmup_s / (per_call > 1e-9 ? per_call : 1e-9));
        if (extra > 1e6) extra = 1e6;
        t0 = sweep_now();
        for (k = 0; k < (int)extra; ++k) SWEEP_TRY(be->coll(be->ctx, o->coll, send, recv, count));
        per_call = (sweep_now() - t0) / extra; /* a warm estimate for the budget */
      }
      if (o->budget_s > 0) {
        SWEEP_TRY(sweep_agreed_per_call(o, be, send, recv, count, &per_call));
        if (per_call > 0) {
          double fit = floor(o->budget_s / per_call);
          if (fit > o->iters) fit = o->iters;
          if (fit < 1) fit = 1;
          iters = (int)fit;
        }
      }
      SWEEP_TRY(be->barrier(be->ctx));
      t0 = sweep_now();
      for (k = 0; k < iters; ++k) SWEEP_TRY(be->coll(be->ctx, o->coll, send, recv, count));
      local = (sweep_now() - t0) / iters;
      seconds = local;
      SWEEP_TRY(be->max_f64(be->ctx, &seconds));
      if (o->check) {
        sweep_fill(o->coll, be->rank, send, recv, count, n);
        SWEEP_TRY(be->coll(be->ctx, o->coll, send, recv, count));
        wrong = (double)sweep_count_wrong(o->coll, recv, count, n);
        SWEEP_TRY(be->sum_f64(be->ctx, &wrong));
        total_wrong += wrong;
      }
      if (be->rank == 0) {
        const double algbw = seconds > 0 ? (double)bytes / seconds / 1e9 : 0.0;
        char tbuf[32], wbuf[32];
        sweep_format_time(tbuf, sizeof tbuf, seconds * 1e6);
        if (wrong < 0) snprintf(wbuf, sizeof wbuf, "N/A");
        else snprintf(wbuf, sizeof wbuf, "%.0f", wrong);
        printf("%12zu  %12zu  %8s  %6s  %6d  %9s  %7.3f  %7.3f  %6s\n", bytes, count, "float",
               o->coll == SWEEP_ALLREDUCE ? "sum" : "none", o->coll == SWEEP_BROADCAST ? 0 : -1,
               tbuf, algbw, algbw * factor, wbuf);
        fflush(stdout);
      }
    }
    if (size > o->max_bytes / o->factor) break;
    size *= o->factor;
    if (size > o->max_bytes) break;
  }
  if (be->rank == 0) {
    printf("# Out of bounds values : %.0f %s\n", total_wrong, total_wrong > 0 ? "FAILED" : "OK");
    fflush(stdout);
  }
  free(smem);
  free(rmem);
  return total_wrong > 0 ? 1 : 0;
}

#endif /* WEFT_COMPARE_SWEEP_H */
