#include "bench.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "dtypes.h"
#include "pattern.h"
#include "perf/device.h"

namespace weftperf {

namespace {

constexpr unsigned char kSentinel = 0xA5;  // fills receive buffers before a checked call

double nowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// What every rank learns about every other rank for the header.
struct RankInfo {
  int32_t pid;
  int32_t rank;
  char host[120];
};
static_assert(sizeof(RankInfo) == 128, "RankInfo is sent as 128 bytes");

struct Ctx {
  weft_comm_t comm;
  int rank;
  int nranks;
  const Options* o;
  char* send;  // out-of-place send buffer
  char* recv;  // receive buffer; the only buffer in place
  // -G: the calls run on device copies of send / recv and on dev.stream;
  // the host buffers above stay where inputs are made and results checked.
  bool onDevice;
  DeviceBufs dev;
  size_t bufBytes;  // of each of send and recv
};

#define WP_CHECK(ctx, call)                                           \
  do {                                                                \
    weft_result_t wp_r_ = (call);                                     \
    if (wp_r_ != WEFT_SUCCESS) fatal((ctx).comm, (ctx).rank, #call, wp_r_); \
  } while (0)

double agreeMax(const Ctx& c, double v) {
  double in = v, out = 0;
  WP_CHECK(c, weft_allreduce(&in, &out, 1, WEFT_FLOAT64, WEFT_MAX, c.comm, nullptr));
  return out;
}

uint64_t agreeSum(const Ctx& c, uint64_t v) {
  uint64_t in = v, out = 0;
  WP_CHECK(c, weft_allreduce(&in, &out, 1, WEFT_UINT64, WEFT_SUM, c.comm, nullptr));
  return out;
}

const char* weftCallName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "weft_allreduce";
    case Coll::Broadcast: return "weft_broadcast";
    case Coll::Reduce: return "weft_reduce";
    case Coll::AllGather: return "weft_allgather";
    case Coll::ReduceScatter: return "weft_reduce_scatter";
    case Coll::AllToAll: return "weft_alltoall";
    case Coll::SendRecv: return "weft_send/weft_recv";
  }
  return "?";
}

// The buffers of one call.
struct Bufs {
  const void* send;
  void* recv;
};

Bufs buffersFor(const Ctx& c, const Layout& L, size_t elt, bool inPlace) {
  if (!inPlace) return {c.send, c.recv};
  switch (c.o->coll) {
    case Coll::AllGather:
      return {c.recv + static_cast<size_t>(c.rank) * L.count * elt, c.recv};
    case Coll::ReduceScatter:
      return {c.recv, c.recv + static_cast<size_t>(c.rank) * L.count * elt};
    default:
      return {c.recv, c.recv};
  }
}

// -G: the device addresses of host buffers b (same offsets; NULL stays NULL).
Bufs deviceBufs(const Ctx& c, const Bufs& b) {
  auto map = [&](const void* p) -> char* {
    const char* q = static_cast<const char*>(p);
    if (!q) return nullptr;
    if (q >= c.send && q < c.send + c.bufBytes) return c.dev.send + (q - c.send);
    return c.dev.recv + (q - c.recv);
  };
  return {map(b.send), map(b.recv)};
}

weft_result_t launchRaw(const Ctx& c, const Layout& L, weft_datatype_t dt, weft_op_t op,
                        const Bufs& hb) {
  const int root = c.o->root;
  const Bufs b = c.onDevice ? deviceBufs(c, hb) : hb;
  weft_stream_t const stream = c.onDevice ? c.dev.stream : nullptr;
  switch (c.o->coll) {
    case Coll::AllReduce:
      return weft_allreduce(b.send, b.recv, L.count, dt, op, c.comm, stream);
    case Coll::Broadcast:
      return weft_broadcast(b.send, b.recv, L.count, dt, root, c.comm, stream);
    case Coll::Reduce:
      return weft_reduce(b.send, b.recv, L.count, dt, op, root, c.comm, stream);
    case Coll::AllGather:
      return weft_allgather(b.send, b.recv, L.count, dt, c.comm, stream);
    case Coll::ReduceScatter:
      return weft_reduce_scatter(b.send, b.recv, L.count, dt, op, c.comm, stream);
    case Coll::AllToAll:
      return weft_alltoall(b.send, b.recv, L.count, dt, c.comm, stream);
    case Coll::SendRecv: {
      const int next = (c.rank + 1) % c.nranks;
      const int prev = (c.rank + c.nranks - 1) % c.nranks;
      weft_result_t r = weft_group_start();
      if (r != WEFT_SUCCESS) return r;
      weft_result_t rs = weft_send(b.send, L.count, dt, next, c.comm, stream);
      weft_result_t rr = weft_recv(b.recv, L.count, dt, prev, c.comm, stream);
      r = weft_group_end();  // always close the group, even after a failed record
      if (rs != WEFT_SUCCESS) return rs;
      if (rr != WEFT_SUCCESS) return rr;
      return r;
    }
  }
  return WEFT_ERR_INTERNAL;
}

// One call of the collective; a failure ends the process (see fatal).
void launch(const Ctx& c, const Layout& L, weft_datatype_t dt, weft_op_t op, const Bufs& b) {
  const weft_result_t r = launchRaw(c, L, dt, op, b);
  if (r == WEFT_SUCCESS) return;
  char what[160];
  std::snprintf(what, sizeof what, "%s (%zu bytes, count %zu, %s, %s)", weftCallName(c.o->coll),
                L.bytes, L.count, dtypeInfo(dt)->name,
                b.send == c.send ? "out-of-place" : "in-place");
  fatal(c.comm, c.rank, what, r);
}

void fillRange(const DtypeInfo& t, void* base, uint64_t g0, size_t n, const ValueGen& gen,
               int rank) {
  char* p = static_cast<char*>(base);
  for (size_t i = 0; i < n; ++i) encodeValue(t, gen.value(rank, g0 + i), p + i * t.size);
}

// Writes the sentinel over the receive area and this rank's inputs for one call.
void fillInputs(const Ctx& c, const Layout& L, const DtypeInfo& t, const Bufs& b, bool inPlace,
                const ValueGen& gen) {
  // Every buffer of an in-place call lies in c.recv (allgather and
  // reduce-scatter use the whole n * count area); out of place the output is
  // c.recv. Either way the sentinel covers it before the inputs are written.
  const size_t elems = inPlace ? std::max(L.recvElems, L.sendElems) : L.recvElems;
  std::memset(c.recv, kSentinel, elems * t.size);
  void* in = const_cast<void*>(b.send);
  switch (c.o->coll) {
    case Coll::Broadcast:
      // Non-root send buffers are ignored by weft; in place they hold the sentinel.
      if (c.rank == c.o->root || !inPlace) fillRange(t, in, 0, L.count, gen, c.rank);
      break;
    case Coll::ReduceScatter:
    case Coll::AllToAll:
      fillRange(t, in, 0, L.count * static_cast<size_t>(c.nranks), gen, c.rank);
      break;
    default:
      fillRange(t, in, 0, L.count, gen, c.rank);
      break;
  }
}

// Counts the elements of this rank's result that differ from the expected.
uint64_t countWrong(const Ctx& c, const Layout& L, const DtypeInfo& t, weft_op_t op,
                    const Bufs& b, const ValueGen& gen) {
  const char* out = static_cast<const char*>(b.recv);
  const size_t elt = t.size;
  const size_t n = static_cast<size_t>(c.nranks);
  uint64_t wrong = 0;
  switch (c.o->coll) {
    case Coll::AllReduce:
      for (size_t i = 0; i < L.count; ++i)
        wrong += !elementMatches(t, out + i * elt, gen.reduced(op, i));
      break;
    case Coll::Reduce:
      if (c.rank != c.o->root) break;
      for (size_t i = 0; i < L.count; ++i)
        wrong += !elementMatches(t, out + i * elt, gen.reduced(op, i));
      break;
    case Coll::Broadcast:
      for (size_t i = 0; i < L.count; ++i)
        wrong += !elementMatches(t, out + i * elt, gen.value(c.o->root, i));
      break;
    case Coll::AllGather:
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < L.count; ++i)
          wrong += !elementMatches(t, out + (j * L.count + i) * elt,
                                   gen.value(static_cast<int>(j), i));
      break;
    case Coll::ReduceScatter: {
      const uint64_t g0 = static_cast<uint64_t>(c.rank) * L.count;
      for (size_t i = 0; i < L.count; ++i)
        wrong += !elementMatches(t, out + i * elt, gen.reduced(op, g0 + i));
      break;
    }
    case Coll::AllToAll: {
      const uint64_t g0 = static_cast<uint64_t>(c.rank) * L.count;
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < L.count; ++i)
          wrong += !elementMatches(t, out + (j * L.count + i) * elt,
                                   gen.value(static_cast<int>(j), g0 + i));
      break;
    }
    case Coll::SendRecv: {
      const int prev = (c.rank + c.nranks - 1) % c.nranks;
      for (size_t i = 0; i < L.count; ++i)
        wrong += !elementMatches(t, out + i * elt, gen.value(prev, i));
      break;
    }
  }
  return wrong;
}

