/*
 * An NCCL application, as users have them: C, compiled against the CUDA
 * toolkit's nccl.h and linked with -lnccl against the toolkit's real
 * libnccl.so.2. Run with LD_PRELOAD=libweft-nccl.so it must run entirely on
 * weft, on host memory: the real NCCL cannot run here (no GPU), so correct
 * results prove whose code ran, and the program also checks that the shim
 * is mapped and answers for the NCCL symbols.
 *
 *   nccl_app --ranks N   parent: checks the interposition, makes the unique
 *                        id, starts N copies of itself (--rank i) and hands
 *                        each the id through a pipe on its stdin
 *   nccl_app --rank i --nranks N   one rank: every collective, every op and
 *                        datatype, groups of send/recv, split, shrink, a
 *                        nonblocking second comm, error paths
 *   nccl_app --control   without the shim: the real NCCL must fail (exit 77
 *                        when it works, e.g. on a GPU machine)
 *   nccl_app --banner    makes an id (for the NCCL_DEBUG=VERSION check)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int gRank = -1;
static int gChecks = 0;

#define FAIL(...)                                      \
  do {                                                 \
    fprintf(stderr, "rank %d: FAIL: ", gRank);         \
    fprintf(stderr, __VA_ARGS__);                      \
    fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__); \
  } while (0)

/* An NCCL call that must succeed; else report and return 1. */
#define OK(call)                                                                   \
  do {                                                                             \
    ncclResult_t r_ = (call);                                                      \
    gChecks++;                                                                     \
    if (r_ != ncclSuccess) {                                                       \
      FAIL("%s -> %s: %s", #call, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

#define EXPECT(cond, ...) \
  do {                    \
    gChecks++;            \
    if (!(cond)) {        \
      FAIL(__VA_ARGS__);  \
      return 1;           \
    }                     \
  } while (0)

/* A call that must fail with `want`, its last error naming `word`. */
static int expectError(ncclResult_t got, ncclResult_t want, const char* word, const char* what) {
  const char* msg = ncclGetLastError(NULL);
  gChecks++;
  if (got != want || !strstr(msg, word)) {
    FAIL("%s: got %d, want %d; last error \"%s\" should mention \"%s\"", what, (int)got, (int)want,
         msg, word);
    return 1;
  }
  return 0;
}

/* ---- values of every datatype ------------------------------------------ */

static double pow2(int e) {
  double v = 1.0;
  for (; e > 0; --e) v *= 2.0;
  for (; e < 0; ++e) v /= 2.0;
  return v;
}

/* Decoders of the narrow floating formats (finite values). */
static double decodeNarrow(unsigned bits, int dt) {
  unsigned s = 0, e = 0, m = 0;
  double v = 0.0;
  switch (dt) {
    case ncclFloat16:
      s = bits >> 15, e = (bits >> 10) & 0x1f, m = bits & 0x3ff;
      v = e == 0 ? m * pow2(-24) : (e == 31 ? 1e300 : (1024 + m) * pow2((int)e - 25));
      break;
    case ncclBfloat16: {
      uint32_t f32 = (uint32_t)bits << 16;
      float f;
      memcpy(&f, &f32, sizeof f);
      return f;
    }
    case ncclFloat8e4m3:
      s = bits >> 7, e = (bits >> 3) & 0xf, m = bits & 7;
      v = e == 0 ? m * pow2(-9) : (e == 15 && m == 7 ? 1e300 : (8 + m) * pow2((int)e - 10));
      break;
    default: /* ncclFloat8e5m2 */
      s = bits >> 7, e = (bits >> 2) & 0x1f, m = bits & 3;
      v = e == 0 ? m * pow2(-16) : (e == 31 ? 1e300 : (4 + m) * pow2((int)e - 17));
      break;
  }
  return s ? -v : v;
}

static size_t eltSize(int dt) {
  static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return sizes[dt];
}

static double load(const void* buf, size_t i, int dt) {
  const char* p = (const char*)buf + i * eltSize(dt);
  switch (dt) {
    case ncclInt8:
      return *(const int8_t*)p;
    case ncclUint8:
      return *(const uint8_t*)p;
    case ncclInt32:
      return *(const int32_t*)p;
    case ncclUint32:
      return *(const uint32_t*)p;
    case ncclInt64:
      return (double)*(const int64_t*)p;
    case ncclUint64:
      return (double)*(const uint64_t*)p;
    case ncclFloat32:
      return *(const float*)p;
    case ncclFloat64:
      return *(const double*)p;
    case ncclFloat16:
    case ncclBfloat16:
      return decodeNarrow(*(const uint16_t*)p, dt);
    default:
      return decodeNarrow(*(const uint8_t*)p, dt);
  }
}

/* Stores `v` exactly (the test only uses values every type represents). */
static void store(void* buf, size_t i, int dt, double v) {
  char* p = (char*)buf + i * eltSize(dt);
  unsigned code, top;
  switch (dt) {
    case ncclInt8:
      *(int8_t*)p = (int8_t)v;
      return;
    case ncclUint8:
      *(uint8_t*)p = (uint8_t)v;
      return;
    case ncclInt32:
      *(int32_t*)p = (int32_t)v;
      return;
    case ncclUint32:
      *(uint32_t*)p = (uint32_t)v;
      return;
    case ncclInt64:
      *(int64_t*)p = (int64_t)v;
      return;
    case ncclUint64:
      *(uint64_t*)p = (uint64_t)v;
      return;
    case ncclFloat32:
      *(float*)p = (float)v;
      return;
    case ncclFloat64:
      *(double*)p = v;
      return;
    default:
      break;
  }
  /* Narrow floats: the code whose value is v (searched once per value). */
  {
    static struct {
      int dt;
      double v;
      unsigned code;
    } cache[64];
    static int cached = 0;
    int k, found = -1;
    for (k = 0; k < cached && found < 0; ++k)
      if (cache[k].dt == dt && cache[k].v == v) found = k;
    if (found < 0) {
      top = eltSize(dt) == 2 ? 0x10000u : 0x100u;
      for (code = 0; code < top && decodeNarrow(code, dt) != v; ++code) {
      }
      if (code == top) {
        fprintf(stderr, "store: %g is not exact in type %d\n", v, dt);
        abort();
      }
      found = cached < 64 ? cached++ : 63;
      cache[found].dt = dt, cache[found].v = v, cache[found].code = code;
    }
    code = cache[found].code;
  }
  if (eltSize(dt) == 2) {
    uint16_t c16 = (uint16_t)code;
    memcpy(p, &c16, 2);
  } else {
    *(uint8_t*)p = (uint8_t)code;
  }
}

/* Rank p's element i: 1 or 2, times 2 on odd elements. Every partial sum
 * and product of up to 4 ranks is exact even in fp8, whatever the order. */
static double value(int p, size_t i) { return (double)((1 + (p + (int)i) % 2) << (i % 2)); }

static double expected(int op, int dt, int nranks, size_t i) {
  double acc = value(0, i);
  int p;
  for (p = 1; p < nranks; ++p) {
    double v = value(p, i);
    switch (op) {
      case ncclProd:
        acc *= v;
        break;
      case ncclMax:
        acc = v > acc ? v : acc;
        break;
      case ncclMin:
        acc = v < acc ? v : acc;
        break;
      default:
        acc += v;
        break; /* sum, avg */
    }
  }
  if (op == ncclAvg) acc = dt >= ncclFloat16 ? acc / nranks : (double)((long long)acc / nranks);
  return acc;
}

/* ---- the rank's checks --------------------------------------------------- */

enum { kCount = 33 };

static int checkAllReduceEveryTypeAndOp(ncclComm_t comm, int n) {
  static const char* types[] = {"int8", "uint8", "int32",  "uint32",   "int64",   "uint64",
                                "half", "float", "double", "bfloat16", "fp8e4m3", "fp8e5m2"};
  static const char* ops[] = {"sum", "prod", "max", "min", "avg"};
  unsigned char send[kCount * 8], recv[kCount * 8];
  int dt, op, inPlace;
  size_t i;
  for (dt = 0; dt < ncclNumTypes; ++dt) {
    for (op = 0; op < ncclNumOps; ++op) {
      for (inPlace = 0; inPlace < 2; ++inPlace) {
        void* out = inPlace ? (void*)send : (void*)recv;
        for (i = 0; i < kCount; ++i) store(send, i, dt, value(gRank, i));
        memset(recv, 0xee, sizeof recv);
        OK(ncclAllReduce(send, out, kCount, (ncclDataType_t)dt, (ncclRedOp_t)op, comm, NULL));
        for (i = 0; i < kCount; ++i) {
          double got = load(out, i, dt), want = expected(op, dt, n, i);
          EXPECT(got == want, "allreduce %s %s%s [%zu] = %g, expected %g", types[dt], ops[op],
                 inPlace ? " in place" : "", i, got, want);
        }
      }
    }
  }
  return 0;
}

static int checkRooted(ncclComm_t comm, int n) {
  float f[kCount], g[kCount];
  int64_t x[kCount];
  uint16_t bf[kCount], bout[kCount];
  size_t i;
  int op;
  /* Broadcast from 1, out of place. */
  for (i = 0; i < kCount; ++i) f[i] = (float)(gRank * 100 + i), g[i] = -1.0f;
  OK(ncclBroadcast(f, g, kCount, ncclFloat, 1 % n, comm, NULL));
  for (i = 0; i < kCount; ++i)
    EXPECT(g[i] == (float)((1 % n) * 100 + i), "broadcast [%zu] = %g", i, g[i]);
  /* Bcast from 2, in place. */
  for (i = 0; i < kCount; ++i) x[i] = (int64_t)gRank * 1000000000000LL + (int64_t)i;
  OK(ncclBcast(x, kCount, ncclInt64, 2 % n, comm, NULL));
  for (i = 0; i < kCount; ++i)
    EXPECT(x[i] == (int64_t)(2 % n) * 1000000000000LL + (int64_t)i, "bcast [%zu]", i);
  /* Reduce to 3 with every op (bfloat16); the other ranks' recvbuff stays. */
  for (op = 0; op < ncclNumOps; ++op) {
    for (i = 0; i < kCount; ++i) store(bf, i, ncclBfloat16, value(gRank, i)), bout[i] = 0x7777;
    OK(ncclReduce(bf, bout, kCount, ncclBfloat16, (ncclRedOp_t)op, 3 % n, comm, NULL));
    for (i = 0; i < kCount; ++i) {
      if (gRank == 3 % n)
        EXPECT(load(bout, i, ncclBfloat16) == expected(op, ncclBfloat16, n, i),
               "reduce op %d [%zu] = %g", op, i, load(bout, i, ncclBfloat16));
      else
        EXPECT(bout[i] == 0x7777, "reduce wrote rank %d's recvbuff", gRank);
    }
  }
  return 0;
}

static int checkGatherFamily(ncclComm_t comm, int n) {
  enum { kMax = 16 };
  uint16_t h[kCount], hall[kMax * kCount];
  double rs[kMax * kCount], rr[kCount];
  uint32_t a2a[kMax * kCount], a2b[kMax * kCount];
  int32_t gs[kCount], gr[kMax * kCount];
  uint8_t e4[kMax * kCount], e4r[kCount];
  size_t i;
  int p;
  EXPECT(n <= kMax, "at most %d ranks", kMax);
  /* AllGather of halves, out of place then in place. */
  for (i = 0; i < kCount; ++i) store(h, i, ncclHalf, (double)(gRank * 64 + (int)i));
  OK(ncclAllGather(h, hall, kCount, ncclHalf, comm, NULL));
  for (p = 0; p < n; ++p)
    for (i = 0; i < kCount; ++i)
      EXPECT(load(hall, p * kCount + i, ncclHalf) == (double)(p * 64 + (int)i), "allgather");
  memset(hall, 0, sizeof hall);
  memcpy(hall + gRank * kCount, h, sizeof h);
  OK(ncclAllGather(hall + gRank * kCount, hall, kCount, ncclHalf, comm, NULL));
  for (p = 0; p < n; ++p)
    EXPECT(load(hall, p * kCount + 5, ncclHalf) == (double)(p * 64 + 5), "allgather in place");
  /* ReduceScatter of doubles (sum), out of place then in place. */
  for (i = 0; i < (size_t)n * kCount; ++i) rs[i] = (double)(i + gRank);
  OK(ncclReduceScatter(rs, rr, kCount, ncclDouble, ncclSum, comm, NULL));
  for (i = 0; i < kCount; ++i) {
    double want = (double)n * (gRank * kCount + i) + n * (n - 1) / 2.0;
    EXPECT(rr[i] == want, "reducescatter [%zu] = %g, expected %g", i, rr[i], want);
  }
  OK(ncclReduceScatter(rs, rs + gRank * kCount, kCount, ncclDouble, ncclSum, comm, NULL));
  EXPECT(memcmp(rs + gRank * kCount, rr, sizeof rr) == 0, "reducescatter in place");
  /* ReduceScatter of fp8 e4m3 (max). */
  for (i = 0; i < (size_t)n * kCount; ++i) store(e4, i, ncclFloat8e4m3, value(gRank, i));
  OK(ncclReduceScatter(e4, e4r, kCount, ncclFloat8e4m3, ncclMax, comm, NULL));
  for (i = 0; i < kCount; ++i)
    EXPECT(load(e4r, i, ncclFloat8e4m3) == expected(ncclMax, ncclFloat8e4m3, n, gRank * kCount + i),
           "reducescatter fp8 max [%zu]", i);
  /* AlltoAll: block j of rank i holds 100 i + j. */
  for (p = 0; p < n; ++p)
    for (i = 0; i < kCount; ++i) a2a[p * kCount + i] = (uint32_t)(100 * gRank + p);
  OK(ncclAlltoAll(a2a, a2b, kCount, ncclUint32, comm, NULL));
  for (p = 0; p < n; ++p)
    for (i = 0; i < kCount; ++i)
      EXPECT(a2b[p * kCount + i] == (uint32_t)(100 * p + gRank), "alltoall from %d", p);
  /* Gather to 2, out of place then in place; Scatter from 1, both. */
  for (i = 0; i < kCount; ++i) gs[i] = gRank * 1000 + (int32_t)i;
  for (i = 0; i < (size_t)n * kCount; ++i) gr[i] = -1;
  OK(ncclGather(gs, gr, kCount, ncclInt32, 2 % n, comm, NULL));
  if (gRank == 2 % n) {
    for (p = 0; p < n; ++p)
      for (i = 0; i < kCount; ++i)
        EXPECT(gr[p * kCount + i] == p * 1000 + (int32_t)i, "gather from %d", p);
    for (i = 0; i < (size_t)n * kCount; ++i) gr[i] = -1;
    memcpy(gr + gRank * kCount, gs, sizeof gs);
    OK(ncclGather(gr + gRank * kCount, gr, kCount, ncclInt32, 2 % n, comm, NULL));
    for (p = 0; p < n; ++p) EXPECT(gr[p * kCount + 7] == p * 1000 + 7, "gather in place");
  } else {
    EXPECT(gr[0] == -1, "gather wrote a non-root recvbuff");
    OK(ncclGather(gs, NULL, kCount, ncclInt32, 2 % n, comm, NULL));
  }
  for (i = 0; i < (size_t)n * kCount; ++i) gr[i] = gRank == 1 % n ? (int32_t)(i / kCount) * 7 : -5;
  OK(ncclScatter(gr, gs, kCount, ncclInt32, 1 % n, comm, NULL));
  for (i = 0; i < kCount; ++i) EXPECT(gs[i] == gRank * 7, "scatter [%zu] = %d", i, gs[i]);
  if (gRank == 1 % n)
    OK(ncclScatter(gr, gr + gRank * kCount, kCount, ncclInt32, 1 % n, comm, NULL));
  else
    OK(ncclScatter(NULL, gs, kCount, ncclInt32, 1 % n, comm, NULL));
  EXPECT(gs[0] == gRank * 7, "scatter in place");
  return 0;
}

static int checkSendRecv(ncclComm_t comm, int n) {
  enum { kMax = 16 };
  float out[kCount], in[kCount];
  int64_t po[kMax], pi[kMax];
  size_t i;
  int p, next = (gRank + 1) % n, prev = (gRank + n - 1) % n;
  /* A ring in one group. */
  for (i = 0; i < kCount; ++i) out[i] = (float)(gRank + 0.5), in[i] = -1.0f;
  OK(ncclGroupStart());
  OK(ncclSend(out, kCount, ncclFloat, next, comm, NULL));
  OK(ncclRecv(in, kCount, ncclFloat, prev, comm, NULL));
  OK(ncclGroupEnd());
  for (i = 0; i < kCount; ++i) EXPECT(in[i] == (float)(prev + 0.5), "ring recv [%zu]", i);
  /* Every pair, this rank included, in one group. */
  for (p = 0; p < n; ++p) po[p] = 1000 * gRank + p, pi[p] = -1;
  OK(ncclGroupStart());
  for (p = 0; p < n; ++p) {
    OK(ncclSend(&po[p], 1, ncclInt64, p, comm, NULL));
    OK(ncclRecv(&pi[p], 1, ncclInt64, p, comm, NULL));
  }
  OK(ncclGroupEnd());
  for (p = 0; p < n; ++p) EXPECT(pi[p] == 1000 * p + gRank, "pair %d", p);
  /* Collectives and point-to-point together in a group. */
  for (i = 0; i < kCount; ++i) out[i] = 1.0f, in[i] = -1.0f;
  OK(ncclGroupStart());
  OK(ncclAllReduce(out, out, kCount, ncclFloat, ncclSum, comm, NULL));
  OK(ncclSend(&po[0], 1, ncclInt64, next, comm, NULL));
  OK(ncclRecv(&pi[0], 1, ncclInt64, prev, comm, NULL));
  OK(ncclGroupEnd());
  EXPECT(out[0] == (float)n && pi[0] == 1000 * prev, "mixed group");
  return 0;
}

static int checkPreMulSum(ncclComm_t comm, int n) {
  float fs = 0.5f * (float)(gRank + 1), f[kCount], g[kCount];
  uint16_t hs, h[kCount], hr[kCount];
  ncclRedOp_t op;
  size_t i;
  double want = 0.0;
  int p;
  for (p = 0; p < n; ++p) want += 0.5 * (p + 1) * 2.0;
  OK(ncclRedOpCreatePreMulSum(&op, &fs, ncclFloat, ncclScalarHostImmediate, comm));
  for (i = 0; i < kCount; ++i) f[i] = 2.0f, g[i] = -1.0f;
  OK(ncclAllReduce(f, g, kCount, ncclFloat, op, comm, NULL));
  for (i = 0; i < kCount; ++i) EXPECT(g[i] == (float)want, "premulsum float [%zu] = %g", i, g[i]);
  OK(ncclRedOpDestroy(op, comm));
  /* Half, scalar 0.5 with device residence (host memory here), reduce-scatter. */
  store(&hs, 0, ncclHalf, 0.5);
  OK(ncclRedOpCreatePreMulSum(&op, &hs, ncclHalf, ncclScalarDevice, comm));
  {
    uint16_t big[16 * kCount];
    for (i = 0; i < (size_t)n * kCount; ++i) store(big, i, ncclHalf, 4.0);
    OK(ncclReduceScatter(big, hr, kCount, ncclHalf, op, comm, NULL));
  }
  for (i = 0; i < kCount; ++i) EXPECT(load(hr, i, ncclHalf) == 2.0 * n, "premulsum half rs");
  for (i = 0; i < kCount; ++i) store(h, i, ncclHalf, 8.0);
  OK(ncclAllReduce(h, h, kCount, ncclHalf, op, comm, NULL));
  EXPECT(load(h, 0, ncclHalf) == 4.0 * n, "premulsum half in place");
  OK(ncclRedOpDestroy(op, comm));
  return 0;
}

static int checkSplitAndShrink(ncclComm_t comm, int n) {
  ncclComm_t sub = NULL, none = (ncclComm_t)1, shrunk = NULL;
  int rank = -1, count = -1, v = gRank, sum = -1, excluded = n - 1;
  /* Parity colors, reversed keys: the highest old rank becomes new rank 0. */
  OK(ncclCommSplit(comm, gRank % 2, n - gRank, &sub, NULL));
  OK(ncclCommUserRank(sub, &rank));
  OK(ncclCommCount(sub, &count));
  EXPECT(count == (n + 1 - gRank % 2) / 2, "split size %d", count);
  EXPECT(rank == (count - 1) - gRank / 2, "split rank %d", rank);
  OK(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclMax, sub, NULL));
  EXPECT(sum % 2 == gRank % 2 && sum >= gRank, "split allreduce max %d", sum);
  OK(ncclCommDestroy(sub));
  /* The last rank opts out with NCCL_SPLIT_NOCOLOR. */
  OK(ncclCommSplit(comm, gRank == n - 1 ? NCCL_SPLIT_NOCOLOR : 7, 0, &none, NULL));
  EXPECT((none == NULL) == (gRank == n - 1), "NOCOLOR gives NULL only to the last rank");
  if (none) {
    OK(ncclCommCount(none, &count));
    EXPECT(count == n - 1, "NOCOLOR split size %d", count);
    OK(ncclCommAbort(none));
  }
  /* The other ranks shrink the last one away; it does not call. */
  if (gRank != n - 1) {
    OK(ncclCommShrink(comm, &excluded, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT));
    OK(ncclCommCount(shrunk, &count));
    EXPECT(count == n - 1, "shrunk size %d", count);
    v = 1;
    OK(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, shrunk, NULL));
    EXPECT(sum == n - 1, "shrunk allreduce %d", sum);
    OK(ncclCommDestroy(shrunk));
  }
  return 0;
}

/* A second comm: rank 0 makes the id and broadcasts it over the first;
 * all join with a nonblocking config and poll until it is ready. */
static int checkNonblockingComm(ncclComm_t comm, int n) {
  ncclUniqueId id;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  ncclComm_t nb = NULL;
  ncclResult_t r, state = ncclInProgress;
  time_t deadline = time(NULL) + 120;
  float x = 1.0f;
  memset(&id, 0, sizeof id);
  if (gRank == 0) OK(ncclGetUniqueId(&id));
  OK(ncclBroadcast(&id, &id, sizeof id, ncclChar, 0, comm, NULL));
  cfg.blocking = 0;
  cfg.commName = "second";
  r = ncclCommInitRankConfig(&nb, n, id, gRank, &cfg);
  EXPECT(r == ncclInProgress || r == ncclSuccess, "nonblocking init returned %d", (int)r);
  while (state == ncclInProgress && time(NULL) < deadline) OK(ncclCommGetAsyncError(nb, &state));
  EXPECT(state == ncclSuccess, "nonblocking comm state %d: %s", (int)state, ncclGetLastError(nb));
  OK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, nb, NULL));
  EXPECT(x == (float)n, "allreduce on the second comm: %g", x);
  OK(ncclCommFinalize(nb));
  OK(ncclCommDestroy(nb));
  return 0;
}

