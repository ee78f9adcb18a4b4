// What weft is told about a tensor: its reduction datatype and op (torch's
// ReduceOp onto weft_op_t), and the checks every call makes first.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <ATen/ATen.h>
#include <weft.h>

namespace weft_torch {

// How one tensor is reduced.
struct Reduction {
  weft_datatype_t dtype = WEFT_FLOAT32;
  weft_op_t op = WEFT_SUM;
  size_t count = 0;  // elements of `dtype` (complex: twice the tensor's)
  // PREMUL_SUM: each rank scales its input by `factor` (a number or a
  // one-element tensor), then weft sums.
  bool premul = false;
  double factor = 1;
  at::Tensor factorTensor;
};

// Raises (naming `call`) when weft cannot reduce `t` with `op`: an int16
// or uint16 tensor, a complex tensor with MIN/MAX/PRODUCT, AVG of bool, a
// bitwise op on a floating tensor.
Reduction reduction(const at::Tensor& t, const c10d::ReduceOp& op, const char* call);
// `t` scaled by the PREMUL_SUM factor, as a new contiguous tensor.
at::Tensor premultiplied(const at::Tensor& t, const Reduction& r);

// Raises unless `t` is a dense CPU tensor (naming `call` and `what`).
void checkTensor(const at::Tensor& t, const char* call, const char* what);
// Raises unless `root` is a rank of a group of `size`.
void checkRoot(int64_t root, int size, const char* call);
// Raises unless `tensors` holds exactly one tensor.
void checkSingle(const std::vector<at::Tensor>& tensors, const char* call);
// Raises unless `t` has `dtype` and `numel` elements.
void checkLike(const at::Tensor& t, at::ScalarType dtype, int64_t numel, const char* call,
               const char* what);

}  // namespace weft_torch
