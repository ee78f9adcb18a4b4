// weft-perf: command line.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "weft.h"

namespace weftperf {

enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, SendRecv };

const char* collName(Coll c);
bool collByName(const char* name, Coll* out);
bool collHasOp(Coll c);    // takes a reduction op
bool collHasRoot(Coll c);  // takes a root

struct Options {
  Coll coll = Coll::AllReduce;
  size_t minBytes = 8;
  size_t maxBytes = 64u << 20;
  size_t stepFactor = 2;  // used when stepBytes == 0
  size_t stepBytes = 0;   // additive step (-i); 0 = multiply by stepFactor
  int iters = 20;
  int warmup = 5;
  int check = 1;
  std::vector<weft_datatype_t> dtypes{WEFT_FLOAT32};
  std::vector<weft_op_t> ops{WEFT_SUM};
  int root = 0;
  int blocking = 1;
  int nprocs = 0;    // -np: fork this many local processes (0 = no)
  int nthreads = 0;  // -t: ranks as threads (0 = no)
  std::string algo;  // -a / -A
  std::string repro;  // -R: WEFT_REPRO
  std::string wire;   // -x: WEFT_WIRE
  double timeBudget = 0;  // -T seconds per size and placement; 0 = none
  // -W: warm-up seconds after the -w calls (0 = none). Rooted and gathering
  // collectives let ranks run ahead; their first tens of milliseconds of
  // back-to-back calls can differ from the steady state.
  double warmupSeconds = 0;
  int bind = 1;           // -B: pin forked ranks to CPUs round-robin (as mpirun does)
  int device = 0;         // -G: buffers in CUDA device memory, calls on a stream
};

enum class ParseResult { Ok, Help, Error };

// Parses argv. The collective comes from argv[0]'s basename when it is
// "weft-perf-<coll>", else from the first argument. On Error, *err says why.
ParseResult parseOptions(int argc, char** argv, Options* o, std::string* err);
void printUsage(FILE* f, const char* prog);

// "64M", "1G", "4096", "2k" -> bytes. False on garbage or overflow.
bool parseSize(const char* s, size_t* out);

}  // namespace weftperf