/* A window on every rank; each rank puts 8 floats into the next rank's
 * window (NCCL 2.30 headers) and waits for the previous rank's put. */
static int checkWindows(ncclComm_t comm, int n) {
  float win[64];
  int rank = 0, i;
  ncclWindow_t w = NULL;
  (void)n; /* used by the puts of 2.30 headers only */
  OK(ncclCommUserRank(comm, &rank));
  for (i = 0; i < 64; ++i) win[i] = -1.0f;
  OK(ncclCommWindowRegister(comm, win, sizeof win, &w, NCCL_WIN_DEFAULT));
#if NCCL_VERSION_CODE >= 23000
  {
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    float src[8];
    ncclWaitSignalDesc_t d;
    for (i = 0; i < 8; ++i) src[i] = (float)(rank * 10 + i);
    OK(ncclPutSignal(src, 8, ncclFloat, next, w, (size_t)(rank % 8) * 8 * sizeof(float), 0, 0, 0,
                     comm, NULL));
    d.opCnt = 1;
    d.peer = prev;
    d.sigIdx = 0;
    d.ctx = 0;
    OK(ncclWaitSignal(1, &d, comm, NULL));
    for (i = 0; i < 8; ++i)
      EXPECT(win[(prev % 8) * 8 + i] == (float)(prev * 10 + i), "put from rank %d [%d] = %g", prev,
             i, win[(prev % 8) * 8 + i]);
  }
#endif
  OK(ncclCommWindowDeregister(comm, w));
  return 0;
}

