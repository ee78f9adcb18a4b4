// ProcessGroupWeft's data movement, on bytes (every dtype): broadcast,
// allgather (list, tensor, coalesced), gather, scatter, all-to-all.
#include "process_group.h"

#include <c10/util/Exception.h>

#include "convert.h"
#include "staging.h"

namespace weft_torch {

using Ptr = c10::intrusive_ptr<c10d::Work>;
using c10d::OpType;

Ptr ProcessGroupWeft::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const char* name = "broadcast";
  checkSingle(tensors, name);
  at::Tensor t = tensors[0];
  checkTensor(t, name, "the tensor");
  const int root = static_cast<int>(opts.rootRank);
  checkRoot(opts.rootRank, getSize(), "broadcast");
  at::Tensor buf = writable(t);
  Op op = makeOp(name, OpType::BROADCAST, "weft:broadcast", {t}, {t}, opts.timeout);
  op.issue = [buf, root](weft_comm_t c, weft_stream_t s) {
    return weft_broadcast(ptr(buf), ptr(buf), bytes(buf), WEFT_UINT8, root, c, s);
  };
  if (!buf.is_same(t)) op.after = [t, buf]() { copyBack(t, buf); };
  return run(std::move(op), opts.asyncOp);
}

Ptr ProcessGroupWeft::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  return allgatherLists(outputs, inputs, opts, "allgather");
}

// c10d's allgather_coalesced lists outputs by rank ([rank][input]);
// allgatherLists takes them by input ([input][rank]).
Ptr ProcessGroupWeft::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllgatherOptions& opts) {
  const char* name = "allgather_coalesced";
  TORCH_CHECK(static_cast<int>(outputLists.size()) == getSize(), "weft: ", name, " needs ",
              getSize(), " output lists (one per rank), not ", outputLists.size());
  std::vector<std::vector<at::Tensor>> byInput(inputs.size());
  for (const auto& perRank : outputLists) {
    TORCH_CHECK(perRank.size() == inputs.size(), "weft: ", name, ": an output list has ",
                perRank.size(), " tensors for ", inputs.size(), " inputs");
    for (size_t j = 0; j < inputs.size(); ++j) byInput[j].push_back(perRank[j]);
  }
  return allgatherLists(byInput, inputs, opts, name);
}

Ptr ProcessGroupWeft::allgatherLists(std::vector<std::vector<at::Tensor>>& outputLists,
                                     std::vector<at::Tensor>& inputs,
                                     const c10d::AllgatherOptions& opts, const char* name) {
  TORCH_CHECK(!inputs.empty() && outputLists.size() == inputs.size(), "weft: ", name,
              " needs one output list per input (got ", outputLists.size(), " lists and ",
              inputs.size(), " inputs)");
  std::vector<at::Tensor> ins, flats, allOut;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], name, "the input");
    TORCH_CHECK(static_cast<int>(outputLists[i].size()) == getSize(), "weft: ", name, " needs ",
                getSize(), " output tensors (one per rank), not ", outputLists[i].size());
    for (const at::Tensor& o : outputLists[i]) {
      checkTensor(o, name, "an output");
      checkLike(o, inputs[i].scalar_type(), inputs[i].numel(), name, "an output");
      allOut.push_back(o);
    }
    ins.push_back(inputs[i].contiguous());
    flats.push_back(at::empty({getSize() * inputs[i].numel()}, inputs[i].options()));
  }
  Op op = makeOp(name, inputs.size() == 1 ? OpType::ALLGATHER : OpType::ALLGATHER_COALESCED,
                 "weft:all_gather", inputs, allOut, opts.timeout);
  op.issue = [ins, flats](weft_comm_t c, weft_stream_t s) {
    return groupedEach(ins.size(), [&](size_t i) {
      return weft_allgather(ptr(ins[i]), ptr(flats[i]), bytes(ins[i]), WEFT_UINT8, c, s);
    });
  };
  std::vector<std::vector<at::Tensor>> lists = outputLists;
  op.after = [lists, flats]() mutable {
    for (size_t i = 0; i < lists.size(); ++i) scatterInto(flats[i], lists[i]);
  };
  return run(std::move(op), opts.asyncOp);
}

Ptr ProcessGroupWeft::_allgather_base(at::Tensor& output, at::Tensor& input,
                                      const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return allgather_into_tensor_coalesced(outs, ins, opts);
}