struct Measure {
  double seconds;  // max over ranks of the average time per call
  int64_t wrong;   // summed over ranks; -1 when not checked
};

[[noreturn]] void deviceFatal(const Ctx& c, const std::string& err) {
  std::fprintf(stderr, "weft-perf: rank %d: %s\n", c.rank, err.c_str());
  std::fflush(stderr);
  weft_comm_abort(c.comm);
  _exit(3);
}

// -G: the host inputs (and the sentinel over the receive area) to the device.
void upload(const Ctx& c, const Layout& L, const DtypeInfo& t) {
  if (!c.onDevice) return;
  const size_t bytes = std::max(L.recvElems, L.sendElems) * t.size;
  std::string err;
  if (!deviceUpload(c.dev.send, c.send, bytes, &err) ||
      !deviceUpload(c.dev.recv, c.recv, bytes, &err))
    deviceFatal(c, err);
}

// -G: waits for the calls queued on the stream; then the result to the host.
void finish(const Ctx& c, const Layout& L, const DtypeInfo& t, bool download) {
  if (!c.onDevice) return;
  std::string err;
  if (!deviceSync(c.dev, &err)) deviceFatal(c, err);
  const size_t bytes = std::max(L.recvElems, L.sendElems) * t.size;
  if (download && !deviceDownload(c.recv, c.dev.recv, bytes, &err)) deviceFatal(c, err);
}