static int checkErrors(ncclComm_t comm, int n) {
  float a[4] = {1, 2, 3, 4}, b[4] = {0, 0, 0, 0};
  int bad = 0;
  bad |= expectError(ncclAllReduce(a, b, 4, (ncclDataType_t)99, ncclSum, comm, NULL),
                     ncclInvalidArgument, "datatype", "bad datatype");
  bad |= expectError(ncclAllReduce(a, b, 4, ncclFloat, (ncclRedOp_t)77, comm, NULL),
                     ncclInvalidArgument, "op 77", "bad op");
  bad |= expectError(ncclBroadcast(a, b, 4, ncclFloat, n + 3, comm, NULL), ncclInvalidArgument,
                     "root", "bad root");
  bad |= expectError(ncclAllReduce(a, b, 4, ncclFloat, ncclSum, NULL, NULL), ncclInvalidArgument,
                     "comm is NULL", "NULL comm");
  bad |= expectError(ncclRecv(b, 4, ncclFloat, -1, comm, NULL), ncclInvalidArgument, "peer",
                     "bad peer");
  bad |= expectError(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupStart", "lone ncclGroupEnd");
  EXPECT(b[0] == 0.0f, "a refused call wrote its recvbuff");
  /* A stream is not a CUDA stream in a process without CUDA: host path. */
  OK(ncclAllReduce(a, b, 4, ncclFloat, ncclSum, comm, (cudaStream_t)0x1));
  EXPECT(b[3] == 4.0f * n, "allreduce with a stream handle: %g", b[3]);
  return bad;
}

/* ---- the interposition itself ------------------------------------------ */

/* True when a mapping of this process names `part`. */
static int mapped(const char* part) {
  char line[4096];
  int found = 0;
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return 0;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, part) != NULL;
  fclose(f);
  return found;
}

