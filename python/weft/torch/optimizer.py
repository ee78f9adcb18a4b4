"""DistributedOptimizer: Horovod's gradient-averaging optimizer wrapper.

The wrapped optimizer's class is subclassed on the fly (isinstance holds,
the class keeps its name) and its state shared. A hook on each parameter
(register_post_accumulate_grad_hook) counts the backward passes; on the
backward_passes_per_step-th, the gradient is ready.

weft matches collectives by order, so every rank must issue the same
allreduces in the same order even when hooks fire in different orders.
The gradients are therefore reduced in *buckets* fixed at construction, in a
fixed order: a bucket is issued (one grouped allreduce, one weft group) once
all its gradients are ready and every bucket before it was issued; step()
(or synchronize()) issues the buckets left, with zeros for gradients never
computed on this rank, as Horovod does, then waits for all of them. Buckets
come from `groups` (lists of parameters; each ungrouped parameter alone) or
the number of groups (`groups=N` / `num_groups=N`: the parameters split into N
runs of consecutive ones); otherwise parameters are packed, in reverse order
of registration (roughly the order backward produces them), into buckets of
up to WEFT_TORCH_BUCKET_MB MiB (default 25).
"""
import contextlib
import os
import warnings

import torch

from . import _basics, _reduce, _timeline, mpi_ops
from .compression import Compression
from .mpi_ops import Adasum, Average


def _bucket_bytes():
    value = os.environ.get("WEFT_TORCH_BUCKET_MB", "25")
    try:
        mb = float(value)
    except ValueError:
        raise ValueError(f"weft.torch: WEFT_TORCH_BUCKET_MB={value!r} is not a number") from None
    return max(mb, 0.0) * (1 << 20)


def _split(params, count):
    """`params` in `count` runs of consecutive ones, as even as possible (Horovod's split_list)."""
    size, extra = divmod(len(params), count)
    runs, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        if end > start:
            runs.append(params[start:end])
        start = end
    return runs


def make_buckets(params, groups, bucket_bytes):
    """The buckets (lists of parameters) in issue order: the bucket with the latest-registered
    parameter first, since backward produces the gradients of the last layers first."""
    index = {p: i for i, p in enumerate(params)}
    if isinstance(groups, int) and groups > 0:
        buckets = _split(params, groups)
    elif isinstance(groups, list):
        buckets, grouped = [], set()
        for group in groups:
            bucket = [p for p in group if p in index]
            grouped.update(bucket)
            if bucket:
                buckets.append(bucket)
        buckets += [[p] for p in params if p not in grouped]
    else:
        buckets, current, used = [], [], 0
        for p in reversed(params):
            nbytes = p.numel() * p.element_size()
            if current and used + nbytes > bucket_bytes:
                buckets.append(current)
                current, used = [], 0
            current.append(p)
            used += nbytes
        if current:
            buckets.append(current)
    return sorted(buckets, key=lambda b: -max(index[p] for p in b))


