"""Where this process sits in its job, read from the launcher's environment.

`detect()` looks for the variables of each launcher in turn, first match wins:

  weftrun   WEFT_RANK, WEFT_NRANKS, WEFT_LOCAL_RANK, WEFT_LOCAL_SIZE,
            WEFT_CROSS_RANK, WEFT_CROSS_SIZE
  torchrun  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
            GROUP_WORLD_SIZE
  Open MPI  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
  MPICH     PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
  srun      SLURM_PROCID, SLURM_STEP_NUM_TASKS (or SLURM_NTASKS), SLURM_LOCALID,
            SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE, SLURM_NTASKS_PER_NODE),
            SLURM_NODEID, SLURM_STEP_NUM_NODES (or SLURM_NNODES)

and, with none of them, a single process (size 1), as Horovod runs without a
launcher. SLURM's variables count only inside an srun step (SLURM_STEP_ID):
an sbatch script has SLURM_PROCID and SLURM_NTASKS too, but runs one process
(a warning says so when SLURM_NTASKS > 1). Local and cross values the
launcher does not give stay None: init() then derives them from the ranks'
host names.

`rendezvous()` says where rank 0 serves torch's store: MASTER_ADDR and
MASTER_PORT, else WEFT_ROOT_ADDR (host:port), else, for a job whose ranks all
run on one node (local size == size), 127.0.0.1 and a port derived from the
launcher's job id, else, under srun, the first node of SLURM_STEP_NODELIST
and that port; otherwise it raises, naming what to set. docs/horovod.md.
"""
import dataclasses
import hashlib
import os
import re
import warnings
from typing import Mapping, Optional

# The ports a single-node job without MASTER_PORT picks from (by its job id).
_PORT_BASE, _PORT_SPAN = 29600, 20000


@dataclasses.dataclass
class Launch:
    launcher: str  # "weftrun", "torchrun", "openmpi", "mpich", "slurm" or "none"
    rank: int
    size: int
    local_rank: Optional[int] = None
    local_size: Optional[int] = None
    cross_rank: Optional[int] = None
    cross_size: Optional[int] = None
    job_id: Optional[str] = None  # to derive a port when no address is given
    root_host: Optional[str] = None  # the host rank 0 runs on, where the launcher says it

    def topology_known(self):
        return None not in (self.local_rank, self.local_size, self.cross_rank, self.cross_size)


def _int(env, name):
    value = env.get(name)
    if value is None or value.strip() == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"weft.torch: {name}={value!r} is not an integer") from None


def _first(env, *names):
    for name in names:
        value = _int(env, name)
        if value is not None:
            return value
    return None


def slurm_tasks_on_node(spec, node):
    """The count for `node` in SLURM's tasks-per-node list, e.g. "2(x3),1"."""
    counts = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not m:
            return None
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts[node] if 0 <= node < len(counts) else None


def slurm_first_host(nodelist):
    """The first host of a SLURM host list: "gpu[07-09,12],cpu1" -> "gpu07",
    "rack[2-3]-n[01-04]" -> "rack2-n01" (each bracket's first value, as written)."""
    out, depth, pick = [], 0, True
    for ch in nodelist.strip():
        if ch == "[":
            depth, pick = depth + 1, True
        elif ch == "]":
            depth -= 1
        elif depth == 0:
            if ch == ",":
                break
            out.append(ch)
        elif ch in ",-":
            pick = False
        elif pick:
            out.append(ch)
    return "".join(out) or None


