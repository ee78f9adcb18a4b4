"""The data movement: allgather, broadcast and alltoall (single, in place, async, grouped)."""
import torch
import torch.distributed as dist

from . import _basics, _check
from ._ops import (Average, _Work, _check_process_set, _check_root, _check_tensor, _name, _register, _shapes,
                   global_process_set, synchronize)
from ._reduce import allreduce

# ---- allgather ------------------------------------------------------------


def _as_rows(tensor, where):
    _check_tensor(tensor, where)
    return tensor.detach().reshape(1) if tensor.dim() == 0 else tensor.detach()


def _allgather_issue(st, t, dims):
    """Concatenates every rank's t (dims: every rank's first dimension); a _Work."""
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


def _allgather_start(tensor, name):
    st = _basics.state()
    t = _as_rows(tensor, "allgather")
    _check.exchange(st, f"allgather {_shapes([name], [t], free_first=True)}")
    return _allgather_issue(st, t, [row[0] for row in _check.gather_ints(st, [t.shape[0]])])


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


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts allgathers of a list of tensors under one check; synchronize() gives the list."""
    _check_process_set(process_set, "grouped_allgather_async")
    st = _basics.state()
    rows = [_as_rows(t, "grouped_allgather") for t in tensors]
    base = _name("grouped_allgather", name)
    _check.exchange(st, f"grouped_allgather {_shapes([f'{base}.{i}' for i in range(len(rows))], rows, True)}")
    per_rank = _check.gather_ints(st, [t.shape[0] for t in rows])
    works = [_allgather_issue(st, t, [per_rank[r][i] for r in range(st.size)]) for i, t in enumerate(rows)]
    return _register(_Work([w for x in works for w in x.works], lambda: [x.finish() for x in works]))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of each tensor of a list (not differentiable); a list."""
    return synchronize(grouped_allgather_async(tensors, name, process_set))


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
