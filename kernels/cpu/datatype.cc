// Sizes and names of the API's datatypes and ops.
#include "kernels/cpu/reduce.h"

namespace weft {

size_t datatypeSize(weft_datatype_t dt) {
  switch (dt) {
    case WEFT_INT8:
    case WEFT_UINT8:
    case WEFT_FP8_E4M3:
    case WEFT_FP8_E5M2:
      return 1;
    case WEFT_FLOAT16:
    case WEFT_BFLOAT16:
      return 2;
    case WEFT_INT32:
    case WEFT_UINT32:
    case WEFT_FLOAT32:
      return 4;
    case WEFT_INT64:
    case WEFT_UINT64:
    case WEFT_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

const char* datatypeName(weft_datatype_t dt) {
  switch (dt) {
    case WEFT_INT8:
      return "int8";
    case WEFT_UINT8:
      return "uint8";
    case WEFT_INT32:
      return "int32";
    case WEFT_UINT32:
      return "uint32";
    case WEFT_INT64:
      return "int64";
    case WEFT_UINT64:
      return "uint64";
    case WEFT_FLOAT16:
      return "half";
    case WEFT_FLOAT32:
      return "float";
    case WEFT_FLOAT64:
      return "double";
    case WEFT_BFLOAT16:
      return "bfloat16";
    case WEFT_FP8_E4M3:
      return "f8e4m3";
    case WEFT_FP8_E5M2:
      return "f8e5m2";
    default:
      return "unknown";
  }
}

const char* opName(weft_op_t op) {
  switch (op) {
    case WEFT_SUM:
      return "sum";
    case WEFT_PROD:
      return "prod";
    case WEFT_MAX:
      return "max";
    case WEFT_MIN:
      return "min";
    case WEFT_AVG:
      return "avg";
    case WEFT_BAND:
      return "band";
    case WEFT_BOR:
      return "bor";
    case WEFT_BXOR:
      return "bxor";
    default:
      return "unknown";
  }
}

}  // namespace weft