/* The file that defines the NCCL symbol `name` in this process. */
static const char* definer(const char* name, char* out, size_t len) {
  Dl_info info;
  void* f = dlsym(RTLD_DEFAULT, name);
  char resolved[PATH_MAX];
  if (!f || !dladdr(f, &info) || !info.dli_fname) return "(nothing)";
  snprintf(out, len, "%s", realpath(info.dli_fname, resolved) ? resolved : info.dli_fname);
  return out;
}

static int checkInterposed(void) {
  char where[PATH_MAX];
  int v = 0;
  EXPECT(mapped("libweft-nccl"), "the shim is not mapped: run with LD_PRELOAD=.../libweft-nccl.so");
  EXPECT(strstr(definer("ncclAllReduce", where, sizeof where), "libweft-nccl") != NULL,
         "ncclAllReduce comes from %s, not the shim", where);
  EXPECT(strstr(definer("ncclCommInitRank", where, sizeof where), "libweft-nccl") != NULL,
         "ncclCommInitRank comes from %s, not the shim", where);
  OK(ncclGetVersion(&v));
  EXPECT(v == NCCL_VERSION_CODE, "ncclGetVersion gave %d, the header says %d", v,
         NCCL_VERSION_CODE);
  return 0;
}

static int runRank(int rank, int n) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  size_t got = 0;
  int dev = -1, count = -1, me = -1;
  gRank = rank;
  alarm(300);
  while (got < sizeof id) {
    ssize_t k = read(0, (char*)&id + got, sizeof id - got);
    EXPECT(k > 0, "reading the unique id from stdin");
    got += (size_t)k;
  }
  if (checkInterposed()) return 1;
  OK(ncclCommInitRank(&comm, n, id, rank));
  OK(ncclCommCount(comm, &count));
  OK(ncclCommUserRank(comm, &me));
  OK(ncclCommCuDevice(comm, &dev));
  EXPECT(count == n && me == rank && dev == 0, "count %d, rank %d, device %d", count, me, dev);
  if (checkAllReduceEveryTypeAndOp(comm, n) || checkRooted(comm, n) || checkGatherFamily(comm, n) ||
      checkSendRecv(comm, n) || checkPreMulSum(comm, n) || checkSplitAndShrink(comm, n) ||
      checkNonblockingComm(comm, n) || checkWindows(comm, n) || checkErrors(comm, n))
    return 1;
  OK(ncclCommDestroy(comm));
  printf("rank %d: %d checks passed\n", rank, gChecks);
  return 0;
}