Measure measure(const Ctx& c, const Layout& L, const DtypeInfo& t, weft_op_t op, bool inPlace,
                uint64_t salt) {
  const Options& o = *c.o;
  const Bufs b = buffersFor(c, L, t.size, inPlace);
  const Pattern pat = collHasOp(o.coll) ? patternFor(op) : Pattern::Any;
  const DtypeInfo vt = valueType(t);
  {
    // Realistic data for the timed calls (no NaN or denormal slow paths).
    ValueGen gen(vt, pat, c.nranks, salt * 2);
    fillInputs(c, L, t, b, inPlace, gen);
    upload(c, L, t);
  }
  double t0 = nowSeconds();
  for (int w = 0; w < o.warmup; ++w) launch(c, L, t.dt, op, b);
  finish(c, L, t, false);
  double perCall = o.warmup > 0 ? (nowSeconds() - t0) / o.warmup : 0.0;
  // The time per call, the same on every rank (the maximum: every rank must
  // make the same number of calls), from the calls just made or, when there
  // were none, from one probe call.
  auto agreed = [&](double measured) {
    if (measured <= 0) {
      const double p0 = nowSeconds();
      launch(c, L, t.dt, op, b);
      finish(c, L, t, false);
      measured = nowSeconds() - p0;
    }
    return agreeMax(c, measured);
  };
  if (o.warmupSeconds > 0) {
    perCall = agreed(perCall);
    const int extra =
        static_cast<int>(std::min(1e6, std::ceil(o.warmupSeconds / std::max(perCall, 1e-9))));
    t0 = nowSeconds();
    for (int w = 0; w < extra; ++w) launch(c, L, t.dt, op, b);
    finish(c, L, t, false);
    perCall = (nowSeconds() - t0) / extra;  // a warm estimate for the budget
  }

  int iters = o.iters;
  if (o.timeBudget > 0) {
    perCall = agreed(perCall);
    if (perCall > 0) {
      const double fit = std::floor(o.timeBudget / perCall);
      iters = static_cast<int>(std::max(1.0, std::min(fit, static_cast<double>(o.iters))));
    }
  }

  WP_CHECK(c, weft_barrier(c.comm, nullptr));
  t0 = nowSeconds();
  for (int it = 0; it < iters; ++it) launch(c, L, t.dt, op, b);
  finish(c, L, t, false);
  const double local = (nowSeconds() - t0) / iters;
  Measure m;
  m.seconds = agreeMax(c, local);
  m.wrong = -1;
  if (o.check) {
    // A separate call on freshly filled buffers, after the timed loop.
    ValueGen gen(vt, pat, c.nranks, salt * 2 + 1);
    fillInputs(c, L, t, b, inPlace, gen);
    upload(c, L, t);
    launch(c, L, t.dt, op, b);
    finish(c, L, t, true);
    m.wrong = static_cast<int64_t>(agreeSum(c, countWrong(c, L, t, op, b, gen)));
  }
  return m;
}