class _DistributedOptimizer:
    """The methods DistributedOptimizer adds to the wrapped optimizer's class."""

    def _hvd_setup(self, named_parameters, compression, backward_passes_per_step, op,
                   gradient_predivide_factor, groups, sparse_as_dense):
        params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            if any(not isinstance(item, tuple) for item in named):
                raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                                 "usually produced by model.named_parameters().")
            names = [k for k, _ in named]
            dups = sorted({k for k in names if names.count(k) > 1})
            if dups:
                raise ValueError("Parameter names in named_parameters must be unique. Found duplicates: "
                                 + ", ".join(dups))
            named_ids = {id(v) for _, v in named}
            unnamed = [p for p in params if id(p) not in named_ids]
            if unnamed:
                raise ValueError("named_parameters was specified, but one or more model parameters were "
                                 f"not named ({len(unnamed)} of {len(params)})")
            self._hvd_names = {v: k for k, v in named}
        else:
            self._hvd_names = {}
            for i, group in enumerate(self.param_groups):
                for j, p in enumerate(group["params"]):
                    self._hvd_names[p] = f"allreduce.noname.{i}.{j}"
        self._hvd_compression = compression
        self.backward_passes_per_step = backward_passes_per_step
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        trained = [p for p in params if p.requires_grad]
        self._hvd_buckets = make_buckets(trained, groups, _bucket_bytes())
        self._hvd_bucket_of = {p: b for b, bucket in enumerate(self._hvd_buckets) for p in bucket}
        self._hvd_synchronized = False
        self._hvd_should_synchronize = True
        self._hvd_hooks = []
        self._hvd_reset()
        if _basics.size() > 1:
            for p in trained:
                self._hvd_hooks.append(p.register_post_accumulate_grad_hook(self._hvd_on_grad))

    def _hvd_reset(self):
        self._hvd_ready_ns = {}  # the timeline's QUEUE: when each gradient was ready
        self._hvd_delay = {p: self.backward_passes_per_step for p in self._hvd_bucket_of}
        self._hvd_left = [len(b) for b in self._hvd_buckets]
        self._hvd_next = 0       # the next bucket to issue
        self._hvd_inflight = []  # (bucket, handle, [(param, wire tensor, ctx)])

    def _hvd_on_grad(self, p):
        if self._hvd_delay[p] <= 0:
            raise AssertionError("Gradients were computed more than backward_passes_per_step times before call "
                                 "to step(). Increase backward_passes_per_step to accumulate gradients locally.")
        self._hvd_delay[p] -= 1
        if self._hvd_delay[p] == 0:
            if _timeline.enabled():
                self._hvd_ready_ns[p] = _timeline.now()
            self._hvd_left[self._hvd_bucket_of[p]] -= 1
            while self._hvd_next < len(self._hvd_buckets) and self._hvd_left[self._hvd_next] == 0:
                self._hvd_issue(self._hvd_next)

    def _hvd_issue(self, b):
        if _timeline.enabled():
            issued = _timeline.now()
            for p in self._hvd_buckets[b]:
                ready = self._hvd_ready_ns.get(p, issued)  # not computed here: no wait of its own
                _timeline.span(_basics.state().comm, "tensor " + self._hvd_names[p], "QUEUE", ready,
                               issued, bucket=b, tensors=len(self._hvd_buckets[b]))
        entries = []
        for p in self._hvd_buckets[b]:
            if p.grad is None:  # not computed on this rank: others may have it (Horovod sends zeros too)
                p.grad = torch.zeros_like(p)
            grad = p.grad
            if grad.is_sparse:
                if not self.sparse_as_dense:
                    raise NotImplementedError(
                        "weft.torch.DistributedOptimizer: sparse gradients are not supported; "
                        "pass sparse_as_dense=True")
                grad = grad.to_dense()
            wire, ctx = self._hvd_compression.compress(grad)
            entries.append((p, wire, ctx))
        pre, post = 1.0, 1.0
        if self.op == Average:
            pre, post = 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        handle = _reduce.named_grouped_allreduce_async_(
            [w for _, w, _ in entries], [self._hvd_names[p] for p, _, _ in entries], self.op, pre, post)
        self._hvd_inflight.append((b, handle, entries))
        self._hvd_next = b + 1

    def synchronize(self):
        """Issues the gradient allreduces not started yet and waits for all; the gradients are then averaged."""
        if _basics.size() > 1:
            while self._hvd_next < len(self._hvd_buckets):
                self._hvd_issue(self._hvd_next)
            inflight, self._hvd_inflight = self._hvd_inflight, []
            for _, handle, entries in inflight:
                outputs = mpi_ops.synchronize(handle)
                for (p, wire, ctx), out in zip(entries, outputs):
                    reduced = self._hvd_compression.decompress(out, ctx)
                    if p.grad.is_sparse:
                        p.grad = reduced.to_sparse()
                    elif reduced is not p.grad:
                        p.grad.copy_(reduced)
            self._hvd_reset()
        self._hvd_synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside this context does not synchronize (after an explicit synchronize(),
        e.g. to clip the averaged gradients)."""
        self._hvd_should_synchronize = False
        try:
            yield
        finally:
            self._hvd_should_synchronize = True

    def step(self, closure=None):
        if self._hvd_should_synchronize:
            if self._hvd_synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(). This can cause training slowdown. You may want to "
                              "consider using optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._hvd_synchronized = False
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._hvd_inflight:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before "
                                 "optimizer.step() or optimizer.synchronize(). This is prohibited as it can "
                                 "cause a race condition.")
        return super().zero_grad(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        if self._hvd_inflight:
            self.synchronize()
        self._hvd_reset()
        self._hvd_synchronized = False
        self._hvd_should_synchronize = True
        return super().load_state_dict(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        self._hvd_reset()


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=mpi_ops.global_process_set):
    """Wraps `optimizer` so that step() applies gradients averaged (or reduced by `op`)
    over all ranks. Returns an optimizer of the same class sharing `optimizer`'s state.

    named_parameters: model.named_parameters(), to name the allreduces.
    compression: Compression.none / fp16 / bf16 for the gradients on the wire.
    backward_passes_per_step: backward passes accumulated locally (summed) per step().
    op: Average (default), Sum, Min, Max or Product (not Adasum).
    gradient_predivide_factor: with Average, gradients are scaled by 1/f before the
        sum and f/size() after it.
    num_groups, groups: how gradients are batched into grouped allreduces (module doc).
    sparse_as_dense: reduce sparse gradients as dense tensors (required for them).
    """
    mpi_ops._check_process_set(process_set, "DistributedOptimizer")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if op == Adasum:
        raise NotImplementedError("weft.torch.DistributedOptimizer: op=Adasum is not supported; use Average")
    mpi_ops._torch_op(op, "DistributedOptimizer")
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be removed in v0.23.0.",
                      DeprecationWarning)
        if groups is None:
            groups = num_groups
    if groups is not None:
        if not (isinstance(groups, list) or (isinstance(groups, int) and groups > 0)):
            raise ValueError("groups should be a non-negative integer or a list of list of torch.Tensor.")
        if isinstance(groups, list):
            seen = set()
            for group in groups:
                for p in group:
                    if not isinstance(p, torch.Tensor):
                        raise ValueError("groups must consist of torch.Tensor.")
                    if p in seen:
                        raise ValueError("A parameter can only appear once in groups.")
                    seen.add(p)
    if backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be > 0")
    base = optimizer.__class__
    cls = type(base.__name__, (_DistributedOptimizer, base), {"__module__": base.__module__})
    wrapped = cls.__new__(cls)
    # The same param groups and state; not instance attributes that would hide the methods
    # added here (an LR scheduler made before wrapping leaves a `step` wrapper on `optimizer`).
    wrapped.__dict__.update({k: v for k, v in optimizer.__dict__.items()
                             if not hasattr(_DistributedOptimizer, k)})
    wrapped._hvd_setup(named_parameters, compression, backward_passes_per_step, op,
                       gradient_predivide_factor, groups, sparse_as_dense)
    return wrapped
