// ProcessGroupWeft::allreduceWire: a compressed allreduce for the DDP comm
// hook (weft/torch/hooks.py, docs/compression.md). torch's ReduceOp has no
// place for a wire format, so the hook calls this instead of all_reduce; the
// op is weft_op_create_wire's (its value carries base op and format, so
// there is nothing to free).
#include <c10/util/Exception.h>

#include "convert.h"
#include "process_group.h"
#include "staging.h"

namespace weft_torch {

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allreduceWire(at::Tensor t, int wire,
                                                               bool average) {
  const char* name = "allreduce_wire";
  checkTensor(t, name, "the tensor");
  TORCH_CHECK(t.scalar_type() == at::kFloat, "weft: ", name,
              " compresses float32 tensors only, not ", t.scalar_type());
  TORCH_CHECK(!t.is_cuda(), "weft: ", name,
              " runs on CPU tensors only (weft narrows and "
              "widens on the host)");
  weft_op_t op = WEFT_SUM;
  weft_result_t res = weft_op_create_wire(&op, average ? WEFT_AVG : WEFT_SUM,
                                          static_cast<weft_wire_t>(wire), comm_);
  TORCH_CHECK(res == WEFT_SUCCESS, "weft: ", name, ": ", weft_get_last_error(comm_));
  Reduction r = reduction(t, c10d::ReduceOp(c10d::ReduceOp::SUM), name);
  at::Tensor buf = writable(t);
  Op o = makeOp(name, c10d::OpType::ALLREDUCE, "weft:all_reduce_wire", {t}, {t}, timeout_);
  o.issue = [buf, r, op](weft_comm_t c, weft_stream_t s) {
    return weft_allreduce(ptr(buf), ptr(buf), r.count, r.dtype, op, c, s);
  };
  if (!buf.is_same(t)) o.after = [t, buf]() { copyBack(t, buf); };
  return run(std::move(o), true);
}

}  // namespace weft_torch