std::string formatTime(double us) {
  char buf[32];
  if (us >= 10000.0)
    std::snprintf(buf, sizeof buf, "%7.0f", us);
  else if (us >= 100.0)
    std::snprintf(buf, sizeof buf, "%7.1f", us);
  else if (us >= 1.0)
    std::snprintf(buf, sizeof buf, "%7.2f", us);
  else  // sub-microsecond: a third decimal (2 would round away 5%)
    std::snprintf(buf, sizeof buf, "%7.3f", us);
  return buf;
}

std::vector<size_t> sweepSizes(const Options& o) {
  std::vector<size_t> sizes;
  size_t s = o.minBytes;
  for (;;) {
    sizes.push_back(s);
    size_t next;
    if (o.stepBytes > 0) {
      if (s > SIZE_MAX - o.stepBytes) break;
      next = s + o.stepBytes;
    } else if (s == 0) {
      next = 1;
    } else {
      if (s > SIZE_MAX / o.stepFactor) break;
      next = s * o.stepFactor;
    }
    if (next > o.maxBytes) break;
    s = next;
  }
  return sizes;
}

void printHeader(const Ctx& c, const std::string& modeDesc, const std::vector<RankInfo>& infos) {
  const Options& o = *c.o;
  int version = 0;
  weft_get_version(&version);
  std::printf("# weft-perf: collective %s, ranks %d (%s), weft %d.%d.%d\n", collName(o.coll),
              c.nranks, modeDesc.c_str(), version / 10000, version / 100 % 100, version % 100);
  if (o.stepBytes > 0)
    std::printf("#  minBytes %zu maxBytes %zu step: %zu(bytes)", o.minBytes, o.maxBytes,
                o.stepBytes);
  else
    std::printf("#  minBytes %zu maxBytes %zu step: %zu(factor)", o.minBytes, o.maxBytes,
                o.stepFactor);
  std::printf(" warmup iters: %d iters: %d validation: %d blocking: %d", o.warmup, o.iters,
              o.check, o.blocking);
  if (o.warmupSeconds > 0) std::printf(" warmup time: %gs", o.warmupSeconds);
  if (o.timeBudget > 0)
    std::printf(" time budget: %gs\n", o.timeBudget);
  else
    std::printf(" time budget: none\n");
  std::printf("#  datatype");
  for (size_t i = 0; i < o.dtypes.size(); ++i)
    std::printf("%s%s", i ? "," : " ", dtypeInfo(o.dtypes[i])->name);
  if (collHasOp(o.coll)) {
    std::printf(", op");
    for (size_t i = 0; i < o.ops.size(); ++i) std::printf("%s%s", i ? "," : " ", opName(o.ops[i]));
  }
  if (collHasRoot(o.coll)) std::printf(", root %d", o.root);
  if (o.device) std::printf(", buffers in CUDA device memory (-G)");
  const char* algo = std::getenv("WEFT_ALGO");
  const char* repro = std::getenv("WEFT_REPRO");
  const char* wire = std::getenv("WEFT_WIRE");
  std::printf(", WEFT_ALGO %s, WEFT_REPRO %s, WEFT_WIRE %s\n", algo && *algo ? algo : "(unset)",
              repro && *repro ? repro : "off", wire && *wire ? wire : "none");
  std::printf("#\n# Using ranks\n");
  for (const RankInfo& ri : infos) std::printf("#  Rank %2d Pid %6d on %s\n", ri.rank, ri.pid, ri.host);
  std::printf("#\n");
  // Column headers, laid out with the widths the rows use.
  // Group labels centred over the two 33-character column groups.
  std::printf("#%51s%*s%*s%*s%s\n", "", 33 - 11, "out-of-place", 11, "", 33 - 12, "in-place", "");
  char line[256];
  int len = std::snprintf(line, sizeof line, "#%11s  %12s  %8s  %6s  %6s", "size", "count", "type",
                          "redop", "root");
  for (int k = 0; k < 2; ++k)
    len += std::snprintf(line + len, sizeof line - static_cast<size_t>(len), "  %7s  %6s  %6s  %6s",
                         "time", "algbw", "busbw", "#wrong");
  std::printf("%s\n", line);
  len = std::snprintf(line, sizeof line, "#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (int k = 0; k < 2; ++k)
    len += std::snprintf(line + len, sizeof line - static_cast<size_t>(len), "  %7s  %6s  %6s  %6s",
                         "(us)", "(GB/s)", "(GB/s)", "");
  while (len > 0 && line[len - 1] == ' ') line[--len] = '\0';
  std::printf("%s\n", line);
  std::fflush(stdout);
}

}  // namespace

