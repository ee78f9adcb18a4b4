// weft-perf: host-side knowledge of the weft datatypes and reduction ops.
//
// Only what the benchmark needs to fill buffers and verify results: the
// element size, the nccl-tests name, how to turn an (exactly representable)
// value into the element's bits and back, and the limits within which
// integer-valued results stay exact. Written against weft.h only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft.h"

namespace weftperf {

enum class Kind { Signed, Unsigned, Float };

struct DtypeInfo {
  weft_datatype_t dt;
  const char* name;  // nccl-tests name: "float", "half", "f8e4m3", ...
  size_t size;       // bytes per element
  Kind kind;
  // Every integer v with |v| <= budget (0 <= v <= budget for unsigned types)
  // is exactly representable, so sums, products, minima and maxima that stay
  // inside that range are exact whatever order the library combines them in.
  double budget;
  // The largest k such that +-2^k is exactly representable and finite.
  int pow2cap;
  // Minifloat layout (half, bfloat16, fp8); 0 for the other types.
  int ebits;
  int mbits;
  bool hasInf;  // false for f8e4m3 (OCP "FN": no infinity, one NaN pattern)
};

// The table entry of `dt`; nullptr when dt is out of range.
const DtypeInfo* dtypeInfo(weft_datatype_t dt);
// Looks up a datatype by name (nccl-tests names and a few aliases).
bool dtypeByName(const char* name, weft_datatype_t* out);
// All datatypes in enum order (for "-d all").
int allDtypes(weft_datatype_t* out, int max);

// The ops weft-perf runs: nccl-tests' five (sum prod max min avg). The
// bitwise ops have no floating pattern to check against and are left out.
constexpr int kPerfOps = WEFT_AVG + 1;
const char* opName(weft_op_t op);
bool opByName(const char* name, weft_op_t* out);

// Writes `v` into one element at `dst` (round to nearest even; fp8 saturates,
// half/bfloat16 overflow to infinity; integers are converted exactly, the
// caller keeps v in range).
void encodeValue(const DtypeInfo& t, double v, void* dst);
// Reads one element as a double (exact for every value weft-perf generates).
double decodeValue(const DtypeInfo& t, const void* src);
// Whether the element at `elem` holds exactly `expected`: bit-exact for
// integer types, numerically equal for floating types (NaN never matches).
bool elementMatches(const DtypeInfo& t, const void* elem, double expected);

// The values weft-perf fills for type t: t's, or for float32 under
// WEFT_WIRE the wire format's range of exact integers (dtypes.cc).
DtypeInfo valueType(const DtypeInfo& t);

}  // namespace weftperf
