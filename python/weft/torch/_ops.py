"""What the Horovod collectives share: the ops, process sets, names, handles, argument checks.

An async call returns an int handle for a _Work: the torch Works of the call
and how to finish its result (postscale, unpadding). poll(handle) says
whether the Works are done; synchronize(handle) waits and finishes.
"""
import collections
import itertools
import warnings

import torch
import torch.distributed as dist

from . import _basics, _check, _timeline

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
    _check._seq = 0


class _Work:
    """The torch Works of one call and how to finish its result. `label`:
    (phase, tensor names, start time) for the timeline (_timeline.py)."""

    def __init__(self, works, finish, label=None):
        self.works = [w for w in works if w is not None]
        self.finish = finish
        self.label = label

    def done(self):
        return all(w.is_completed() for w in self.works)

    def wait(self):
        try:
            for w in self.works:
                w.wait()
        except RuntimeError as e:
            raise HorovodInternalError(str(e)) from e
        with torch.no_grad():
            out = self.finish()
        if self.label is not None and _timeline.enabled():
            phase, names, start = self.label
            _timeline.tensor_spans(_basics.state().comm, names, phase, start, _timeline.now())
        return out


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
