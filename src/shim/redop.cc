// Reduction operators: NCCL's built-in ops are weft's (same values), and
// ncclRedOpCreatePreMulSum is weft_op_create_premul_sum on the shim comm's
// weft communicator: the op value weft hands out (WEFT_NUM_OPS and up) is
// the ncclRedOp_t, so a collective passes it through unchanged and weft
// checks it (live on this comm, made for this datatype) and scales the
// input (src/api/api_premul.cc). weft's own ops between ncclNumOps and
// WEFT_NUM_OPS (the bitwise ones) are not NCCL's and are refused.
#include <string>

#include "shim/shim.h"

namespace weft {
namespace shim {

namespace {

bool weftOnly(int v) {
  return v >= static_cast<int>(ncclNumOps) && v < static_cast<int>(WEFT_NUM_OPS);
}

}  // namespace

ncclResult_t resolveOp(ncclComm* c, const char* fn, ncclRedOp_t op, weft_op_t* out) {
  const int v = static_cast<int>(op);
  if (v < 0 || weftOnly(v))
    return setError(c, ncclInvalidArgument,
                    std::string(fn) + ": op " + std::to_string(v) +
                        " is neither a built-in ncclRedOp_t nor an op created on this "
                        "communicator");
  *out = static_cast<weft_op_t>(v);  // built-in, or weft's premul op: weft checks it
  return ncclSuccess;
}

}  // namespace shim
}  // namespace weft

using namespace weft::shim;

extern "C" {

ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm) {
  const char* fn = "ncclRedOpCreatePreMulSum";
  CommRef c;
  if (ncclResult_t r = acquire(comm, fn, &c); r != ncclSuccess) return r;
  if (!op) return setError(c.get(), ncclInvalidArgument, std::string(fn) + ": op is NULL");
  static_assert(static_cast<int>(ncclScalarDevice) == WEFT_SCALAR_DEVICE &&
                    static_cast<int>(ncclScalarHostImmediate) == WEFT_SCALAR_HOST_IMMEDIATE,
                "weft_scalar_residence_t has NCCL's values");
  weft_op_t w = WEFT_SUM;
  weft_result_t r = weft_op_create_premul_sum(&w, scalar, static_cast<weft_datatype_t>(datatype),
                                              static_cast<weft_scalar_residence_t>(residence),
                                              c->wc);
  if (r != WEFT_SUCCESS) return fromWeft(c.get(), r, fn);
  *op = static_cast<ncclRedOp_t>(w);
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclRedOpCreatePreMulSum)

ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  const char* fn = "ncclRedOpDestroy";
  CommRef c;
  if (ncclResult_t r = acquire(comm, fn, &c, true); r != ncclSuccess) return r;
  const int v = static_cast<int>(op);
  if (v < static_cast<int>(WEFT_NUM_OPS))
    return setError(c.get(), ncclInvalidArgument,
                    std::string(fn) + ": op " + std::to_string(v) +
                        " was not created by ncclRedOpCreatePreMulSum on this communicator");
  weft_result_t r = weft_op_destroy(static_cast<weft_op_t>(v), c->wc);
  return r == WEFT_SUCCESS ? ncclSuccess : fromWeft(c.get(), r, fn);
}
WEFT_NCCL_ALIAS(ncclRedOpDestroy)

}  // extern "C"
