"""Horovod's collectives (horovod.torch.mpi_ops) over torch.distributed on weft.

Every call checks its tensors, runs the consistency check (_check.py) and
issues torch.distributed ops with async_op=True on the default group; the
weft backend runs them in call order on its runner thread. An async call
returns an int handle; synchronize(handle) waits for the ops and finishes
the result (postscale, unpadding), poll(handle) says whether they are done.
Grouped allreduces are one torch coalescing batch, which the weft backend
issues as one weft group (fused in C).

Ops: Average (the default), Sum, Min, Max, Product; Adasum is refused.
Average is a sum scaled by postscale_factor / size() after the reduction
(integer tensors: truncated toward zero).
"""
import collections
import itertools
import time
import warnings

import torch
import torch.distributed as dist

from . import _basics, _check
from .compression import Compression

# Horovod's reduction ops, with Horovod's values.
Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5
_OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max", Product: "Product"}
_TORCH_OPS = {
    Average: dist.ReduceOp.SUM,
    Sum: dist.ReduceOp.SUM,
    Min: dist.ReduceOp.MIN,
    Max: dist.ReduceOp.MAX,
    Product: dist.ReduceOp.PRODUCT,
}


class HorovodInternalError(RuntimeError):
    """A collective failed in the backend (a peer died, a timeout): Horovod's name for it."""


class ProcessSet:
    """Horovod's process sets: weft.torch has only the global one (all ranks)."""

    def __init__(self, ranks=None):
        if ranks is not None:
            raise NotImplementedError("weft.torch: process sets other than the global one are not supported")
        self.process_set_id = 0

    def included(self):
        return True

    def size(self):
        return _basics.size()

    def rank(self):
        return _basics.rank()

    def __repr__(self):
        return "ProcessSet(global)"


global_process_set = ProcessSet()


def add_process_set(process_set):
    raise NotImplementedError("weft.torch: process sets are not supported (only the global one)")


def remove_process_set(process_set):
    raise NotImplementedError("weft.torch: process sets are not supported (only the global one)")


def _check_process_set(process_set, where):
    if process_set is not None and process_set is not global_process_set:
        raise NotImplementedError(
            f"weft.torch.{where}: process_set={process_set!r} is not supported; weft.torch runs every "
            "collective on all ranks (leave process_set out)")


# ---- names, handles -------------------------------------------------------

_noname = collections.defaultdict(int)
_handles = {}
_handle_ids = itertools.count(1)


def _name(kind, name):
    """`name`, or Horovod's auto-generated one: allreduce.noname.0, .1, ..."""
    if name is not None:
        return str(name)
    n = _noname[kind]
    _noname[kind] += 1
    return f"{kind}.noname.{n}"


def _reset():
    _handles.clear()
    _noname.clear()


class _Work:
    """The torch Works of one call and how to finish its result."""

    def __init__(self, works, finish):
        self.works = [w for w in works if w is not None]
        self.finish = finish

    def done(self):
        return all(w.is_completed() for w in self.works)

    def wait(self):
        try:
            for w in self.works:
                w.wait()
        except RuntimeError as e:
            raise HorovodInternalError(str(e)) from e
        with torch.no_grad():
            return self.finish()


def _register(work):
    handle = next(_handle_ids)
    _handles[handle] = work
    return handle


def poll(handle):
    """True once the operation of `handle` has completed (synchronize() then returns at once)."""
    work = _handles.get(handle)
    if work is None:
        raise ValueError(f"weft.torch.poll: unknown handle {handle!r} (already synchronized?)")
    return work.done()


def synchronize(handle):
    """Waits for the operation of `handle` and returns its result (None for an unknown handle, as Horovod)."""
    work = _handles.pop(handle, None)
    if work is None:
        return None
    return work.wait()


# ---- argument helpers -----------------------------------------------------


def _resolve_op(op, average):
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed", DeprecationWarning)
        return Average if average else Sum
    return Average if op is None else op


