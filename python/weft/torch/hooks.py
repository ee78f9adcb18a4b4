"""DDP communication hooks over weft (docs/compression.md).

``wire_allreduce_hook`` runs each float32 gradient bucket's allreduce with
its data on the wire as bfloat16 or float16 and every addition in float32
(weft's wire compression, not a 16-bit sum), averaged over the ranks as
DDP's default hook does::

    from weft.torch.hooks import WireState, wire_allreduce_hook
    model = DistributedDataParallel(net)
    model.register_comm_hook(WireState("bf16"), wire_allreduce_hook)

The process group must be a weft one (``init_process_group("weft")``); CPU
tensors. Buckets of other dtypes run the plain averaging allreduce.
The error of each averaged gradient element is bounded as the docs state
(for n ranks about n * 2^-8 of sum |g_i| / n with bf16).
"""

import torch
import torch.distributed as dist

from weft import _C

# weft_wire_t's values (include/weft.h).
_WIRE = {"none": 1, "bf16": 2, "fp16": 3}


class WireState:
    """The hook's state: the wire format ("bf16", "fp16" or "none") and the
    process group (None: the default group)."""

    def __init__(self, wire="bf16", process_group=None):
        if wire not in _WIRE:
            raise ValueError("weft: wire must be one of %s, not %r" % (sorted(_WIRE), wire))
        self.wire = wire
        self.process_group = process_group


def wire_allreduce_hook(state, bucket):
    """Averages ``bucket``'s gradients across ranks with a compressed wire;
    returns the future DDP waits on (the averaged buffer)."""
    group = state.process_group if state.process_group is not None else dist.group.WORLD
    buf = bucket.buffer()
    if buf.dtype != torch.float32 or buf.is_cuda:
        fut = dist.all_reduce(buf, op=dist.ReduceOp.AVG, group=group, async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])
    backend = group._get_backend(torch.device("cpu"))
    work = _C.allreduce_wire(backend, buf, _WIRE[state.wire], True)
    return work.get_future().then(lambda f: f.value()[0])
