#include "process_group.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <numeric>

#include "convert.h"

namespace weft_torch {
namespace {

using Ptr = c10::intrusive_ptr<c10d::Work>;
using c10d::OpType;

// A contiguous tensor weft may write: `t` itself, or a staging copy whose
// contents go back to `t` after the op (copyBack).
at::Tensor writable(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }
void copyBack(const at::Tensor& user, const at::Tensor& buf) {
  if (!user.is_same(buf)) user.copy_(buf);
}
void* ptr(const at::Tensor& t) { return t.data_ptr(); }
size_t bytes(const at::Tensor& t) { return t.nbytes(); }

// Several weft calls as one group (nested groups are fine: the outermost issues).
template <typename F>
weft_result_t grouped(F&& calls) {
  weft_result_t r = weft_group_start();
  if (r != WEFT_SUCCESS) return r;
  weft_result_t first = calls();
  weft_result_t end = weft_group_end();
  return first != WEFT_SUCCESS ? first : end;
}

// Calls call(0) .. call(n - 1) as one group; the first failure is returned.
template <typename F>
weft_result_t groupedEach(size_t n, F&& call) {
  return grouped([&] {
    for (size_t i = 0; i < n; ++i)
      if (weft_result_t e = call(i); e != WEFT_SUCCESS) return e;
    return WEFT_SUCCESS;
  });
}

// After the op: each staging buffer back into its user tensor.
std::function<void()> copyBackAll(std::vector<at::Tensor> users, std::vector<at::Tensor> bufs) {
  return [users = std::move(users), bufs = std::move(bufs)]() {
    for (size_t i = 0; i < users.size(); ++i) copyBack(users[i], bufs[i]);
  };
}

// Every tensor of `list` flattened, one after the other, into a new tensor.
at::Tensor flatCat(const std::vector<at::Tensor>& list) {
  std::vector<at::Tensor> flat;
  flat.reserve(list.size());
  for (const at::Tensor& t : list) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies block i of `flat` (numel each) into list[i].
void scatterInto(const at::Tensor& flat, std::vector<at::Tensor>& list) {
  int64_t off = 0;
  for (at::Tensor& t : list) {
    t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
    off += t.numel();
  }
}

}  // namespace

ProcessGroupWeft::ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout, std::string groupName)
    : c10d::Backend(rank, size),
      options_(c10::make_intrusive<Options>("weft", timeout)),
      timeout_(timeout) {
  options_->group_name = groupName;
  // The unique id through the c10d store, as ProcessGroupNCCL does its own.
  const std::string key = "weft_unique_id";
  weft_unique_id_t id;
  if (rank == 0) {
    weft_result_t r = weft_get_unique_id(&id);
    TORCH_CHECK(r == WEFT_SUCCESS, "weft: weft_get_unique_id failed on rank 0 of group '",
                groupName, "': ", weft_get_last_error(nullptr));
    const auto* b = reinterpret_cast<const uint8_t*>(id.internal);
    store->set(key, std::vector<uint8_t>(b, b + sizeof id.internal));
  } else {
    std::vector<uint8_t> v = store->get(key);
    TORCH_CHECK(v.size() == sizeof id.internal, "weft: the store's ", key, " has ", v.size(),
                " bytes, not ", sizeof id.internal);
    memcpy(id.internal, v.data(), v.size());
  }
  weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
  cfg.timeout_s = timeoutS(c10d::kUnsetTimeout);
  cfg.bootstrap_timeout_s = cfg.timeout_s;
  weft_result_t r = weft_comm_init_rank_config(&comm_, size, id, rank, &cfg);
  if (r != WEFT_SUCCESS)
    C10_THROW_ERROR(DistBackendError,
                    "weft: joining the communicator of group '" + groupName + "' as rank " +
                        std::to_string(rank) + " of " + std::to_string(size) + " failed: " +
                        weft_get_error_string(r) + ": " + weft_get_last_error(nullptr));
  runner_ = std::make_unique<Runner>(comm_, rank, size);
}

ProcessGroupWeft::~ProcessGroupWeft() { shutdown(); }

void ProcessGroupWeft::abort() {
  if (runner_) runner_->abort("abort() was called on rank " + std::to_string(getRank()));
}

void ProcessGroupWeft::shutdown() {
  if (runner_) runner_->shutdown();
}

double ProcessGroupWeft::timeoutS(std::chrono::milliseconds opTimeout) const {
  std::chrono::milliseconds t = opTimeout == c10d::kUnsetTimeout ? timeout_ : opTimeout;
  return std::max(0.001, std::chrono::duration<double>(t).count());
}

Op ProcessGroupWeft::makeOp(const char* name, OpType type, const char* title,
                            const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs,
                            std::chrono::milliseconds timeout) {
  Op op;
  op.name = name;
  op.timeoutS = timeoutS(timeout);
  op.work = c10::make_intrusive<WorkWeft>(
      getRank(), type, title, inputs, std::move(outputs), seq_.fetch_add(1) + 1,
      std::chrono::milliseconds(static_cast<int64_t>(op.timeoutS * 1000)));
  return op;
}

Ptr ProcessGroupWeft::run(Op op, bool asyncOp) {
  Ptr work = op.work;
  {
    std::lock_guard<std::mutex> lk(coalesceMu_);
    if (coalescing_) {
      coalesced_.push_back(std::move(op));
      return work;
    }
  }
  std::vector<Op> one;
  one.push_back(std::move(op));
  runner_->submit(std::move(one), !asyncOp);
  return work;
}

void ProcessGroupWeft::startCoalescing() {
  std::lock_guard<std::mutex> lk(coalesceMu_);
  TORCH_CHECK(!coalescing_, "weft: startCoalescing called twice without endCoalescing");
  coalescing_ = true;
}

Ptr ProcessGroupWeft::endCoalescing() {
  std::vector<Op> ops;
  {
    std::lock_guard<std::mutex> lk(coalesceMu_);
    TORCH_CHECK(coalescing_, "weft: endCoalescing without startCoalescing");
    coalescing_ = false;
    ops.swap(coalesced_);
  }
  // One Work for the batch: completes after every op of it (the runner
  // completes a batch's ops in order, this one last).
  Op all = makeOp("coalesced", OpType::COALESCED, "weft:coalesced", {}, {}, c10d::kUnsetTimeout);
  all.issue = [](weft_comm_t) { return WEFT_SUCCESS; };
  for (const Op& op : ops) {
    all.p2p |= op.p2p;
    all.timeoutS = std::max(all.timeoutS, op.timeoutS);
  }
  Ptr work = all.work;
  ops.push_back(std::move(all));
  runner_->submit(std::move(ops), false);
  return work;
}

// ---- reductions ---------------------------------------------------------

Ptr ProcessGroupWeft::allreduceOne(at::Tensor t, const c10d::ReduceOp& rop,
                                   std::chrono::milliseconds timeout, bool asyncOp,
                                   const char* name) {
  checkTensor(t, name, "the tensor");
  Reduction r = reduction(t, rop, name);
  at::Tensor buf = r.premul ? premultiplied(t, r) : writable(t);
  Op op = makeOp(name, OpType::ALLREDUCE, "weft:all_reduce", {t}, {t}, timeout);
  if (r.bitwise >= 0) {
    at::Tensor gathered = at::empty({getSize(), t.numel()}, t.options());
    op.issue = [buf, gathered](weft_comm_t c) {
      return weft_allgather(ptr(buf), ptr(gathered), bytes(buf), WEFT_UINT8, c, nullptr);
    };
    op.after = [t, gathered, r]() { t.copy_(bitwiseFold(gathered, r.bitwise, t)); };
  } else {
    op.issue = [buf, r](weft_comm_t c) {
      return weft_allreduce(ptr(buf), ptr(buf), r.count, r.dtype, r.op, c, nullptr);
    };
    if (!buf.is_same(t)) op.after = [t, buf]() { copyBack(t, buf); };
  }
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
    TORCH_CHECK(rs.back().bitwise < 0, "weft: ", name, " does not take bitwise ops; use allreduce");
    bufs.push_back(rs.back().premul ? premultiplied(t, rs.back()) : writable(t));
  }
  Op op = makeOp(name, OpType::ALLREDUCE_COALESCED, "weft:all_reduce_coalesced", tensors, tensors,
                 opts.timeout);
  op.issue = [bufs, rs](weft_comm_t c) {
    return groupedEach(bufs.size(), [&](size_t i) {
      return weft_allreduce(ptr(bufs[i]), ptr(bufs[i]), rs[i].count, rs[i].dtype, rs[i].op, c,
                            nullptr);
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
  TORCH_CHECK(root >= 0 && root < getSize(), "weft: reduce: root ", opts.rootRank,
              " is outside [0, ", getSize(), ")");
  Reduction r = reduction(t, opts.reduceOp, name);
  at::Tensor buf = r.premul ? premultiplied(t, r) : writable(t);
  const bool isRoot = getRank() == root;
  Op op = makeOp(name, OpType::REDUCE, "weft:reduce", {t}, {t}, opts.timeout);
  if (r.bitwise >= 0) {
    at::Tensor gathered = at::empty({getSize(), t.numel()}, t.options());
    op.issue = [buf, gathered](weft_comm_t c) {
      return weft_allgather(ptr(buf), ptr(gathered), bytes(buf), WEFT_UINT8, c, nullptr);
    };
    op.after = [t, gathered, r, isRoot]() {
      if (isRoot) t.copy_(bitwiseFold(gathered, r.bitwise, t));
    };
  } else {
    // Non-roots: weft reads buf and writes nothing.
    op.issue = [buf, r, root](weft_comm_t c) {
      return weft_reduce(ptr(buf), ptr(buf), r.count, r.dtype, r.op, root, c, nullptr);
    };
    op.after = [t, buf, isRoot]() {
      if (isRoot) copyBack(t, buf);
    };
  }
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
  TORCH_CHECK(r.bitwise < 0, "weft: ", name, ": bitwise ops are not supported here (allreduce "
              "and reduce take them)");
  at::Tensor flat = flatCat(inputs[0]);
  if (r.premul) flat = premultiplied(flat, r);
  at::Tensor buf = writable(out);
  Op op = makeOp(name, OpType::REDUCE_SCATTER, "weft:reduce_scatter", inputs[0], {out},
                 opts.timeout);
  op.issue = [flat, buf, r](weft_comm_t c) {
    return weft_reduce_scatter(ptr(flat), ptr(buf), r.count, r.dtype, r.op, c, nullptr);
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
    TORCH_CHECK(rs.back().bitwise < 0, "weft: ", name, ": bitwise ops are not supported here");
    ins.push_back(rs.back().premul ? premultiplied(inputs[i], rs.back()) : inputs[i].contiguous());
    bufs.push_back(writable(outputs[i]));
  }
  Op op = makeOp(name, outputs.size() == 1 ? OpType::_REDUCE_SCATTER_BASE
                                           : OpType::REDUCE_SCATTER_TENSOR_COALESCED,
                 "weft:reduce_scatter_tensor", inputs, outputs, opts.timeout);
  op.issue = [ins, bufs, rs](weft_comm_t c) {
    return groupedEach(bufs.size(), [&](size_t i) {
      return weft_reduce_scatter(ptr(ins[i]), ptr(bufs[i]), rs[i].count, rs[i].dtype, rs[i].op, c,
                                 nullptr);
    });
  };
  op.after = copyBackAll(outputs, bufs);
  return run(std::move(op), opts.asyncOp);
}

// ---- data movement (bytes: every dtype) -----------------------------------

Ptr ProcessGroupWeft::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const char* name = "broadcast";
  checkSingle(tensors, name);
  at::Tensor t = tensors[0];
  checkTensor(t, name, "the tensor");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < getSize(), "weft: broadcast: root ", opts.rootRank,
              " is outside [0, ", getSize(), ")");
  at::Tensor buf = writable(t);
  Op op = makeOp(name, OpType::BROADCAST, "weft:broadcast", {t}, {t}, opts.timeout);
  op.issue = [buf, root](weft_comm_t c) {
    return weft_broadcast(ptr(buf), ptr(buf), bytes(buf), WEFT_UINT8, root, c, nullptr);
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
  op.issue = [ins, flats](weft_comm_t c) {
    return groupedEach(ins.size(), [&](size_t i) {
      return weft_allgather(ptr(ins[i]), ptr(flats[i]), bytes(ins[i]), WEFT_UINT8, c, nullptr);
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
  op.issue = [ins, bufs](weft_comm_t c) {
    return groupedEach(ins.size(), [&](size_t i) {
      return weft_allgather(ptr(ins[i]), ptr(bufs[i]), bytes(ins[i]), WEFT_UINT8, c, nullptr);
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
  TORCH_CHECK(root >= 0 && root < getSize(), "weft: gather: root ", opts.rootRank,
              " is outside [0, ", getSize(), ")");
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
  op.issue = [src, flat, root](weft_comm_t c) {
    return weft_gather(ptr(src), flat.defined() ? ptr(flat) : nullptr, bytes(src), WEFT_UINT8, root,
                       c, nullptr);
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
  TORCH_CHECK(root >= 0 && root < getSize(), "weft: ", name, ": root ", opts.rootRank,
              " is outside [0, ", getSize(), ")");
  const bool isRoot = getRank() == root;
  if (isRoot) {
    checkTensor(output, name, "the output");
    checkLike(output, input.scalar_type(), input.numel() * getSize(), name, "the output");
  }
  at::Tensor src = input.contiguous();
  at::Tensor buf = isRoot ? writable(output) : at::Tensor();
  Op op = makeOp(name, OpType::GATHER, "weft:gather", {input}, {output}, opts.timeout);
  op.issue = [src, buf, root](weft_comm_t c) {
    return weft_gather(ptr(src), buf.defined() ? ptr(buf) : nullptr, bytes(src), WEFT_UINT8, root,
                       c, nullptr);
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
  TORCH_CHECK(root >= 0 && root < getSize(), "weft: scatter: root ", opts.rootRank,
              " is outside [0, ", getSize(), ")");
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
  op.issue = [flat, buf, root](weft_comm_t c) {
    return weft_scatter(flat.defined() ? ptr(flat) : nullptr, ptr(buf), bytes(buf), WEFT_UINT8,
                        root, c, nullptr);
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
  op.issue = [src, buf, sc, sd, rc, rd](weft_comm_t c) {
    return weft_alltoallv(ptr(src), sc.data(), sd.data(), ptr(buf), rc.data(), rd.data(),
                          WEFT_UINT8, c, nullptr);
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
  op.issue = [ins, bufs, n](weft_comm_t c) {
    return grouped([&] {
      for (int j = 0; j < n; ++j) {
        if (bytes(ins[j]))
          if (weft_result_t e = weft_send(ptr(ins[j]), bytes(ins[j]), WEFT_UINT8, j, c, nullptr);
              e != WEFT_SUCCESS)
            return e;
        if (bytes(bufs[j]))
          if (weft_result_t e = weft_recv(ptr(bufs[j]), bytes(bufs[j]), WEFT_UINT8, j, c, nullptr);
              e != WEFT_SUCCESS)
            return e;
      }
      return WEFT_SUCCESS;
    });
  };
  op.after = copyBackAll(outputs, bufs);
  return run(std::move(op), opts.asyncOp);
}

// ---- point to point --------------------------------------------------------

Ptr ProcessGroupWeft::send(std::vector<at::Tensor>& tensors, int dstRank, int /*tag*/) {
  const char* name = "send";
  checkSingle(tensors, name);
  checkTensor(tensors[0], name, "the tensor");
  TORCH_CHECK(dstRank >= 0 && dstRank < getSize(), "weft: send: destination ", dstRank,
              " is outside [0, ", getSize(), ")");
  at::Tensor src = tensors[0].contiguous();
  Op op = makeOp(name, OpType::SEND, "weft:send", tensors, tensors, c10d::kUnsetTimeout);
  op.p2p = true;
  op.issue = [src, dstRank](weft_comm_t c) {
    return weft_send(ptr(src), bytes(src), WEFT_UINT8, dstRank, c, nullptr);
  };
  return run(std::move(op), true);
}

Ptr ProcessGroupWeft::recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) {
  const char* name = "recv";
  checkSingle(tensors, name);
  at::Tensor t = tensors[0];
  checkTensor(t, name, "the tensor");
  TORCH_CHECK(srcRank >= 0 && srcRank < getSize(), "weft: recv: source ", srcRank,
              " is outside [0, ", getSize(), ")");
  at::Tensor buf = writable(t);
  Op op = makeOp(name, OpType::RECV, "weft:recv", tensors, tensors, c10d::kUnsetTimeout);
  op.work->setSourceRank(srcRank);
  op.p2p = true;
  op.issue = [buf, srcRank](weft_comm_t c) {
    return weft_recv(ptr(buf), bytes(buf), WEFT_UINT8, srcRank, c, nullptr);
  };
  if (!buf.is_same(t)) op.after = [t, buf]() { copyBack(t, buf); };
  return run(std::move(op), true);
}

Ptr ProcessGroupWeft::recvAnysource(std::vector<at::Tensor>& /*tensors*/, int /*tag*/) {
  TORCH_CHECK(false, "weft: recv from any source is not supported (weft matches sends and "
              "receives per pair of ranks); pass src= to recv/irecv");
}

// ---- barriers -------------------------------------------------------------

Ptr ProcessGroupWeft::barrier(const c10d::BarrierOptions& opts) {
  Op op = makeOp("barrier", OpType::BARRIER, "weft:barrier", {}, {}, opts.timeout);
  op.issue = [](weft_comm_t c) { return weft_barrier(c, nullptr); };
  return run(std::move(op), opts.asyncOp);
}

void ProcessGroupWeft::monitoredBarrier(const c10d::BarrierOptions& opts, bool /*waitAllRanks*/) {
  // weft's barrier is bounded by the op's timeout, and its error names the
  // rank that did not arrive.
  Op op = makeOp("monitored_barrier", OpType::BARRIER, "weft:monitored_barrier", {}, {},
                 opts.timeout);
  op.issue = [](weft_comm_t c) { return weft_barrier(c, nullptr); };
  Ptr work = run(std::move(op), false);
  work->wait();
}

}  // namespace weft_torch