static int runParent(const char* self, int n) {
  ncclUniqueId id;
  pid_t pids[4];
  int i, failed = 0, alive;
  time_t deadline = time(NULL) + 400;
  char where[PATH_MAX];
  /* The element values keep every fp8 partial result exact up to 4 ranks. */
  if (n < 1 || n > 4) return fprintf(stderr, "--ranks must be in [1, 4]\n"), 2;
  if (checkInterposed()) return 1;
  printf("ncclAllReduce is defined by %s; the toolkit's libnccl.so.2 is %s\n",
         definer("ncclAllReduce", where, sizeof where),
         mapped("cuda") && mapped("libnccl.so.2") ? "mapped too" : "not even loaded");
  OK(ncclGetUniqueId(&id));
  for (i = 0; i < n; ++i) {
    int fds[2];
    char rank[16], nranks[16];
    if (pipe(fds) != 0) return perror("pipe"), 1;
    pids[i] = fork();
    if (pids[i] == 0) {
      dup2(fds[0], 0);
      close(fds[0]);
      close(fds[1]);
      snprintf(rank, sizeof rank, "%d", i);
      snprintf(nranks, sizeof nranks, "%d", n);
      execl(self, "nccl_app", "--rank", rank, "--nranks", nranks, (char*)NULL);
      perror("execl");
      _exit(127);
    }
    close(fds[0]);
    if (write(fds[1], &id, sizeof id) != (ssize_t)sizeof id) failed = 1;
    close(fds[1]);
  }
  do {
    alive = 0;
    for (i = 0; i < n; ++i) {
      int status = 0;
      if (pids[i] == 0) continue;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          fprintf(stderr, "rank %d failed (status 0x%x)\n", i, status);
          failed = 1;
        }
        pids[i] = 0;
      } else {
        alive++;
      }
    }
    if (alive && time(NULL) > deadline) {
      fprintf(stderr, "timed out: killing %d ranks\n", alive);
      for (i = 0; i < n; ++i)
        if (pids[i]) kill(pids[i], SIGKILL), waitpid(pids[i], NULL, 0), pids[i] = 0;
      failed = 1;
      alive = 0;
    }
    if (alive) usleep(10000);
  } while (alive);
  printf("%s: %d ranks on weft through the NCCL API\n", failed ? "FAILED" : "PASSED", n);
  return failed;
}

