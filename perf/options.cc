#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "dtypes.h"

namespace weftperf {

namespace {

struct CollName {
  const char* name;
  Coll coll;
};

// Canonical names first (collName returns those), then accepted aliases.
const CollName kColls[] = {
    {"allreduce", Coll::AllReduce},
    {"broadcast", Coll::Broadcast},
    {"reduce", Coll::Reduce},
    {"allgather", Coll::AllGather},
    {"reduce_scatter", Coll::ReduceScatter},
    {"alltoall", Coll::AllToAll},
    {"sendrecv", Coll::SendRecv},
    {"all_reduce", Coll::AllReduce},
    {"bcast", Coll::Broadcast},
    {"all_gather", Coll::AllGather},
    {"reducescatter", Coll::ReduceScatter},
    {"all_to_all", Coll::AllToAll},
    {"send_recv", Coll::SendRecv},
};

bool parseInt(const char* s, long lo, long hi, int* out) {
  if (!s || !*s) return false;
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parseDouble(const char* s, double* out) {
  if (!s || !*s) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (errno || *end || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// Splits a comma-separated list, or expands "all".
bool parseDtypes(const char* s, std::vector<weft_datatype_t>* out) {
  out->clear();
  if (strcasecmp(s, "all") == 0) {
    weft_datatype_t all[WEFT_NUM_DATATYPES];
    int n = allDtypes(all, WEFT_NUM_DATATYPES);
    out->assign(all, all + n);
    return true;
  }
  std::string list(s);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(pos, comma - pos);
    weft_datatype_t dt;
    if (!dtypeByName(item.c_str(), &dt)) return false;
    out->push_back(dt);
    pos = comma + 1;
  }
  return !out->empty();
}

bool parseOps(const char* s, std::vector<weft_op_t>* out) {
  out->clear();
  if (strcasecmp(s, "all") == 0) {
    for (int i = 0; i < kPerfOps; ++i) out->push_back(static_cast<weft_op_t>(i));
    return true;
  }
  std::string list(s);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(pos, comma - pos);
    weft_op_t op;
    if (!opByName(item.c_str(), &op)) return false;
    out->push_back(op);
    pos = comma + 1;
  }
  return !out->empty();
}

// One flag: its short spelling(s), long name, and whether it takes a value.
struct Flag {
  const char* shortName;
  const char* altShort;
  const char* longName;
};

const Flag kFlags[] = {
    {"-b", nullptr, "--minbytes"},    {"-e", nullptr, "--maxbytes"},
    {"-f", nullptr, "--stepfactor"},  {"-i", nullptr, "--stepbytes"},
    {"-n", nullptr, "--iters"},       {"-w", nullptr, "--warmup_iters"},
    {"-c", nullptr, "--check"},       {"-d", nullptr, "--datatype"},
    {"-o", nullptr, "--op"},          {"-r", nullptr, "--root"},
    {"-z", nullptr, "--blocking"},    {"-np", nullptr, "--nprocs"},
    {"-t", nullptr, "--nthreads"},    {"-a", "-A", "--algo"},
    {"-T", nullptr, "--time_budget"}, {"-B", nullptr, "--bind"},
    {"-G", nullptr, "--device"},      {"-W", nullptr, "--warmup_time"},
    {"-R", nullptr, "--repro"},       {"-x", nullptr, "--wire"},
};

std::string baseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

const char* collName(Coll c) {
  for (const CollName& n : kColls) {
    if (n.coll == c) return n.name;
  }
  return "?";
}

bool collByName(const char* name, Coll* out) {
  for (const CollName& n : kColls) {
    if (strcasecmp(name, n.name) == 0) {
      *out = n.coll;
      return true;
    }
  }
  return false;
}

bool collHasOp(Coll c) {
  return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter;
}

bool collHasRoot(Coll c) { return c == Coll::Broadcast || c == Coll::Reduce; }

bool parseSize(const char* s, size_t* out) {
  if (!s || !*s || *s == '-') return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno || end == s) return false;
  unsigned long long mult = 1;
  if (*end) {
    switch (*end) {
      case 'k': case 'K': mult = 1ull << 10; break;
      case 'm': case 'M': mult = 1ull << 20; break;
      case 'g': case 'G': mult = 1ull << 30; break;
      case 't': case 'T': mult = 1ull << 40; break;
      default: return false;
    }
    ++end;
    if (*end == 'b' || *end == 'B') ++end;
    if (*end) return false;
  }
  if (v > static_cast<unsigned long long>(SIZE_MAX) / mult) return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

void printUsage(FILE* f, const char* prog) {
  std::fprintf(f,
               "usage: %s <collective> [flags]\n"
               "  collective: allreduce broadcast reduce allgather reduce_scatter alltoall sendrecv\n"
               "  (or run as weft-perf-<collective>)\n"
               "flags:\n"
               "  -b, --minbytes N       smallest size, bytes (K/M/G suffixes), default 8\n"
               "  -e, --maxbytes N       largest size, default 64M\n"
               "  -f, --stepfactor N     multiply the size by N each step, default 2\n"
               "  -i, --stepbytes N      add N bytes each step instead (last of -f/-i wins)\n"
               "  -n, --iters N          timed iterations per size, default 20\n"
               "  -w, --warmup_iters N   untimed iterations before each timed loop, default 5\n"
               "  -c, --check 0|1        verify every element (one extra call per size), default 1\n"
               "  -d, --datatype T       int8 uint8 int32 uint32 int64 uint64 half float double\n"
               "                         bfloat16 f8e4m3 f8e5m2, a comma list, or all; default float\n"
               "  -o, --op OP            sum prod max min avg, a comma list, or all; default sum\n"
               "  -r, --root R           root of broadcast/reduce, default 0\n"
               "  -z, --blocking 0|1     accepted and reported (weft host calls block), default 1\n"
               "  -np, --nprocs N        fork N local ranks as processes\n"
               "  -t, --nthreads N       N ranks as threads (with -np: N threads per process)\n"
               "  -a, -A, --algo ALGO    set WEFT_ALGO=<collective>:ALGO before init\n"
               "  -R, --repro MODE       set WEFT_REPRO=MODE (off, ordered, exact) before init:\n"
               "                         reproducible float reductions (docs/reproducibility.md)\n"
               "  -x, --wire FMT         set WEFT_WIRE=FMT (none, bf16, fp16) before init: float32\n"
               "                         sums travel compressed (docs/compression.md)\n"
               "  -T, --time_budget S    cap each timed loop at about S seconds (>= 1 iteration)\n"
               "  -W, --warmup_time S    after the -w calls, warm up for about S more seconds\n"
               "                         (a count the ranks agree on), default 0\n"
               "  -B, --bind 0|1         pin -np ranks to the allowed CPUs round-robin, default 1\n"
               "  -G, --device 0|1       1: buffers in CUDA device memory (rank r on device\n"
               "                         r %% devices), calls on a stream; default 0 (host)\n"
               "  -h, --help             this text\n"
               "Without -np/-t the ranks come from the launcher (WEFT_RANK, torchrun, Open MPI,\n"
               "SLURM); with no launcher in the environment, one rank runs.\n",
               prog);
}

ParseResult parseOptions(int argc, char** argv, Options* o, std::string* err) {
  int i = 1;
  bool haveColl = false;
  const std::string base = baseName(argc > 0 ? argv[0] : "weft-perf");
  const std::string prefix = "weft-perf-";
  if (base.compare(0, prefix.size(), prefix) == 0) {
    if (collByName(base.c_str() + prefix.size(), &o->coll)) haveColl = true;
  }
  if (!haveColl) {
    if (argc < 2) {
      *err = "missing the collective";
      return ParseResult::Error;
    }
    const char* first = argv[1];
    if (std::strcmp(first, "-h") == 0 || std::strcmp(first, "--help") == 0) return ParseResult::Help;
    if (!collByName(first, &o->coll)) {
      *err = std::string("unknown collective '") + first + "'";
      return ParseResult::Error;
    }
    i = 2;
  }
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") return ParseResult::Help;
    const Flag* flag = nullptr;
    const char* value = nullptr;
    for (const Flag& f : kFlags) {
      if (arg == f.shortName || (f.altShort && arg == f.altShort) || arg == f.longName) {
        flag = &f;
        break;
      }
      const std::string eq = std::string(f.longName) + "=";
      if (arg.compare(0, eq.size(), eq) == 0) {
        flag = &f;
        value = argv[i] + eq.size();
        break;
      }
    }
    if (!flag) {
      *err = "unknown flag '" + arg + "'";
      return ParseResult::Error;
    }
    if (!value) {
      if (i + 1 >= argc) {
        *err = "flag '" + arg + "' needs a value";
        return ParseResult::Error;
      }
      value = argv[++i];
    }
    const std::string name = flag->shortName;
    bool ok = true;
    if (name == "-b") {
      ok = parseSize(value, &o->minBytes);
    } else if (name == "-e") {
      ok = parseSize(value, &o->maxBytes);
    } else if (name == "-f") {
      int f = 0;
      ok = parseInt(value, 2, 1 << 20, &f);
      if (ok) {
        o->stepFactor = static_cast<size_t>(f);
        o->stepBytes = 0;
      }
    } else if (name == "-i") {
      size_t b = 0;
      ok = parseSize(value, &b) && b > 0;
      if (ok) o->stepBytes = b;
    } else if (name == "-n") {
      ok = parseInt(value, 1, 1 << 30, &o->iters);
    } else if (name == "-w") {
      ok = parseInt(value, 0, 1 << 30, &o->warmup);
    } else if (name == "-c") {
      ok = parseInt(value, 0, 1, &o->check);
    } else if (name == "-d") {
      ok = parseDtypes(value, &o->dtypes);
    } else if (name == "-o") {
      ok = parseOps(value, &o->ops);
    } else if (name == "-r") {
      ok = parseInt(value, 0, 1 << 30, &o->root);
    } else if (name == "-z") {
      ok = parseInt(value, 0, 1, &o->blocking);
    } else if (name == "-np") {
      ok = parseInt(value, 1, 4096, &o->nprocs);
    } else if (name == "-t") {
      ok = parseInt(value, 1, 4096, &o->nthreads);
    } else if (name == "-a") {
      o->algo = value;
      ok = !o->algo.empty();
    } else if (name == "-R") {
      o->repro = value;
      ok = std::strcmp(value, "off") == 0 || std::strcmp(value, "ordered") == 0 ||
           std::strcmp(value, "exact") == 0;
    } else if (name == "-x") {
      o->wire = value;
      ok = std::strcmp(value, "none") == 0 || std::strcmp(value, "bf16") == 0 ||
           std::strcmp(value, "fp16") == 0;
    } else if (name == "-B") {
      ok = parseInt(value, 0, 1, &o->bind);
    } else if (name == "-G") {
      ok = parseInt(value, 0, 1, &o->device);
    } else if (name == "-T") {
      ok = parseDouble(value, &o->timeBudget) && o->timeBudget > 0;
    } else if (name == "-W") {
      ok = parseDouble(value, &o->warmupSeconds) && o->warmupSeconds >= 0;
    }
    if (!ok) {
      *err = "bad value '" + std::string(value) + "' for " + arg;
      return ParseResult::Error;
    }
  }
  if (o->minBytes > o->maxBytes) {
    *err = "minbytes (-b) is larger than maxbytes (-e)";
    return ParseResult::Error;
  }
  if (static_cast<long>(o->nprocs > 0 ? o->nprocs : 1) * (o->nthreads > 0 ? o->nthreads : 1) >
      4096) {
    *err = "too many ranks (-np x -t > 4096)";
    return ParseResult::Error;
  }
  return ParseResult::Ok;
}

}  // namespace weftperf