void fatal(weft_comm_t comm, int rank, const char* what, weft_result_t r) {
  std::fprintf(stderr, "weft-perf: rank %d: %s failed: %s (%s)\n", rank, what,
               weft_get_error_string(r), weft_get_last_error(comm));
  std::fflush(stderr);
  std::fflush(stdout);
  if (comm) weft_comm_abort(comm);
  // _exit: in thread mode the other ranks may be blocked in a collective that
  // will never complete; in forked children it skips the parent's atexit work.
  _exit(3);
}

Layout layoutFor(Coll c, size_t sizeBytes, size_t elemBytes, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  Layout L{};
  switch (c) {
    case Coll::AllReduce:
    case Coll::Broadcast:
    case Coll::Reduce:
    case Coll::SendRecv:
      L.count = sizeBytes / elemBytes;
      L.bytes = L.count * elemBytes;
      L.sendElems = L.recvElems = L.count;
      break;
    case Coll::AllGather:
      L.count = sizeBytes / elemBytes / n;
      L.bytes = L.count * n * elemBytes;
      L.sendElems = L.count;
      L.recvElems = L.count * n;
      break;
    case Coll::ReduceScatter:
      L.count = sizeBytes / elemBytes / n;
      L.bytes = L.count * n * elemBytes;
      L.sendElems = L.count * n;
      L.recvElems = L.count;
      break;
    case Coll::AllToAll:
      L.count = sizeBytes / elemBytes / n;
      L.bytes = L.count * n * elemBytes;
      L.sendElems = L.recvElems = L.count * n;
      break;
  }
  return L;
}