def _torch_op(op, where):
    if op == Adasum:
        raise NotImplementedError(f"weft.torch.{where}: op=Adasum is not supported; use hvd.Average or hvd.Sum")
    if op not in _TORCH_OPS:
        raise ValueError(f"weft.torch.{where}: unknown op {op!r}; use hvd.Average, Sum, Min, Max or Product")
    return _TORCH_OPS[op]


def _check_tensor(tensor, where):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"weft.torch.{where}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.layout != torch.strided:
        raise ValueError(f"weft.torch.{where}: {tensor.layout} tensors are not supported (dense tensors only; "
                         "DistributedOptimizer(sparse_as_dense=True) for sparse gradients)")


def _check_root(root_rank, size, where):
    if not isinstance(root_rank, int) or not 0 <= root_rank < size:
        raise ValueError(f"weft.torch.{where}: root_rank {root_rank!r} is not a rank of this job (0 .. {size - 1})")


def _scale_(tensor, factor):
    """tensor *= factor in place; integers truncate toward zero."""
    if factor == 1 or tensor.dtype == torch.bool:
        return tensor
    if tensor.is_floating_point() or tensor.is_complex():
        return tensor.mul_(factor)
    return tensor.copy_(tensor.to(torch.float64).mul_(factor))


def _scales(prescale, postscale):
    text = f" prescale={float(prescale)!r}" if prescale != 1 else ""
    return text + (f" postscale={float(postscale)!r}" if postscale != 1 else "")


def _shapes(names, tensors, free_first=False):
    return ", ".join(f"'{n}' {_check.shape_text(t, free_first)}" for n, t in zip(names, tensors))


# ---- allreduce ------------------------------------------------------------


def _allreduce_start(kind, tensors, outputs, names, op, prescale, postscale):
    """Reduces tensors into outputs (the same tensors for in-place calls); a _Work giving outputs."""
    st = _basics.state()
    torch_op = _torch_op(op, kind)
    for t in tensors:
        _check_tensor(t, kind)
    _check.exchange(st, f"{kind} {_shapes(names, tensors)} op={_OP_NAMES[op]}{_scales(prescale, postscale)}")
    with torch.no_grad():
        for t, o in zip(tensors, outputs):
            if o is not t:
                o.copy_(t)
            _scale_(o, prescale)
    if len(outputs) == 1:
        works = [dist.all_reduce(outputs[0], op=torch_op, group=st.group, async_op=True)]
    elif outputs:
        with dist._coalescing_manager(group=st.group, async_ops=True) as cm:
            for o in outputs:
                dist.all_reduce(o, op=torch_op, group=st.group, async_op=True)
        works = cm.works
    else:
        works = []
    post = postscale / st.size if op == Average else postscale

    def finish():
        for o in outputs:
            _scale_(o, post)
        return outputs

    return _Work(works, finish)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Starts reducing `tensor` over all ranks into a new tensor; returns a handle. `tensor` is unchanged."""
    _check_process_set(process_set, "allreduce_async")
    op = _resolve_op(op, average)
    _check_tensor(tensor, "allreduce_async")
    output = torch.empty_like(tensor)
    work = _allreduce_start("allreduce", [tensor], [output], [_name("allreduce", name)], op,
                            prescale_factor, postscale_factor)
    return _register(_Work(work.works, lambda: work.finish()[0]))


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """Starts reducing `tensor` in place; returns a handle (synchronize() returns `tensor`)."""
    _check_process_set(process_set, "allreduce_async_")
    op = _resolve_op(op, average)
    work = _allreduce_start("allreduce", [tensor], [tensor], [_name("allreduce", name)], op,
                            prescale_factor, postscale_factor)
    return _register(_Work(work.works, lambda: work.finish()[0]))


class _AllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale):
        ctx.op, ctx.prescale, ctx.postscale = op, prescale, postscale
        return synchronize(allreduce_async(tensor, name=name, op=op, prescale_factor=prescale,
                                           postscale_factor=postscale))

    @staticmethod
    def backward(ctx, grad):
        return allreduce(grad, op=ctx.op, prescale_factor=ctx.prescale, postscale_factor=ctx.postscale), \
            None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """`tensor` reduced over all ranks (a new tensor; differentiable, as Horovod's)."""
    _check_process_set(process_set, "allreduce")
    op = _resolve_op(op, average)
    compressed, ctx = compression.compress(tensor)
    reduced = _AllreduceFn.apply(compressed, name, op, prescale_factor, postscale_factor)
    return compression.decompress(reduced, ctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    """Reduces `tensor` over all ranks in place; returns it."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor, process_set))


def _grouped(tensors, where):
    tensors = list(tensors)
    for t in tensors:
        _check_tensor(t, where)
    return tensors


def _group_names(name, count):
    base = _name("grouped_allreduce", name)
    return [f"{base}.{i}" for i in range(count)]


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing a list of tensors as one batch (one weft group) into new tensors; a handle."""
    _check_process_set(process_set, "grouped_allreduce_async")
    op = _resolve_op(op, average)
    tensors = _grouped(tensors, "grouped_allreduce_async")
    outputs = [torch.empty_like(t) for t in tensors]
    work = _allreduce_start("grouped_allreduce", tensors, outputs, _group_names(name, len(tensors)), op,
                            prescale_factor, postscale_factor)
    return _register(work)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing a list of tensors in place as one batch; a handle."""
    _check_process_set(process_set, "grouped_allreduce_async_")
    op = _resolve_op(op, average)
    tensors = _grouped(tensors, "grouped_allreduce_async_")
    work = _allreduce_start("grouped_allreduce", tensors, tensors, _group_names(name, len(tensors)), op,
                            prescale_factor, postscale_factor)
    return _register(work)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """A list of tensors reduced over all ranks as one batch (new tensors; not differentiable)."""
    pairs = [compression.compress(t) for t in tensors]
    outputs = synchronize(grouped_allreduce_async([p[0] for p in pairs], average, name, op, prescale_factor,
                                                  postscale_factor, process_set))
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outputs, pairs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    """Reduces a list of tensors in place as one batch; returns them."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor, postscale_factor,
                                                process_set))


