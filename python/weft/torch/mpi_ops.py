"""Horovod's collectives (horovod.torch.mpi_ops) over torch.distributed on weft.

Every call checks its tensors, runs the consistency check (_check.py) and
issues torch.distributed ops with async_op=True on the default group; the
weft backend runs them in call order on its runner thread. The calls live in
_reduce.py (allreduce, reducescatter) and _movement.py (allgather,
broadcast, alltoall); what they share (ops, handles, argument checks) in
_ops.py. This module is the public face, as Horovod's mpi_ops, and holds the
synchronization points.

Ops: Average (the default), Sum, Min, Max, Product; Adasum is refused.
"""
import torch.distributed as dist

from . import _basics, _check
from ._join import join  # noqa: F401
from ._movement import (allgather, allgather_async, alltoall, alltoall_async, broadcast, broadcast_,  # noqa: F401
                        broadcast_async, broadcast_async_, grouped_allgather, grouped_allgather_async,
                        grouped_broadcast_)
from ._ops import (Adasum, Average, HorovodInternalError, Max, Min, ProcessSet, Product, Sum,  # noqa: F401
                   _check_process_set, _check_root, _name, _reset, _torch_op, add_process_set,
                   global_process_set, poll, remove_process_set, synchronize)
from ._reduce import (allreduce, allreduce_, allreduce_async, allreduce_async_, grouped_allreduce,  # noqa: F401
                      grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_, grouped_reducescatter,
                      grouped_reducescatter_async, reducescatter, reducescatter_async, sparse_allreduce_async)

# ---- synchronization points -----------------------------------------------


def barrier(process_set=global_process_set):
    """Returns once every rank has called barrier() (after the ops issued before it)."""
    _check_process_set(process_set, "barrier")
    st = _basics.state()
    _check.exchange(st, "barrier", spec=("barrier",))
    dist.barrier(group=st.group)
