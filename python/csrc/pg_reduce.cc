// ProcessGroupWeft's reductions: allreduce (and coalesced), reduce,
// reduce_scatter (list, tensor, coalesced).
#include "process_group.h"

#include <c10/util/Exception.h>

#include "convert.h"
#include "staging.h"

namespace weft_torch {

using Ptr = c10::intrusive_ptr<c10d::Work>;
using c10d::OpType;

Ptr ProcessGroupWeft::allreduceOne(at::Tensor t, const c10d::ReduceOp& rop,
                                   std::chrono::milliseconds timeout, bool asyncOp,
                                   const char* name) {
  checkTensor(t, name, "the tensor");
  Reduction r = reduction(t, rop, name);
  at::Tensor buf = r.premul ? premultiplied(t, r) : writable(t);
  Op op = makeOp(name, OpType::ALLREDUCE, "weft:all_reduce", {t}, {t}, timeout);
  op.issue = [buf, r](weft_comm_t c, weft_stream_t s) {
    return weft_allreduce(ptr(buf), ptr(buf), r.count, r.dtype, r.op, c, s);
  };
  if (!buf.is_same(t)) op.after = [t, buf]() { copyBack(t, buf); };
  return run(std::move(op), asyncOp);
}

Ptr ProcessGroupWeft::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  checkSingle(tensors, "allreduce");
  return allreduceOne(tensors[0], opts.reduceOp, opts.timeout, opts.asyncOp, "allreduce");
}

Ptr ProcessGroupWeft::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                          const c10d::AllreduceCoalescedOptions& opts) {
  const char* name = "allreduce_coalesced";
  TORCH_CHECK(!tensors.empty(), "weft: ", name, " needs at least one tensor");
  std::vector<at::Tensor> bufs;
  std::vector<Reduction> rs;
  for (const at::Tensor& t : tensors) {
    checkTensor(t, name, "a tensor");
    rs.push_back(reduction(t, opts.reduceOp, name));
    bufs.push_back(rs.back().premul ? premultiplied(t, rs.back()) : writable(t));
  }
  Op op = makeOp(name, OpType::ALLREDUCE_COALESCED, "weft:all_reduce_coalesced", tensors, tensors,
                 opts.timeout);
  op.issue = [bufs, rs](weft_comm_t c, weft_stream_t s) {
    return groupedEach(bufs.size(), [&](size_t i) {
      return weft_allreduce(ptr(bufs[i]), ptr(bufs[i]), rs[i].count, rs[i].dtype, rs[i].op, c,
                            s);
    });
  };
  op.after = copyBackAll(tensors, bufs);
  return run(std::move(op), opts.asyncOp);
}

Ptr ProcessGroupWeft::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const char* name = "reduce";
  checkSingle(tensors, name);
  at::Tensor t = tensors[0];
  checkTensor(t, name, "the tensor");
  const int root = static_cast<int>(opts.rootRank);
  checkRoot(opts.rootRank, getSize(), "reduce");
  Reduction r = reduction(t, opts.reduceOp, name);
  at::Tensor buf = r.premul ? premultiplied(t, r) : writable(t);
  const bool isRoot = getRank() == root;
  Op op = makeOp(name, OpType::REDUCE, "weft:reduce", {t}, {t}, opts.timeout);
  // Non-roots: weft reads buf and writes nothing.
  op.issue = [buf, r, root](weft_comm_t c, weft_stream_t s) {
    return weft_reduce(ptr(buf), ptr(buf), r.count, r.dtype, r.op, root, c, s);
  };
  op.after = [t, buf, isRoot]() {
    if (isRoot) copyBack(t, buf);
  };
  return run(std::move(op), opts.asyncOp);
}

Ptr ProcessGroupWeft::reduce_scatter(std::vector<at::Tensor>& outputs,
                                     std::vector<std::vector<at::Tensor>>& inputs,
                                     const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter";
  checkSingle(outputs, name);
  TORCH_CHECK(inputs.size() == 1, "weft: ", name, " takes one list of inputs, not ", inputs.size());
  at::Tensor out = outputs[0];
  checkTensor(out, name, "the output");
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == getSize(), "weft: ", name, " needs ",
              getSize(), " input tensors (one per rank), not ", inputs[0].size());
  for (const at::Tensor& t : inputs[0]) {
    checkTensor(t, name, "an input");
    checkLike(t, out.scalar_type(), out.numel(), name, "an input");
  }
  Reduction r = reduction(out, opts.reduceOp, name);
  at::Tensor flat = flatCat(inputs[0]);
  if (r.premul) flat = premultiplied(flat, r);
  at::Tensor buf = writable(out);
  Op op = makeOp(name, OpType::REDUCE_SCATTER, "weft:reduce_scatter", inputs[0], {out},
                 opts.timeout);
  op.issue = [flat, buf, r](weft_comm_t c, weft_stream_t s) {
    return weft_reduce_scatter(ptr(flat), ptr(buf), r.count, r.dtype, r.op, c, s);
  };
  op.after = [out, buf]() { copyBack(out, buf); };
  return run(std::move(op), opts.asyncOp);
}

Ptr ProcessGroupWeft::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                           const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return reduce_scatter_tensor_coalesced(outs, ins, opts);
}

Ptr ProcessGroupWeft::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::ReduceScatterOptions& opts) {
  const char* name = outputs.size() == 1 ? "reduce_scatter_tensor" : "reduce_scatter_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size() && !outputs.empty(), "weft: ", name,
              " needs as many outputs as inputs (got ", outputs.size(), " and ", inputs.size(), ")");
  std::vector<at::Tensor> ins, bufs;
  std::vector<Reduction> rs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    checkTensor(outputs[i], name, "the output");
    checkTensor(inputs[i], name, "the input");
    checkLike(inputs[i], outputs[i].scalar_type(), outputs[i].numel() * getSize(), name, "the input");
    rs.push_back(reduction(outputs[i], opts.reduceOp, name));
    ins.push_back(rs.back().premul ? premultiplied(inputs[i], rs.back()) : inputs[i].contiguous());
    bufs.push_back(writable(outputs[i]));
  }
  Op op = makeOp(name, outputs.size() == 1 ? OpType::_REDUCE_SCATTER_BASE
                                           : OpType::REDUCE_SCATTER_TENSOR_COALESCED,
                 "weft:reduce_scatter_tensor", inputs, outputs, opts.timeout);
  op.issue = [ins, bufs, rs](weft_comm_t c, weft_stream_t s) {
    return groupedEach(bufs.size(), [&](size_t i) {
      return weft_reduce_scatter(ptr(ins[i]), ptr(bufs[i]), rs[i].count, rs[i].dtype, rs[i].op, c,
                                 s);
    });
  };
  op.after = copyBackAll(outputs, bufs);
  return run(std::move(op), opts.asyncOp);
}

}  // namespace weft_torch