# ---- allgather ------------------------------------------------------------


def _allgather_start(tensor, name):
    st = _basics.state()
    _check_tensor(tensor, "allgather")
    t = tensor.detach().reshape(1) if tensor.dim() == 0 else tensor.detach()
    _check.exchange(st, f"allgather {_shapes([name], [t], free_first=True)}")
    dims = _check.gather_ints(st, t.shape[0])
    rest = tuple(t.shape[1:])
    total, widest = sum(dims), max(dims)
    out = t.new_empty((total,) + rest)
    if out.numel() == 0:  # every rank knows: nothing to move
        work = _Work([], lambda: out)
    elif all(d == dims[0] for d in dims):
        work = _Work([dist.all_gather_into_tensor(out, t.contiguous(), group=st.group, async_op=True)],
                     lambda: out)
    else:  # first dimensions differ: gather padded to the widest, then cut
        padded = t.new_zeros((widest,) + rest)
        padded[: t.shape[0]] = t
        buf = t.new_empty((st.size * widest,) + rest)
        w = dist.all_gather_into_tensor(buf, padded, group=st.group, async_op=True)
        work = _Work([w], lambda: torch.cat([buf[i * widest: i * widest + d] for i, d in enumerate(dims)]))
    work.dims = dims
    return work


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating every rank's `tensor` along dimension 0 (which may differ by rank); a handle."""
    _check_process_set(process_set, "allgather_async")
    return _register(_allgather_start(tensor, _name("allgather", name)))