def _slurm(env):
    rank = _int(env, "SLURM_PROCID")
    size = _first(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
    node = _int(env, "SLURM_NODEID")
    local_size = None
    spec = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE")
    if spec and node is not None:
        local_size = slurm_tasks_on_node(spec, node)
    if local_size is None:
        local_size = _int(env, "SLURM_NTASKS_PER_NODE")
    job = env.get("SLURM_JOB_ID")
    step = env.get("SLURM_STEP_ID", "")
    # srun places task 0 on the first node of the step (block, cyclic and
    # plane distributions), unless the user gave the placement by hand.
    nodes = env.get("SLURM_STEP_NODELIST")
    arbitrary = env.get("SLURM_DISTRIBUTION", "").startswith("arbitrary")
    return Launch("slurm", rank, size, _int(env, "SLURM_LOCALID"), local_size, node,
                  _first(env, "SLURM_STEP_NUM_NODES", "SLURM_NNODES"),
                  f"slurm:{job}.{step}" if job else None,
                  slurm_first_host(nodes) if nodes and not arbitrary else None)


def detect(env: Mapping[str, str] = os.environ) -> Launch:
    """This process's place in the job, from the first launcher whose variables are set."""
    if env.get("WEFT_RANK") is not None:
        launch = Launch("weftrun", _int(env, "WEFT_RANK"), _int(env, "WEFT_NRANKS"),
                        _int(env, "WEFT_LOCAL_RANK"), _int(env, "WEFT_LOCAL_SIZE"),
                        _int(env, "WEFT_CROSS_RANK"), _int(env, "WEFT_CROSS_SIZE"))
        names = ("WEFT_RANK", "WEFT_NRANKS")
    elif env.get("RANK") is not None and env.get("WORLD_SIZE") is not None:
        launch = Launch("torchrun", _int(env, "RANK"), _int(env, "WORLD_SIZE"),
                        _int(env, "LOCAL_RANK"), _int(env, "LOCAL_WORLD_SIZE"),
                        _int(env, "GROUP_RANK"), _int(env, "GROUP_WORLD_SIZE"))
        if launch.cross_size is None and launch.local_size and launch.cross_rank is not None:
            if launch.size % launch.local_size == 0:
                launch.cross_size = launch.size // launch.local_size
        names = ("RANK", "WORLD_SIZE")
    elif env.get("OMPI_COMM_WORLD_RANK") is not None:
        job = env.get("OMPI_MCA_ess_base_jobid") or env.get("PMIX_NAMESPACE") or env.get("OMPI_MCA_orte_ess_jobid")
        launch = Launch("openmpi", _int(env, "OMPI_COMM_WORLD_RANK"), _int(env, "OMPI_COMM_WORLD_SIZE"),
                        _int(env, "OMPI_COMM_WORLD_LOCAL_RANK"), _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE"),
                        job_id=f"ompi:{job}" if job else None)
        names = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")
    elif env.get("PMI_RANK") is not None:
        job = env.get("PMI_KVSNAME") or env.get("PMIX_NAMESPACE")
        launch = Launch("mpich", _int(env, "PMI_RANK"), _int(env, "PMI_SIZE"),
                        _int(env, "MPI_LOCALRANKID"), _int(env, "MPI_LOCALNRANKS"),
                        job_id=f"pmi:{job}" if job else None)
        names = ("PMI_RANK", "PMI_SIZE")
    elif env.get("SLURM_PROCID") is not None and _first(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"):
        if env.get("SLURM_STEP_ID") is None and env.get("SLURM_STEPID") is None:
            # An sbatch script: SLURM_PROCID=0 and SLURM_NTASKS=N, but no
            # srun step runs the other ranks, so none would ever come.
            tasks = _first(env, "SLURM_NTASKS")
            if tasks and tasks > 1:
                warnings.warn(f"weft.torch: SLURM_NTASKS={tasks} but this process was not started by srun "
                              "(no SLURM_STEP_ID, as in an sbatch script): running as one process; start "
                              f"the script with srun to run {tasks} ranks", stacklevel=3)
            return Launch("none", 0, 1, 0, 1, 0, 1)
        launch = _slurm(env)
        names = ("SLURM_PROCID", "SLURM_NTASKS")
    else:
        return Launch("none", 0, 1, 0, 1, 0, 1)
    if launch.rank is None or launch.size is None:
        raise ValueError(f"weft.torch: launcher {launch.launcher}: {names[0]} is set but {names[1]} is not")
    if not 0 <= launch.rank < launch.size:
        raise ValueError(f"weft.torch: launcher {launch.launcher}: rank {launch.rank} is not in [0, {launch.size})")
    if launch.size == 1:
        launch.local_rank, launch.local_size, launch.cross_rank, launch.cross_size = 0, 1, 0, 1
    return launch


def _port(value, name):
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        raise ValueError(f"weft.torch: {name}={value!r} is not a port number")
    return port


def rendezvous(launch: Launch, env: Mapping[str, str] = os.environ):
    """(host, port) of the torch store that rank 0 serves; raises ValueError saying what to set."""
    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if addr and port:
        return addr, _port(port, "MASTER_PORT")
    root = env.get("WEFT_ROOT_ADDR")
    if root:
        host, sep, port = root.rpartition(":")
        if not sep or not host:
            raise ValueError(f"weft.torch: WEFT_ROOT_ADDR={root!r} is not host:port")
        return host.strip("[]"), _port(port, "WEFT_ROOT_ADDR")
    one_node = launch.local_size is not None and launch.local_size == launch.size
    if launch.job_id and (one_node or launch.root_host):
        digest = hashlib.blake2b(launch.job_id.encode(), digest_size=4).digest()
        port = _PORT_BASE + int.from_bytes(digest, "little") % _PORT_SPAN
        if one_node:
            return "127.0.0.1", port
        here = env.get("SLURMD_NODENAME")
        if launch.rank == 0 and here and here != launch.root_host:
            raise ValueError(
                f"weft.torch.init: rank 0 runs on {here}, not on {launch.root_host}, the first node of "
                f"SLURM_STEP_NODELIST where the other ranks look for it. Set MASTER_ADDR={here} and "
                "MASTER_PORT (a free port) for every rank")
        return launch.root_host, port
    where = ("its ranks are not all on one node" if not one_node
             else f"{launch.launcher} gives no job id to derive a port from")
    raise ValueError(
        f"weft.torch.init: rank {launch.rank} of {launch.size} (launched by {launch.launcher}) does not "
        f"know where to meet the other ranks: {where}. Set MASTER_ADDR and MASTER_PORT (rank 0's host "
        "and a free port, the same on every rank) or WEFT_ROOT_ADDR=host:port")