Ptr ProcessGroupWeft::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllgatherOptions& opts) {
  const char* name = outputs.size() == 1 ? "all_gather_into_tensor" : "allgather_into_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size() && !outputs.empty(), "weft: ", name,
              " needs as many outputs as inputs (got ", outputs.size(), " and ", inputs.size(), ")");
  std::vector<at::Tensor> ins, bufs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    checkTensor(inputs[i], name, "the input");
    checkTensor(outputs[i], name, "the output");
    checkLike(outputs[i], inputs[i].scalar_type(), inputs[i].numel() * getSize(), name, "the output");
    ins.push_back(inputs[i].contiguous());
    bufs.push_back(writable(outputs[i]));
  }
  Op op = makeOp(name, outputs.size() == 1 ? OpType::_ALLGATHER_BASE
                                           : OpType::ALLGATHER_INTO_TENSOR_COALESCED,
                 "weft:all_gather_into_tensor", inputs, outputs, opts.timeout);
  op.issue = [ins, bufs](weft_comm_t c, weft_stream_t s) {
    return groupedEach(ins.size(), [&](size_t i) {
      return weft_allgather(ptr(ins[i]), ptr(bufs[i]), bytes(ins[i]), WEFT_UINT8, c, s);
    });
  };
  op.after = copyBackAll(outputs, bufs);
  return run(std::move(op), opts.asyncOp);
}

Ptr ProcessGroupWeft::gather(std::vector<std::vector<at::Tensor>>& outputs,
                             std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  const char* name = "gather";
  checkSingle(inputs, name);
  at::Tensor in = inputs[0];
  checkTensor(in, name, "the input");
  const int root = static_cast<int>(opts.rootRank);
  checkRoot(opts.rootRank, getSize(), "gather");
  const bool isRoot = getRank() == root;
  std::vector<at::Tensor> outs;
  if (isRoot) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                "weft: gather: the root needs one list of ", getSize(), " output tensors");
    for (const at::Tensor& o : outputs[0]) {
      checkTensor(o, name, "an output");
      checkLike(o, in.scalar_type(), in.numel(), name, "an output");
    }
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "weft: gather: only the root (rank ", root, ") takes output tensors");
  }
  at::Tensor src = in.contiguous();
  at::Tensor flat = isRoot ? at::empty({getSize() * in.numel()}, in.options()) : at::Tensor();
  Op op = makeOp(name, OpType::GATHER, "weft:gather", {in}, outs, opts.timeout);
  op.issue = [src, flat, root](weft_comm_t c, weft_stream_t s) {
    return weft_gather(ptr(src), flat.defined() ? ptr(flat) : nullptr, bytes(src), WEFT_UINT8, root,
                       c, s);
  };
  op.after = [outs, flat]() mutable {
    if (flat.defined()) scatterInto(flat, outs);
  };
  return run(std::move(op), opts.asyncOp);
}

Ptr ProcessGroupWeft::gather_into_tensor(at::Tensor& output, at::Tensor& input,
                                         const c10d::GatherOptions& opts) {
  const char* name = "gather_into_tensor";
  checkTensor(input, name, "the input");
  const int root = static_cast<int>(opts.rootRank);
  checkRoot(opts.rootRank, getSize(), name);
  const bool isRoot = getRank() == root;
  if (isRoot) {
    checkTensor(output, name, "the output");
    checkLike(output, input.scalar_type(), input.numel() * getSize(), name, "the output");
  }
  at::Tensor src = input.contiguous();
  at::Tensor buf = isRoot ? writable(output) : at::Tensor();
  Op op = makeOp(name, OpType::GATHER, "weft:gather", {input}, {output}, opts.timeout);
  op.issue = [src, buf, root](weft_comm_t c, weft_stream_t s) {
    return weft_gather(ptr(src), buf.defined() ? ptr(buf) : nullptr, bytes(src), WEFT_UINT8, root,
                       c, s);
  };
  at::Tensor out = output;
  op.after = [out, buf]() {
    if (buf.defined()) copyBack(out, buf);
  };
  return run(std::move(op), opts.asyncOp);
}

Ptr ProcessGroupWeft::scatter(std::vector<at::Tensor>& outputs,
                              std::vector<std::vector<at::Tensor>>& inputs,
                              const c10d::ScatterOptions& opts) {
  const char* name = "scatter";
  checkSingle(outputs, name);
  at::Tensor out = outputs[0];
  checkTensor(out, name, "the output");
  const int root = static_cast<int>(opts.rootRank);
  checkRoot(opts.rootRank, getSize(), "scatter");
  const bool isRoot = getRank() == root;
  at::Tensor flat;
  std::vector<at::Tensor> ins;
  if (isRoot) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "weft: scatter: the root needs one list of ", getSize(), " input tensors");
    for (const at::Tensor& t : inputs[0]) {
      checkTensor(t, name, "an input");
      checkLike(t, out.scalar_type(), out.numel(), name, "an input");
    }
    ins = inputs[0];
    flat = flatCat(ins);
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "weft: scatter: only the root (rank ", root, ") takes input tensors");
  }
  at::Tensor buf = writable(out);
  Op op = makeOp(name, OpType::SCATTER, "weft:scatter", ins, {out}, opts.timeout);
  op.issue = [flat, buf, root](weft_comm_t c, weft_stream_t s) {
    return weft_scatter(flat.defined() ? ptr(flat) : nullptr, ptr(buf), bytes(buf), WEFT_UINT8,
                        root, c, s);
  };
  op.after = [out, buf]() { copyBack(out, buf); };
  return run(std::move(op), opts.asyncOp);
}