/* Without the shim the toolkit's NCCL runs, and without a GPU it fails. */
static int runControl(void) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  ncclResult_t r;
  alarm(100);
  if (mapped("libweft-nccl")) {
    fprintf(stderr, "--control must run without LD_PRELOAD of the shim\n");
    return 1;
  }
  r = ncclGetUniqueId(&id);
  if (r == ncclSuccess) r = ncclCommInitRank(&comm, 1, id, 0);
  if (r == ncclSuccess) {
    printf("the real NCCL works here (a GPU?): the control does not apply\n");
    ncclCommDestroy(comm);
    return 77;
  }
  printf("the real NCCL fails here as expected: %s: %s\n", ncclGetErrorString(r),
         ncclGetLastError(NULL));
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 3 && !strcmp(argv[1], "--ranks")) return runParent("/proc/self/exe", atoi(argv[2]));
  if (argc == 5 && !strcmp(argv[1], "--rank") && !strcmp(argv[3], "--nranks"))
    return runRank(atoi(argv[2]), atoi(argv[4]));
  if (argc == 2 && !strcmp(argv[1], "--control")) return runControl();
  if (argc == 2 && !strcmp(argv[1], "--banner")) {
    ncclUniqueId id;
    return ncclGetUniqueId(&id) == ncclSuccess ? 0 : 1;
  }
  fprintf(stderr, "usage: %s --ranks N | --rank I --nranks N | --control | --banner\n", argv[0]);
  return 2;
}
