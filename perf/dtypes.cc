#include "dtypes.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "kernels/ops.h"  // header-only: the same conversions the kernels use

namespace weftperf {

namespace {

constexpr double kTwo53 = 9007199254740992.0;

// Indexed by weft_datatype_t.
const DtypeInfo kTypes[WEFT_NUM_DATATYPES] = {
    {WEFT_INT8, "int8", 1, Kind::Signed, 127.0, 6, 0, 0, false},
    {WEFT_UINT8, "uint8", 1, Kind::Unsigned, 255.0, 7, 0, 0, false},
    {WEFT_INT32, "int32", 4, Kind::Signed, 2147483647.0, 30, 0, 0, false},
    {WEFT_UINT32, "uint32", 4, Kind::Unsigned, 4294967295.0, 31, 0, 0, false},
    {WEFT_INT64, "int64", 8, Kind::Signed, kTwo53, 62, 0, 0, false},
    {WEFT_UINT64, "uint64", 8, Kind::Unsigned, kTwo53, 63, 0, 0, false},
    {WEFT_FLOAT16, "half", 2, Kind::Float, 2048.0, 15, 5, 10, true},
    {WEFT_FLOAT32, "float", 4, Kind::Float, 16777216.0, 127, 0, 0, false},
    {WEFT_FLOAT64, "double", 8, Kind::Float, kTwo53, 1023, 0, 0, false},
    {WEFT_BFLOAT16, "bfloat16", 2, Kind::Float, 256.0, 127, 8, 7, true},
    {WEFT_FP8_E4M3, "f8e4m3", 1, Kind::Float, 16.0, 8, 4, 3, false},
    {WEFT_FP8_E5M2, "f8e5m2", 1, Kind::Float, 8.0, 15, 5, 2, true},
};

struct Alias {
  const char* name;
  weft_datatype_t dt;
};

const Alias kAliases[] = {
    {"char", WEFT_INT8},       {"int", WEFT_INT32},          {"uint", WEFT_UINT32},
    {"float16", WEFT_FLOAT16}, {"fp16", WEFT_FLOAT16},       {"float32", WEFT_FLOAT32},
    {"fp32", WEFT_FLOAT32},    {"float64", WEFT_FLOAT64},    {"fp64", WEFT_FLOAT64},
    {"bf16", WEFT_BFLOAT16},   {"fp8_e4m3", WEFT_FP8_E4M3},  {"e4m3", WEFT_FP8_E4M3},
    {"fp8_e5m2", WEFT_FP8_E5M2}, {"e5m2", WEFT_FP8_E5M2},
};

const char* const kOpNames[kPerfOps] = {"sum", "prod", "max", "min", "avg"};

}  // namespace

const DtypeInfo* dtypeInfo(weft_datatype_t dt) {
  const int i = static_cast<int>(dt);
  if (i < 0 || i >= WEFT_NUM_DATATYPES) return nullptr;
  return &kTypes[i];
}

bool dtypeByName(const char* name, weft_datatype_t* out) {
  for (const DtypeInfo& t : kTypes) {
    if (strcasecmp(name, t.name) == 0) {
      *out = t.dt;
      return true;
    }
  }
  for (const Alias& a : kAliases) {
    if (strcasecmp(name, a.name) == 0) {
      *out = a.dt;
      return true;
    }
  }
  return false;
}

int allDtypes(weft_datatype_t* out, int max) {
  int n = 0;
  for (const DtypeInfo& t : kTypes) {
    if (n < max) out[n++] = t.dt;
  }
  return n;
}

const char* opName(weft_op_t op) {
  const int i = static_cast<int>(op);
  if (i < 0 || i >= kPerfOps) return "?";
  return kOpNames[i];
}

bool opByName(const char* name, weft_op_t* out) {
  for (int i = 0; i < kPerfOps; ++i) {
    if (strcasecmp(name, kOpNames[i]) == 0) {
      *out = static_cast<weft_op_t>(i);
      return true;
    }
  }
  return false;
}

void encodeValue(const DtypeInfo& t, double v, void* dst) {
  switch (t.dt) {
    case WEFT_INT8: {
      int8_t x = static_cast<int8_t>(static_cast<int64_t>(v));
      std::memcpy(dst, &x, 1);
      return;
    }
    case WEFT_UINT8: {
      uint8_t x = static_cast<uint8_t>(static_cast<uint64_t>(v));
      std::memcpy(dst, &x, 1);
      return;
    }
    case WEFT_INT32: {
      int32_t x = static_cast<int32_t>(static_cast<int64_t>(v));
      std::memcpy(dst, &x, 4);
      return;
    }
    case WEFT_UINT32: {
      uint32_t x = static_cast<uint32_t>(static_cast<uint64_t>(v));
      std::memcpy(dst, &x, 4);
      return;
    }
    case WEFT_INT64: {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(dst, &x, 8);
      return;
    }
    case WEFT_UINT64: {
      uint64_t x = static_cast<uint64_t>(v);
      std::memcpy(dst, &x, 8);
      return;
    }
    case WEFT_FLOAT32: {
      float x = static_cast<float>(v);
      std::memcpy(dst, &x, 4);
      return;
    }
    case WEFT_FLOAT64:
      std::memcpy(dst, &v, 8);
      return;
    case WEFT_FLOAT16: {
      weft::half_t x = weft::floatToHalf(static_cast<float>(v));
      std::memcpy(dst, &x, 2);
      return;
    }
    case WEFT_BFLOAT16: {
      weft::bf16_t x = weft::floatToBf16(static_cast<float>(v));
      std::memcpy(dst, &x, 2);
      return;
    }
    case WEFT_FP8_E4M3: {
      weft::fp8e4m3_t x = weft::floatToFp8e4m3(static_cast<float>(v));
      std::memcpy(dst, &x, 1);
      return;
    }
    case WEFT_FP8_E5M2: {
      weft::fp8e5m2_t x = weft::floatToFp8e5m2(static_cast<float>(v));
      std::memcpy(dst, &x, 1);
      return;
    }
    default:
      return;
  }
}

double decodeValue(const DtypeInfo& t, const void* src) {
  switch (t.dt) {
    case WEFT_INT8: {
      int8_t x;
      std::memcpy(&x, src, 1);
      return x;
    }
    case WEFT_UINT8: {
      uint8_t x;
      std::memcpy(&x, src, 1);
      return x;
    }
    case WEFT_INT32: {
      int32_t x;
      std::memcpy(&x, src, 4);
      return x;
    }
    case WEFT_UINT32: {
      uint32_t x;
      std::memcpy(&x, src, 4);
      return x;
    }
    case WEFT_INT64: {
      int64_t x;
      std::memcpy(&x, src, 8);
      return static_cast<double>(x);
    }
    case WEFT_UINT64: {
      uint64_t x;
      std::memcpy(&x, src, 8);
      return static_cast<double>(x);
    }
    case WEFT_FLOAT32: {
      float x;
      std::memcpy(&x, src, 4);
      return x;
    }
    case WEFT_FLOAT64: {
      double x;
      std::memcpy(&x, src, 8);
      return x;
    }
    case WEFT_FLOAT16: {
      weft::half_t x;
      std::memcpy(&x, src, 2);
      return weft::halfToFloat(x);
    }
    case WEFT_BFLOAT16: {
      weft::bf16_t x;
      std::memcpy(&x, src, 2);
      return weft::bf16ToFloat(x);
    }
    case WEFT_FP8_E4M3: {
      weft::fp8e4m3_t x;
      std::memcpy(&x, src, 1);
      return weft::fp8e4m3ToFloat(x);
    }
    case WEFT_FP8_E5M2: {
      weft::fp8e5m2_t x;
      std::memcpy(&x, src, 1);
      return weft::fp8e5m2ToFloat(x);
    }
    default:
      return NAN;
  }
}

bool elementMatches(const DtypeInfo& t, const void* elem, double expected) {
  if (t.kind != Kind::Float) {
    unsigned char want[8];
    encodeValue(t, expected, want);
    return std::memcmp(want, elem, t.size) == 0;
  }
  return decodeValue(t, elem) == expected;
}

// The values' type: float32's, or under WEFT_WIRE the wire format's range of
// exact integers, so that partial sums rounded to it stay exact and -c 1
// still checks every element bit for bit (docs/compression.md).
DtypeInfo valueType(const DtypeInfo& t) {
  const char* w = std::getenv("WEFT_WIRE");
  if (t.dt != WEFT_FLOAT32 || !w) return t;
  DtypeInfo v = t;
  if (std::strcmp(w, "bf16") == 0) v.budget = std::min(t.budget, dtypeInfo(WEFT_BFLOAT16)->budget);
  if (std::strcmp(w, "fp16") == 0) v.budget = std::min(t.budget, dtypeInfo(WEFT_FLOAT16)->budget);
  return v;
}

}  // namespace weftperf
