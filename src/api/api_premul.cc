// Pre-multiplied sums (weft_op_create_premul_sum): per-communicator ops
// "sum of scalar * x". The table lives in the Comm; api_coll.cc scales a
// call's input with the op's scalar (premulScalar) and runs it as SUM.
#include <cstring>

#include "api/api_state.h"
#include "cuda/mem_rules.h"
#include "cuda/runtime.h"
#include "kernels/cpu/reduce.h"

namespace weft {
namespace {

// The live op of value `op` on `c`, or NULL. The caller holds c->mu.
Comm::PremulOp* liveOp(Comm* c, int op) {
  const size_t idx = static_cast<size_t>(op) - WEFT_NUM_OPS;
  if (op < WEFT_NUM_OPS || idx >= c->premulOps.size() || !c->premulOps[idx].live) return nullptr;
  return &c->premulOps[idx];
}

}  // namespace

Status premulScalar(Comm* c, int op, int dtype, const char* name, unsigned char* out) {
  std::lock_guard<Mutex> lk(c->mu);
  const Comm::PremulOp* found = liveOp(c, op);
  if (!found)
    return invalidArgument(strFormat(
        "%s: op %d is neither a weft_op_t nor an op made by weft_op_create_premul_sum on this "
        "communicator",
        name, op));
  const Comm::PremulOp& p = *found;
  if (static_cast<int>(p.dtype) != dtype)
    return invalidArgument(strFormat("%s: op %d was made for datatype %s, not %s", name, op,
                                     datatypeName(p.dtype),
                                     datatypeName(static_cast<weft_datatype_t>(dtype))));
  std::memcpy(out, p.pointer ? p.pointer : p.value, datatypeSize(p.dtype));
  return Status();
}

}  // namespace weft

using namespace weft;

extern "C" {

weft_result_t weft_op_create_premul_sum(weft_op_t* op, const void* scalar,
                                        weft_datatype_t datatype,
                                        weft_scalar_residence_t residence, weft_comm_t comm) {
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  const int dt = static_cast<int>(datatype), res = static_cast<int>(residence);
  if (!op || !scalar)
    return setError(c.get(), invalidArgument("weft_op_create_premul_sum: op or scalar is NULL"));
  if (dt < 0 || dt >= WEFT_NUM_DATATYPES)
    return setError(c.get(), invalidArgument(strFormat(
                                 "weft_op_create_premul_sum: datatype %d is not a weft_datatype_t",
                                 dt)));
  if (res != WEFT_SCALAR_DEVICE && res != WEFT_SCALAR_HOST_IMMEDIATE)
    return setError(c.get(), invalidArgument(strFormat("weft_op_create_premul_sum: residence %d "
                                                       "is not a weft_scalar_residence_t",
                                                       res)));
  if (cuda::driverLoaded() &&
      cuda::describePointer("scalar", scalar).kind == cuda::MemKind::Device)
    return setError(c.get(), invalidUsage("weft_op_create_premul_sum: the scalar is in CUDA "
                                          "device memory; weft scales on the host, so it must "
                                          "be host memory"));
  Comm::PremulOp p;
  p.live = true;
  p.dtype = datatype;
  if (res == WEFT_SCALAR_HOST_IMMEDIATE)
    std::memcpy(p.value, scalar, datatypeSize(datatype));
  else
    p.pointer = scalar;  // read at each call, as NCCL's kernels would
  std::lock_guard<Mutex> lk(c->mu);
  size_t idx = 0;
  while (idx < c->premulOps.size() && c->premulOps[idx].live) ++idx;
  constexpr size_t kMaxOps = size_t{1} << 20;
  if (idx >= kMaxOps)
    return setError(c.get(), invalidUsage(strFormat("weft_op_create_premul_sum: %zu ops are live "
                                                    "on this communicator; destroy some first",
                                                    idx)));
  if (idx == c->premulOps.size())
    c->premulOps.push_back(p);
  else
    c->premulOps[idx] = p;
  *op = static_cast<weft_op_t>(WEFT_NUM_OPS + static_cast<int>(idx));
  return WEFT_SUCCESS;
}

weft_result_t weft_op_destroy(weft_op_t op, weft_comm_t comm) {
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  const int v = static_cast<int>(op);
  weft_op_t base;
  Wire wire;
  if (decodeWireOp(v, &base, &wire)) return WEFT_SUCCESS;  // nothing to free (comm.h)
  std::lock_guard<Mutex> lk(c->mu);
  Comm::PremulOp* found = liveOp(c.get(), v);
  if (!found)
    return setError(c.get(), invalidArgument(strFormat("weft_op_destroy: op %d was not made by "
                                                       "weft_op_create_premul_sum on this "
                                                       "communicator",
                                                       v)));
  *found = Comm::PremulOp();
  return WEFT_SUCCESS;
}

}  // extern "C"
