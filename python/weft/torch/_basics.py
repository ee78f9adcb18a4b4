"""init / shutdown and the job's shape: Horovod's basics, over torch.distributed.

init() joins (or adopts) the default process group and creates a second group
of the same ranks, the control group: the consistency check (_check.py) and
the size exchanges of allgather and alltoall run there, so that they never
wait behind the gradient allreduces queued on the default group.
"""
import datetime
import os
import socket

import torch.distributed as dist

from . import _backend, _env


class _State:
    def __init__(self, group, control, created, launch, topo):
        self.group = group          # the default process group: the data
        self.control = control      # same ranks: checks, sizes
        self.created = created      # init() created the default group (shutdown destroys it)
        self.launcher = launch.launcher
        self.rank = dist.get_rank()
        self.size = dist.get_world_size()
        self.local_rank, self.local_size, self.cross_rank, self.cross_size = topo
        self._comm = None

    @property
    def comm(self):
        """The data group's weft_comm_t (an int; 0 if the group is not on weft): the timeline's."""
        if self._comm is None:
            try:
                self._comm = _backend.comm_handle(self.group)
            except Exception:  # noqa: BLE001 - another backend: no weft timeline to write to
                self._comm = 0
        return self._comm


_state = None


def _timeout():
    value = os.environ.get("WEFT_TORCH_TIMEOUT_S")
    if not value:
        return None
    return datetime.timedelta(seconds=float(value))


def _init_group(launch):
    timeout = _timeout()
    kwargs = {"timeout": timeout} if timeout else {}
    if launch.launcher == "none":
        # No launcher: one process, as Horovod's init() without horovodrun.
        dist.init_process_group(_backend.BACKEND, store=dist.HashStore(), rank=0, world_size=1, **kwargs)
        return
    host, port = _env.rendezvous(launch)
    dist.init_process_group(_backend.BACKEND, init_method=f"tcp://{host}:{port}",
                            rank=launch.rank, world_size=launch.size, **kwargs)


def _derive_topology(control, rank, size):
    """(local_rank, local_size, cross_rank, cross_size) from the ranks' host names.

    Local: the ranks on this host, in rank order. Cross, as Horovod's: the ranks
    with this rank's local rank (one per node when nodes run equally many), in
    rank order."""
    hosts = [None] * size
    dist.all_gather_object(hosts, socket.gethostname(), group=control)
    mine = [r for r in range(size) if hosts[r] == hosts[rank]]
    local_rank = mine.index(rank)
    local_ranks = [[r for r in range(size) if hosts[r] == hosts[q]].index(q) for q in range(size)]
    cross = [r for r in range(size) if local_ranks[r] == local_rank]
    return local_rank, len(mine), cross.index(rank), len(cross)


def init(comm=None, process_sets=None, _rebuilt=False):
    """Starts weft.torch: joins the ranks of the job (Horovod's hvd.init()).

    Without a default process group, creates one on backend "weft", reading
    rank, size and rendezvous from the launcher's environment (weftrun,
    torchrun, mpirun, srun; _env.py); with none, runs as one process. A
    default group the program created already (of any backend) is adopted.
    Every rank must call init(). Calling it again does nothing."""
    global _state
    if comm is not None:
        raise ValueError("weft.torch.init: comm= (an MPI communicator or a list of ranks) is not supported: "
                         "weft.torch runs on all the ranks of the job")
    if process_sets not in (None, [], "dynamic"):
        raise NotImplementedError("weft.torch.init: process sets are not supported (only the global one)")
    if _state is not None:
        return
    if os.environ.get("WEFT_ELASTIC_JOIN") == "1" and not _rebuilt:
        # A worker weftrun added to an elastic job: let in at the next commit (elastic.py).
        from . import elastic

        os.environ["WEFT_ELASTIC_JOIN"] = "joined"
        elastic._joiner_init()
        return
    _backend.register()
    launch = _env.detect()
    created = not dist.is_initialized()
    if created:
        _init_group(launch)
    group = dist.distributed_c10d._get_default_group()
    rank, size = dist.get_rank(), dist.get_world_size()
    timeout = _timeout()  # the control group's calls time out as the data group's
    control = dist.new_group(backend=dist.get_backend(group), **({"timeout": timeout} if timeout else {}))
    # Groups rebuilt by weft.torch.elastic (_rebuilt) derive it on every rank:
    # the launcher's figures describe the job as it started.
    if not _rebuilt and launch.topology_known() and launch.rank == rank and launch.size == size:
        topo = (launch.local_rank, launch.local_size, launch.cross_rank, launch.cross_size)
    elif size == 1:
        topo = (0, 1, 0, 1)
    else:
        topo = _derive_topology(control, rank, size)
    _state = _State(group, control, created, launch, topo)


def shutdown():
    """Ends weft.torch: destroys the groups init() created. init() may be called again."""
    global _state
    if _state is None:
        return
    from . import mpi_ops  # the handles in flight end with the groups

    mpi_ops._reset()
    state, _state = _state, None
    if state.created:
        dist.destroy_process_group()
    elif dist.is_initialized():
        dist.destroy_process_group(state.control)


def state():
    """The running state; raises ValueError (as Horovod does) before init()."""
    if _state is None:
        raise ValueError("weft.torch has not been initialized; run hvd.init() first")
    return _state


def is_initialized():
    return _state is not None


def size():
    """The number of ranks in the job."""
    return state().size


def rank():
    """This process's rank in the job, 0 .. size() - 1."""
    return state().rank


def local_size():
    """The number of ranks on this node."""
    return state().local_size


def local_rank():
    """This process's rank among the ranks of its node."""
    return state().local_rank


def cross_size():
    """The number of nodes with a rank of this local rank (the number of nodes when all run equally many)."""
    return state().cross_size


def cross_rank():
    """The index of this node among them (the node's rank)."""
    return state().cross_rank


def is_homogeneous():
    """Every node runs the same number of ranks."""
    return state().local_size * state().cross_size == state().size


# What weft is built with, asked by Horovod scripts. weft is its own library:
# it is neither MPI, nor Gloo, nor NCCL (its NCCL shim replaces NCCL; it does
# not use it), and has no DDL/CCL/ROCm.
def weft_built():
    return True


def mpi_built():
    return False


def mpi_enabled():
    return False


def mpi_threads_supported():
    return False


def gloo_built():
    return False


def gloo_enabled():
    return False


def nccl_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def rocm_built():
    return False


def cuda_built():
    """True where weft's torch backend takes CUDA tensors (built with CUDA)."""
    return bool(_backend._C.cuda_supported())


def start_timeline(file_path, mark_cycles=False):
    raise NotImplementedError("weft.torch: Horovod's timeline is not supported; weft's own is WEFT_TIMELINE "
                              "(docs/env.md, rendered by weft-report)")


def stop_timeline():
    raise NotImplementedError("weft.torch: Horovod's timeline is not supported; use WEFT_TIMELINE")
