// Reduction operators: NCCL's built-in ops are weft's (same values), and
// ncclRedOpCreatePreMulSum makes a per-communicator op "sum of scalar * x".
//
// weft has no pre-multiplied sum, so the shim builds it from two weft
// pieces: it multiplies a copy of the input by the scalar with weft's host
// reduction kernel (weft::reduceHost with PROD, the same arithmetic as every
// other weft reduction: integers wrap, half/bfloat16/fp8 are multiplied in
// float and rounded to nearest even), then runs the collective with SUM on
// that copy. The copy lives until the call returns, or until the outermost
// ncclGroupEnd for a call inside a group.
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "kernels/cpu/reduce.h"
#include "shim/shim.h"

namespace weft {
namespace shim {

ncclResult_t resolveOp(ncclComm* c, const char* fn, ncclRedOp_t op, ncclDataType_t dt,
                       OpChoice* out) {
  const int v = static_cast<int>(op);
  if (v >= 0 && v < static_cast<int>(ncclNumOps)) {
    out->op = static_cast<weft_op_t>(v);
    out->preMul = false;
    return ncclSuccess;
  }
  std::lock_guard<std::mutex> lk(c->mu);
  const size_t idx = static_cast<size_t>(v) - static_cast<size_t>(ncclNumOps);
  if (v < 0 || idx >= c->ops.size() || !c->ops[idx].live) {
    std::string msg = std::string(fn) + ": op " + std::to_string(v) +
                      " is neither a built-in ncclRedOp_t nor an op created on this communicator";
    c->lastError = msg;
    return setError(nullptr, ncclInvalidArgument, msg);
  }
  const ShimRedOp& r = c->ops[idx];
  if (static_cast<int>(r.dtype) != static_cast<int>(dt)) {
    std::string msg = std::string(fn) + ": op " + std::to_string(v) + " was created for datatype " +
                      std::to_string(r.dtype) + ", not " + std::to_string(dt);
    c->lastError = msg;
    return setError(nullptr, ncclInvalidArgument, msg);
  }
  out->op = WEFT_SUM;
  out->preMul = true;
  const size_t elt = datatypeSize(r.dtype);
  memcpy(out->scalar, r.residence == ncclScalarDevice ? r.pointer : r.value, elt);
  return ncclSuccess;
}

ncclResult_t preMultiply(ncclComm* c, const char* fn, const void* in, size_t count,
                         weft_datatype_t dt, const unsigned char* scalar, const void** out,
                         std::unique_ptr<unsigned char[]>* keep) {
  const size_t elt = datatypeSize(dt);
  if (count == 0) {
    *out = in;
    return ncclSuccess;
  }
  if (!in)
    return setError(c, ncclInvalidArgument,
                    std::string(fn) + ": sendbuff is NULL with count " + std::to_string(count));
  if (count > SIZE_MAX / elt)
    return setError(c, ncclInvalidArgument,
                    std::string(fn) + ": count " + std::to_string(count) + " is too large");
  std::unique_ptr<unsigned char[]> buf(new (std::nothrow) unsigned char[count * elt]);
  if (!buf)
    return setError(c, ncclSystemError,
                    std::string(fn) + ": no memory for the PreMulSum copy of " +
                        std::to_string(count * elt) + " bytes");
  // A block of scalars to multiply against, reused along the input.
  constexpr size_t kBlock = 512;
  unsigned char scalars[kBlock * 8];
  for (size_t i = 0; i < kBlock; ++i) memcpy(scalars + i * elt, scalar, elt);
  const auto* src = static_cast<const unsigned char*>(in);
  for (size_t done = 0; done < count; done += kBlock) {
    const size_t n = count - done < kBlock ? count - done : kBlock;
    reduceHost(buf.get() + done * elt, src + done * elt, scalars, n, dt, WEFT_PROD);
  }
  *out = buf.get();
  *keep = std::move(buf);
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
  if (!op || !scalar)
    return setError(c.get(), ncclInvalidArgument, std::string(fn) + ": op or scalar is NULL");
  if (static_cast<int>(datatype) < 0 || datatype >= ncclNumTypes)
    return setError(
        c.get(), ncclInvalidArgument,
        std::string(fn) + ": datatype " + std::to_string(datatype) + " is not an ncclDataType_t");
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return setError(c.get(), ncclInvalidArgument,
                    std::string(fn) + ": residence " + std::to_string(residence) +
                        " is not an ncclScalarResidence_t");
  if (isDeviceMemory(scalar))
    return setError(c.get(), ncclInvalidUsage,
                    std::string(fn) +
                        ": the scalar is in CUDA device memory; weft scales on the host, so "
                        "the scalar must be host memory");
  ShimRedOp r;
  r.live = true;
  r.dtype = static_cast<weft_datatype_t>(datatype);
  r.residence = residence;
  // Host immediate: read now. Device residence on host memory: read at each
  // collective call, when NCCL's kernels would read it.
  if (residence == ncclScalarHostImmediate)
    memcpy(r.value, scalar, weft::datatypeSize(r.dtype));
  else
    r.pointer = scalar;
  std::lock_guard<std::mutex> lk(c->mu);
  size_t idx = 0;
  while (idx < c->ops.size() && c->ops[idx].live) ++idx;
  if (idx + static_cast<size_t>(ncclNumOps) >= static_cast<size_t>(ncclMaxRedOp)) {
    c->lastError = std::string(fn) + ": too many live ops on this communicator";
    return setError(nullptr, ncclInvalidUsage, c->lastError);
  }
  if (idx == c->ops.size())
    c->ops.push_back(r);
  else
    c->ops[idx] = r;
  *op = static_cast<ncclRedOp_t>(static_cast<int>(ncclNumOps) + static_cast<int>(idx));
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclRedOpCreatePreMulSum)

ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  const char* fn = "ncclRedOpDestroy";
  CommRef c;
  if (ncclResult_t r = acquire(comm, fn, &c, true); r != ncclSuccess) return r;
  const int v = static_cast<int>(op);
  std::lock_guard<std::mutex> lk(c->mu);
  const size_t idx = static_cast<size_t>(v) - static_cast<size_t>(ncclNumOps);
  if (v < static_cast<int>(ncclNumOps) || idx >= c->ops.size() || !c->ops[idx].live) {
    c->lastError = std::string(fn) + ": op " + std::to_string(v) +
                   " was not created by ncclRedOpCreatePreMulSum on this communicator";
    return setError(nullptr, ncclInvalidArgument, c->lastError);
  }
  c->ops[idx] = ShimRedOp();
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclRedOpDestroy)

}  // extern "C"
