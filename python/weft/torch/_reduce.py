"""The reductions: allreduce (single, in place, async, grouped) and reducescatter.

Average is a Sum followed by a scale of postscale_factor / size() (integer
tensors: truncated toward zero); prescale_factor scales the input first.
A grouped allreduce is one torch coalescing batch, which the weft backend
issues as one weft group (fused in C).
"""
import torch
import torch.distributed as dist

from . import _basics, _check, _timeline
from ._ops import (Average, Sum, _OP_NAMES, _Work, _check_process_set, _check_tensor, _name, _register,
                   _resolve_op, _scale_, _scales, _shapes, _torch_op, global_process_set, synchronize)
from .compression import Compression

# ---- allreduce ------------------------------------------------------------


def _allreduce_start(kind, tensors, outputs, names, op, prescale, postscale):
    """Reduces tensors into outputs (the same tensors for in-place calls); a _Work giving outputs."""
    st = _basics.state()
    torch_op = _torch_op(op, kind)
    for t in tensors:
        _check_tensor(t, kind)
    # spec: what a rank sitting in join() must mirror with zeros (_join.py)
    spec = ("allreduce", [(tuple(t.shape), t.dtype, t.device.type) for t in tensors], op)
    description = f"{kind} {_shapes(names, tensors)} op={_OP_NAMES[op]}{_scales(prescale, postscale)}"
    t0 = _timeline.now()
    _check.exchange(st, description, spec)
    t1 = _timeline.now()
    if _timeline.enabled():
        _timeline.tensor_spans(st.comm, names, "NEGOTIATE", t0, t1)
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

    return _Work(works, finish, ("ALLREDUCE", list(names), t1))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Starts reducing `tensor` over all ranks into a new tensor; returns a handle. `tensor` is unchanged."""
    _check_process_set(process_set, "allreduce_async")
    op = _resolve_op(op, average)
    _check_tensor(tensor, "allreduce_async")
    output = torch.empty_like(tensor)
    work = _allreduce_start("allreduce", [tensor], [output], [_name("allreduce", name)], op,
                            prescale_factor, postscale_factor)
    return _register(_Work(work.works, lambda: work.finish()[0], work.label))


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """Starts reducing `tensor` in place; returns a handle (synchronize() returns `tensor`)."""
    _check_process_set(process_set, "allreduce_async_")
    op = _resolve_op(op, average)
    work = _allreduce_start("allreduce", [tensor], [tensor], [_name("allreduce", name)], op,
                            prescale_factor, postscale_factor)
    return _register(_Work(work.works, lambda: work.finish()[0], work.label))


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


def named_grouped_allreduce_async_(tensors, names, op, prescale_factor=1.0, postscale_factor=1.0):
    """grouped_allreduce_async_ with a name per tensor (DistributedOptimizer's buckets: the
    parameters' names, so that a mismatch names them)."""
    tensors = _grouped(tensors, "DistributedOptimizer")
    work = _allreduce_start("grouped_allreduce", tensors, tensors, list(names), op, prescale_factor,
                            postscale_factor)
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


# ---- reducescatter --------------------------------------------------------


def _reducescatter_check(tensor, where):
    _check_tensor(tensor, where)
    if tensor.dim() == 0:
        raise ValueError(f"weft.torch.{where}: the tensor needs at least one dimension")


def _reducescatter_issue(st, tensor, torch_op, op, prescale, postscale):
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


def _reducescatter_start(tensor, name, op, prescale, postscale):
    st = _basics.state()
    torch_op = _torch_op(op, "reducescatter")
    _reducescatter_check(tensor, "reducescatter")
    _check.exchange(st, f"reducescatter {_shapes([name], [tensor])} op={_OP_NAMES[op]}{_scales(prescale, postscale)}")
    return _reducescatter_issue(st, tensor, torch_op, op, prescale, postscale)


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
        from ._movement import allgather

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


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducescatters of a list of tensors under one check; synchronize() gives the list."""
    _check_process_set(process_set, "grouped_reducescatter_async")
    st = _basics.state()
    torch_op = _torch_op(op, "grouped_reducescatter")
    tensors = list(tensors)
    for t in tensors:
        _reducescatter_check(t, "grouped_reducescatter")
    base = _name("grouped_reducescatter", name)
    names = [f"{base}.{i}" for i in range(len(tensors))]
    _check.exchange(st, f"grouped_reducescatter {_shapes(names, tensors)} op={_OP_NAMES[op]}"
                        f"{_scales(prescale_factor, postscale_factor)}")
    works = [_reducescatter_issue(st, t, torch_op, op, prescale_factor, postscale_factor) for t in tensors]
    return _register(_Work([w for x in works for w in x.works], lambda: [x.finish() for x in works]))


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of each tensor of a list (not differentiable); a list."""
    pairs = [compression.compress(t) for t in tensors]
    outs = synchronize(grouped_reducescatter_async([p[0] for p in pairs], name, op, process_set,
                                                   prescale_factor, postscale_factor))
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]


def sparse_allreduce_async(tensor, name=None, op=Average, process_set=global_process_set):
    raise NotImplementedError("weft.torch: sparse allreduce is not supported; reduce a dense tensor "
                              "(DistributedOptimizer(sparse_as_dense=True) for sparse gradients)")
