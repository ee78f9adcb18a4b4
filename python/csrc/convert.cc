#include "convert.h"

#include "placement.h"

#include <c10/util/Exception.h>

namespace weft_torch {
namespace {

const char* opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "an unknown op";
  }
}

}  // namespace

void checkTensor(const at::Tensor& t, const char* call, const char* what) {
  TORCH_CHECK(t.defined(), "weft: ", call, ": ", what, " is an undefined tensor");
  TORCH_CHECK(t.device().is_cpu() || (t.device().is_cuda() && cudaTensorsSupported()), "weft: ",
              call, ": ", what, " is on ", t.device(),
              cudaTensorsSupported() ? "; the weft backend takes CPU and CUDA tensors"
                                     : "; this build of the weft backend takes CPU tensors (weft or "
                                       "torch was built without CUDA; use backend "
                                       "\"cpu:weft,cuda:nccl\" for CUDA tensors)");
  TORCH_CHECK(t.layout() == at::kStrided, "weft: ", call, ": ", what,
              " is not a dense tensor (layout ", t.layout(), "); weft has no sparse collectives");
}

void checkRoot(int64_t root, int size, const char* call) {
  TORCH_CHECK(root >= 0 && root < size, "weft: ", call, ": root ", root, " is outside [0, ", size,
              ")");
}

void checkSingle(const std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(tensors.size() == 1, "weft: ", call, " takes one tensor per rank, not ",
              tensors.size());
}

void checkLike(const at::Tensor& t, at::ScalarType dtype, int64_t numel, const char* call,
               const char* what) {
  TORCH_CHECK(t.scalar_type() == dtype, "weft: ", call, ": ", what, " has dtype ",
              t.scalar_type(), " but the input has ", dtype);
  TORCH_CHECK(t.numel() == numel, "weft: ", call, ": ", what, " has ", t.numel(),
              " elements where ", numel, " are needed");
}

Reduction reduction(const at::Tensor& t, const c10d::ReduceOp& op, const char* call) {
  Reduction r;
  const auto kind = op.op_;
  const at::ScalarType st = t.scalar_type();
  const bool complex = at::isComplexType(st);
  r.count = static_cast<size_t>(t.numel()) * (complex ? 2 : 1);
  switch (st) {
    case at::kFloat: case at::kComplexFloat: r.dtype = WEFT_FLOAT32; break;
    case at::kDouble: case at::kComplexDouble: r.dtype = WEFT_FLOAT64; break;
    case at::kHalf: case at::kComplexHalf: r.dtype = WEFT_FLOAT16; break;
    case at::kBFloat16: r.dtype = WEFT_BFLOAT16; break;
    case at::kChar: r.dtype = WEFT_INT8; break;
    case at::kByte: case at::kBool: r.dtype = WEFT_UINT8; break;
    case at::kInt: r.dtype = WEFT_INT32; break;
    case at::kLong: r.dtype = WEFT_INT64; break;
    case at::kUInt32: r.dtype = WEFT_UINT32; break;
    case at::kUInt64: r.dtype = WEFT_UINT64; break;
    case at::kFloat8_e4m3fn: r.dtype = WEFT_FP8_E4M3; break;
    case at::kFloat8_e5m2: r.dtype = WEFT_FP8_E5M2; break;
    default:
      TORCH_CHECK(false, "weft: ", call, ": weft cannot reduce tensors of dtype ", st,
                  " (it reduces float64/32/16, bfloat16, float8 e4m3fn/e5m2, int8/32/64, "
                  "uint8/32/64, bool and complex); broadcast, gather, all-to-all and send/recv "
                  "take every dtype");
  }
  switch (kind) {
    case c10d::ReduceOp::SUM: r.op = WEFT_SUM; break;
    case c10d::ReduceOp::AVG: r.op = WEFT_AVG; break;
    case c10d::ReduceOp::PRODUCT: r.op = WEFT_PROD; break;
    case c10d::ReduceOp::MIN: r.op = WEFT_MIN; break;
    case c10d::ReduceOp::MAX: r.op = WEFT_MAX; break;
    case c10d::ReduceOp::PREMUL_SUM: {
      r.op = WEFT_SUM;
      r.premul = true;
      auto* sup = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(sup, "weft: ", call, ": PREMUL_SUM without its factor");
      if (sup->tensor_factor.defined())
        r.factorTensor = sup->tensor_factor;
      else
        r.factor = sup->double_factor;
      break;
    }
    case c10d::ReduceOp::BAND: case c10d::ReduceOp::BOR: case c10d::ReduceOp::BXOR:
      TORCH_CHECK(!at::isFloatingType(st) && !complex, "weft: ", call, ": ", opName(kind),
                  " needs an integer or bool tensor, not ", st);
      r.op = kind == c10d::ReduceOp::BAND ? WEFT_BAND
             : kind == c10d::ReduceOp::BOR ? WEFT_BOR
                                           : WEFT_BXOR;
      break;
    default:
      TORCH_CHECK(false, "weft: ", call, ": ", opName(kind), " is not a reduction weft knows");
  }
  if (complex)
    TORCH_CHECK(r.op == WEFT_SUM || r.op == WEFT_AVG, "weft: ", call, ": ", opName(kind),
                " is not defined for complex tensors (SUM, AVG and PREMUL_SUM are)");
  if (st == at::kBool) {
    // As NCCL's backend: a bool SUM is an OR (MAX), a PRODUCT an AND (MIN).
    TORCH_CHECK(r.op != WEFT_AVG && !r.premul, "weft: ", call, ": ", opName(kind),
                " is not defined for bool tensors");
    if (r.op == WEFT_SUM) r.op = WEFT_MAX;
    if (r.op == WEFT_PROD) r.op = WEFT_MIN;
  }
  return r;
}

at::Tensor premultiplied(const at::Tensor& t, const Reduction& r) {
  if (r.factorTensor.defined()) return (t * r.factorTensor.to(t.device())).to(t.scalar_type()).contiguous();
  return (t * r.factor).to(t.scalar_type()).contiguous();
}

}  // namespace weft_torch
