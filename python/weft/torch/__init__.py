"""weft under PyTorch.

1. The torch.distributed backend "weft" (_backend.py): importing this module
   registers it; torch also finds it through the ``torch.distributed.backends``
   entry point ``weft.torch:register``. docs/pytorch.md.
2. Horovod's PyTorch API: ``import weft.torch as hvd`` in place of
   ``import horovod.torch as hvd`` runs a Horovod training script on weft
   (init, rank/size, allreduce and the other collectives, DistributedOptimizer,
   broadcast_parameters, SyncBatchNorm, ...). docs/horovod.md.
"""
from ._backend import BACKEND, comm_handle, register
from ._basics import (ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled, init,
                      is_homogeneous, is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
                      mpi_threads_supported, nccl_built, rank, rocm_built, shutdown, size, start_timeline,
                      stop_timeline, weft_built)
from ._check import MismatchError
from .compression import Compression
from .functions import allgather_object, broadcast_object, broadcast_optimizer_state, broadcast_parameters
from .mpi_ops import (Adasum, Average, HorovodInternalError, Max, Min, ProcessSet, Product, Sum,
                      add_process_set, allgather, allgather_async, allreduce, allreduce_, allreduce_async,
                      allreduce_async_, alltoall, alltoall_async, barrier, broadcast, broadcast_, broadcast_async,
                      broadcast_async_, global_process_set, grouped_allgather, grouped_allgather_async,
                      grouped_allreduce, grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
                      grouped_reducescatter, grouped_reducescatter_async, join, poll, reducescatter,
                      reducescatter_async, remove_process_set, sparse_allreduce_async, synchronize)
from .optimizer import DistributedOptimizer
from .sync_batch_norm import SyncBatchNorm

from . import elastic  # noqa: E402  (hvd.elastic: run, TorchState, ObjectState)

register()