class _AllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        work = _allgather_start(tensor, name)
        ctx.dims, ctx.shape = work.dims, tensor.shape
        return work.wait()

    @staticmethod
    def backward(ctx, grad):
        reduced = allreduce(grad, op=Average)
        r = _basics.rank()
        return reduced.narrow(0, sum(ctx.dims[:r]), ctx.dims[r]).reshape(ctx.shape), None


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's `tensor` concatenated along dimension 0 in rank order (differentiable).

    Dimension 0 may differ by rank; the others, and the dtype, must match."""
    _check_process_set(process_set, "allgather")
    return _AllgatherFn.apply(tensor, _name("allgather", name))


# ---- broadcast ------------------------------------------------------------


def _broadcast_start(kind, tensors, outputs, names, root_rank):
    st = _basics.state()
    _check_root(root_rank, st.size, kind)
    for t in tensors:
        _check_tensor(t, kind)
    _check.exchange(st, f"{kind} {_shapes(names, tensors)} root={root_rank}")
    with torch.no_grad():
        for t, o in zip(tensors, outputs):
            if o is not t:
                o.copy_(t)
    works = [dist.broadcast(o, src=root_rank, group=st.group, async_op=True) for o in outputs]
    return _Work(works, lambda: outputs)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts copying root_rank's `tensor` to every rank, into a new tensor; a handle."""
    _check_process_set(process_set, "broadcast_async")
    output = torch.empty_like(tensor)
    work = _broadcast_start("broadcast", [tensor], [output], [_name("broadcast", name)], root_rank)
    return _register(_Work(work.works, lambda: output))


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts overwriting `tensor` with root_rank's, in place; a handle."""
    _check_process_set(process_set, "broadcast_async_")
    work = _broadcast_start("broadcast", [tensor], [tensor], [_name("broadcast", name)], root_rank)
    return _register(_Work(work.works, lambda: tensor))


class _BroadcastFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.root_rank = root_rank
        return synchronize(broadcast_async(tensor, root_rank, name))

    @staticmethod
    def backward(ctx, grad):
        reduced = allreduce(grad, op=Average)
        if _basics.rank() != ctx.root_rank:
            reduced = reduced * 0
        return reduced, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's `tensor` on every rank (a new tensor; differentiable)."""
    _check_process_set(process_set, "broadcast")
    return _BroadcastFn.apply(tensor, root_rank, name)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites `tensor` with root_rank's, in place; returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def grouped_broadcast_(tensors, root_rank, names):
    """Broadcasts a list of tensors in place under one consistency check (weft addition)."""
    tensors = list(tensors)
    work = _broadcast_start("broadcast", tensors, tensors, list(names), root_rank)
    return work.wait()


# ---- alltoall -------------------------------------------------------------