double busBwFactor(Coll c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Coll::AllReduce:
      return 2.0 * (n - 1) / n;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

int runRank(weft_comm_t comm, const Options& o, const std::string& modeDesc) {
  Ctx c{};
  c.comm = comm;
  c.o = &o;
  c.rank = -1;
  WP_CHECK(c, weft_comm_rank(comm, &c.rank));
  WP_CHECK(c, weft_comm_size(comm, &c.nranks));
  const bool printer = c.rank == 0;

  if (collHasRoot(o.coll) && o.root >= c.nranks) {
    if (printer)
      std::fprintf(stderr, "weft-perf: root %d is out of range for %d ranks\n", o.root, c.nranks);
    weft_comm_destroy(comm);
    return 2;
  }

  // Everyone's pid and host, for the header.
  RankInfo mine{};
  mine.pid = static_cast<int32_t>(getpid());
  mine.rank = c.rank;
  if (gethostname(mine.host, sizeof mine.host - 1) != 0) std::strcpy(mine.host, "?");
  std::vector<RankInfo> infos(static_cast<size_t>(c.nranks));
  WP_CHECK(c, weft_allgather(&mine, infos.data(), sizeof(RankInfo), WEFT_UINT8, comm, nullptr));
  if (printer) printHeader(c, modeDesc, infos);

  // One send and one receive buffer of maxBytes serve every row: the total
  // size of a row never exceeds it.
  const size_t bufBytes = (std::max<size_t>(o.maxBytes, 64) + 4095) / 4096 * 4096;
  void* sendMem = nullptr;
  void* recvMem = nullptr;
  if (posix_memalign(&sendMem, 4096, bufBytes) != 0 || posix_memalign(&recvMem, 4096, bufBytes) != 0) {
    std::fprintf(stderr, "weft-perf: rank %d: cannot allocate 2 x %zu bytes\n", c.rank, bufBytes);
    std::fflush(stderr);
    weft_comm_abort(comm);
    _exit(3);
  }
  std::memset(sendMem, 0, bufBytes);  // first touch outside the timed loops
  std::memset(recvMem, 0, bufBytes);
  c.send = static_cast<char*>(sendMem);
  c.recv = static_cast<char*>(recvMem);
  c.bufBytes = bufBytes;
  if (o.device) {
    std::string err;
    if (!deviceOpen(c.rank, bufBytes, &c.dev, &err)) deviceFatal(c, "-G: " + err);
    c.onDevice = true;
  }

  const std::vector<size_t> sizes = sweepSizes(o);
  const std::vector<weft_op_t> noOp{WEFT_SUM};  // placeholder for op-less collectives
  const std::vector<weft_op_t>& ops = collHasOp(o.coll) ? o.ops : noOp;
  const double factor = busBwFactor(o.coll, c.nranks);

  uint64_t totalWrong = 0;
  double bwSum = 0;
  int bwCount = 0;
  uint64_t row = 0;
  for (weft_datatype_t dt : o.dtypes) {
    const DtypeInfo& t = *dtypeInfo(dt);
    for (weft_op_t op : ops) {
      for (size_t size : sizes) {
        ++row;
        const Layout L = layoutFor(o.coll, size, t.size, c.nranks);
        if (L.count == 0) continue;  // nothing per rank at this size: skipped, as nccl-tests
        Measure m[2];
        for (int inPlace = 0; inPlace < 2; ++inPlace)
          m[inPlace] = measure(c, L, t, op, inPlace != 0, mix64(row * 4 + inPlace + (static_cast<uint64_t>(dt) << 40)));
        for (const Measure& mm : m)
          if (mm.wrong > 0) totalWrong += static_cast<uint64_t>(mm.wrong);
        if (!printer) continue;
        std::printf("%12zu  %12zu  %8s  %6s  %6d", L.bytes, L.count, t.name,
                    collHasOp(o.coll) ? opName(op) : "none", collHasRoot(o.coll) ? o.root : -1);
        for (const Measure& mm : m) {
          const double algbw = mm.seconds > 0 ? static_cast<double>(L.bytes) / mm.seconds / 1e9 : 0.0;
          const double busbw = algbw * factor;
          bwSum += busbw;
          ++bwCount;
          char wrong[32];
          if (mm.wrong < 0)
            std::snprintf(wrong, sizeof wrong, "N/A");
          else
            std::snprintf(wrong, sizeof wrong, "%lld", static_cast<long long>(mm.wrong));
          std::printf("  %7s  %6.2f  %6.2f  %6s", formatTime(mm.seconds * 1e6).c_str(), algbw,
                      busbw, wrong);
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  // Every rank knows the totals (they were agreed per row); only rank 0 prints.
  if (printer) {
    std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(totalWrong),
                totalWrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %.6g\n", bwCount ? bwSum / bwCount : 0.0);
    std::printf("#\n");
    std::fflush(stdout);
  }
  std::free(sendMem);
  std::free(recvMem);
  deviceClose(&c.dev);
  const weft_result_t dr = weft_comm_destroy(comm);
  if (dr != WEFT_SUCCESS) {
    std::fprintf(stderr, "weft-perf: rank %d: weft_comm_destroy failed: %s (%s)\n", c.rank,
                 weft_get_error_string(dr), weft_get_last_error(nullptr));
    return 3;
  }
  return totalWrong ? 1 : 0;
}

}  // namespace weftperf