Ptr ProcessGroupWeft::alltoall_base(at::Tensor& output, at::Tensor& input,
                                    std::vector<int64_t>& outputSplits,
                                    std::vector<int64_t>& inputSplits,
                                    const c10d::AllToAllOptions& opts) {
  const char* name = "all_to_all_single";
  checkTensor(input, name, "the input");
  checkTensor(output, name, "the output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "weft: ", name, ": the output has dtype ",
              output.scalar_type(), " but the input has ", input.scalar_type());
  const int n = getSize();
  // Splits are rows of dim 0; none given: equal blocks.
  auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* which) {
    std::vector<size_t> c(n);
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const size_t rowBytes = rows ? bytes(t) / static_cast<size_t>(rows) : 0;
    if (splits.empty()) {
      TORCH_CHECK(rows % n == 0, "weft: ", name, ": the ", which, " has ", rows,
                  " rows, not divisible by the group size ", n, "; give split sizes");
      for (auto& x : c) x = static_cast<size_t>(rows / n) * rowBytes;
    } else {
      TORCH_CHECK(static_cast<int>(splits.size()) == n, "weft: ", name, ": ", which,
                  " split sizes have ", splits.size(), " entries, not ", n);
      int64_t sum = 0;
      for (int i = 0; i < n; ++i) {
        TORCH_CHECK(splits[i] >= 0, "weft: ", name, ": a negative ", which, " split size");
        sum += splits[i];
        c[i] = static_cast<size_t>(splits[i]) * rowBytes;
      }
      TORCH_CHECK(sum == rows, "weft: ", name, ": the ", which, " split sizes add up to ", sum,
                  " but the ", which, " has ", rows, " rows");
    }
    return c;
  };
  std::vector<size_t> sc = counts(input, inputSplits, "input"), rc = counts(output, outputSplits, "output");
  std::vector<size_t> sd(n, 0), rd(n, 0);
  for (int i = 1; i < n; ++i) {
    sd[i] = sd[i - 1] + sc[i - 1];
    rd[i] = rd[i - 1] + rc[i - 1];
  }
  at::Tensor src = input.contiguous();
  at::Tensor buf = writable(output);
  if (src.data_ptr() == buf.data_ptr() && bytes(src)) src = src.clone();  // weft refuses in place
  Op op = makeOp(name, OpType::ALLTOALL_BASE, "weft:all_to_all", {input}, {output}, opts.timeout);
  op.issue = [src, buf, sc, sd, rc, rd](weft_comm_t c, weft_stream_t s) {
    return weft_alltoallv(ptr(src), sc.data(), sd.data(), ptr(buf), rc.data(), rd.data(),
                          WEFT_UINT8, c, s);
  };
  at::Tensor out = output;
  op.after = [out, buf]() { copyBack(out, buf); };
  return run(std::move(op), opts.asyncOp);
}

Ptr ProcessGroupWeft::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                               const c10d::AllToAllOptions& opts) {
  const char* name = "all_to_all";
  const int n = getSize();
  TORCH_CHECK(static_cast<int>(outputs.size()) == n && static_cast<int>(inputs.size()) == n,
              "weft: ", name, " needs ", n, " inputs and ", n, " outputs (got ", inputs.size(),
              " and ", outputs.size(), ")");
  std::vector<at::Tensor> ins, bufs;
  for (int i = 0; i < n; ++i) {
    checkTensor(inputs[i], name, "an input");
    checkTensor(outputs[i], name, "an output");
    TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type(), "weft: ", name,
                ": output ", i, " has dtype ", outputs[i].scalar_type(), " but input ", i, " has ",
                inputs[i].scalar_type());
    ins.push_back(inputs[i].contiguous());
    bufs.push_back(writable(outputs[i]));
  }
  Op op = makeOp(name, OpType::ALLTOALL, "weft:all_to_all", inputs, outputs, opts.timeout);
  op.issue = [ins, bufs, n](weft_comm_t c, weft_stream_t s) {
    return grouped([&] {
      for (int j = 0; j < n; ++j) {
        if (bytes(ins[j]))
          if (weft_result_t e = weft_send(ptr(ins[j]), bytes(ins[j]), WEFT_UINT8, j, c, s);
              e != WEFT_SUCCESS)
            return e;
        if (bytes(bufs[j]))
          if (weft_result_t e = weft_recv(ptr(bufs[j]), bytes(bufs[j]), WEFT_UINT8, j, c, s);
              e != WEFT_SUCCESS)
            return e;
      }
      return WEFT_SUCCESS;
    });
  };
  op.after = copyBackAll(outputs, bufs);
  return run(std::move(op), opts.asyncOp);
}

}  // namespace weft_torch
