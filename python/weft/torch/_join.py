"""join(): a rank out of data stands in for itself, with zeros, until every rank has joined.

As Horovod's: a rank that calls join() takes part, with zero tensors, in the
allreduces (single and grouped, so DistributedOptimizer's buckets) and
barriers the other ranks still issue, until all ranks have called join();
allgather, broadcast, alltoall and reducescatter beside a joined rank raise
on every rank. It rides on the consistency check (_check.exchange): a joined
rank's row is neutral, and when any rank has joined, every rank learns what
the others are calling (a small spec) and the joined ones mirror it.
Averages divide by size(): a joined rank counts as zeros. Needs the check
(WEFT_TORCH_CHECK=1, the default); with it off, every rank must call join()
without collectives in between, and join() is a barrier.
"""
import time

import torch
import torch.distributed as dist

from . import _basics, _check
from ._ops import _TORCH_OPS


def _device(kind, device):
    if kind != "cuda":
        return torch.device(kind)
    return torch.device("cuda", device if device >= 0 else torch.cuda.current_device())


def _mirror(st, spec, device):
    """Issues, with zeros, the collective the active ranks described in `spec`."""
    if spec[0] == "barrier":
        dist.barrier(group=st.group)
        return
    _, tensors, op = spec
    zeros = [torch.zeros(shape, dtype=dtype, device=_device(kind, device)) for shape, dtype, kind in tensors]
    torch_op = _TORCH_OPS[op]
    if len(zeros) == 1:
        dist.all_reduce(zeros[0], op=torch_op, group=st.group)
    elif zeros:
        with dist._coalescing_manager(group=st.group):
            for z in zeros:
                dist.all_reduce(z, op=torch_op, group=st.group)


def join(device=-1):
    """Waits until every rank has called join(), standing in with zeros for the allreduces
    and barriers the others issue meanwhile; returns the rank that joined last.

    device: the CUDA device of the zero tensors when the others reduce CUDA
    tensors (-1: the current one)."""
    st = _basics.state()
    if st.size == 1:
        return 0
    if not _check.enabled():
        # Without the check the ranks cannot tell each other what they call.
        stamp = torch.tensor([time.time()], dtype=torch.float64)
        stamps = torch.empty(st.size, dtype=torch.float64)
        dist.all_gather_into_tensor(stamps, stamp, group=st.group)
        return int(stamps.argmax())
    joined_at = _check._seq + 1  # the checked call at which this rank joined
    while True:
        answer = _check.exchange(st, "join", joining=True)
        if answer == _check.ALL_JOINED:
            break
        _mirror(st, answer.active_spec(), device)
    at = [row[0] for row in _check.gather_ints(st, [joined_at])]
    latest = max(at)
    return max(r for r in range(st.size) if at[r] == latest)