def _alltoall_start(tensor, splits, name):
    st = _basics.state()
    _check_tensor(tensor, "alltoall")
    if tensor.dim() == 0:
        raise ValueError("weft.torch.alltoall: the tensor needs at least one dimension")
    n, first = st.size, tensor.shape[0]
    if splits is None:
        if first % n:
            raise ValueError(f"weft.torch.alltoall: without splits, dimension 0 ({first}) must divide evenly "
                             f"among the {n} ranks")
        send = [first // n] * n
    else:
        send = [int(s) for s in (splits.tolist() if isinstance(splits, torch.Tensor) else splits)]
        if len(send) != n or any(s < 0 for s in send) or sum(send) != first:
            raise ValueError(f"weft.torch.alltoall: splits {send} must be {n} non-negative counts summing "
                             f"to dimension 0 ({first})")
    _check.exchange(st, f"alltoall {_shapes([name], [tensor], free_first=True)}")
    if n == 1:
        recv = send
    else:
        got = torch.empty(n, dtype=torch.int64)
        dist.all_to_all_single(got, torch.tensor(send, dtype=torch.int64), group=st.control)
        recv = got.tolist()
    out = tensor.new_empty((sum(recv),) + tuple(tensor.shape[1:]))
    w = dist.all_to_all_single(out, tensor.detach().contiguous(), output_split_sizes=recv,
                               input_split_sizes=send, group=st.group, async_op=True)
    split_dtype = splits.dtype if isinstance(splits, torch.Tensor) else torch.int32
    return _Work([w], lambda: (out, torch.tensor(recv, dtype=split_dtype)))


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall; synchronize() returns (output, received_splits)."""
    _check_process_set(process_set, "alltoall_async")
    return _register(_alltoall_start(tensor, splits, _name("alltoall", name)))


class _AlltoallFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name):
        out, received = _alltoall_start(tensor, splits, name).wait()
        ctx.received = received
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, _unused):
        back, _ = alltoall(grad, splits=ctx.received)
        return back, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends slices of dimension 0 to each rank (`splits[r]` rows to rank r; even without splits).

    Returns the rows received, in rank order, and, when `splits` is given, as
    Horovod does, also the counts received from each rank: (output, received_splits)."""
    _check_process_set(process_set, "alltoall")
    out, received = _AlltoallFn.apply(tensor, splits, _name("alltoall", name))
    return out if splits is None else (out, received)


# ---- reducescatter --------------------------------------------------------


def _reducescatter_start(tensor, name, op, prescale, postscale):
    st = _basics.state()
    torch_op = _torch_op(op, "reducescatter")
    _check_tensor(tensor, "reducescatter")
    if tensor.dim() == 0:
        raise ValueError("weft.torch.reducescatter: the tensor needs at least one dimension")
    _check.exchange(st, f"reducescatter {_shapes([name], [tensor])} op={_OP_NAMES[op]}{_scales(prescale, postscale)}")
    n, first, rest = st.size, tensor.shape[0], tuple(tensor.shape[1:])
    # Horovod's split: ranks 0 .. first % n - 1 get one row more.
    counts = [first // n + (1 if r < first % n else 0) for r in range(n)]
    widest = counts[0]
    with torch.no_grad():
        if first % n == 0:
            source = tensor.detach().clone(memory_format=torch.contiguous_format)
        else:
            source = tensor.new_zeros((n * widest,) + rest)
            offset = 0
            for r, c in enumerate(counts):
                source[r * widest: r * widest + c] = tensor[offset: offset + c]
                offset += c
        _scale_(source, prescale)
    out = tensor.new_empty((widest,) + rest)
    works = []
    if out.numel() > 0:
        works.append(dist.reduce_scatter_tensor(out, source, op=torch_op, group=st.group, async_op=True))
    post = postscale / n if op == Average else postscale

    def finish():
        mine = out[: counts[st.rank]]
        return _scale_(mine, post)

    return _Work(works, finish)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts a reducescatter; a handle."""
    _check_process_set(process_set, "reducescatter_async")
    return _register(_reducescatter_start(tensor, _name("reducescatter", name), op, prescale_factor,
                                          postscale_factor))


class _ReducescatterFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale):
        ctx.op, ctx.prescale, ctx.postscale = op, prescale, postscale
        return _reducescatter_start(tensor, name, op, prescale, postscale).wait()

    @staticmethod
    def backward(ctx, grad):
        grad = grad * (ctx.prescale * ctx.postscale * (_basics.size() if ctx.op == Sum else 1))
        return allgather(grad), None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """`tensor` reduced over all ranks, this rank's slice of dimension 0.

    Dimension 0 is split as evenly as possible, the first (dim 0 % size) ranks
    getting one row more, as Horovod does."""
    _check_process_set(process_set, "reducescatter")
    compressed, ctx = compression.compress(tensor)
    out = _ReducescatterFn.apply(compressed, _name("reducescatter", name), op, prescale_factor, postscale_factor)
    return compression.decompress(out, ctx)


# ---- synchronization points -----------------------------------------------


def barrier(process_set=global_process_set):
    """Returns once every rank has called barrier() (after the ops issued before it)."""
    _check_process_set(process_set, "barrier")
    st = _basics.state()
    _check.exchange(st, "barrier")
    dist.barrier(group=st.group)


def join(device=-1):
    """Waits until every rank has called join(); returns the rank that called it last.

    Unlike Horovod's, the ranks that joined do not stand in (with zeros) for
    the allreduces of the ranks still working: every rank must reach join()
    without further collectives (a rank still calling them gets a
    MismatchError naming join, with the check on)."""
    st = _basics.state()
    _check.exchange(st, "join")
    stamp = torch.tensor([time.time()], dtype=torch.float64)
    if st.size == 1:
        return 0
    stamps = torch.empty(st.size, dtype=torch.float64)
    dist.all_gather_into_tensor(stamps, stamp, group=st.group)
    return int(stamps.argmax())
