"""Runs a function on N forked ranks that start weft.torch as a launcher would:
each rank gets the environment of that launcher, then calls hvd.init().

    results = run_hvd(fn, n, launcher="torchrun")   # fn(rank, n) -> picklable

Launchers: "torchrun" (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
GROUP_RANK, MASTER_ADDR/PORT), "openmpi" (OMPI_COMM_WORLD_*, WEFT_ROOT_ADDR),
"weftrun" (WEFT_RANK ... WEFT_CROSS_SIZE, MASTER_ADDR/PORT) and "slurm"
(SLURM_PROCID, SLURM_NTASKS, SLURM_STEP_ID, MASTER_ADDR/PORT, no local values: init()
derives them from the host names). Failures and hangs are reported as
ranks.run_ranks reports them.
"""
import os

from ranks import free_port, run_ranks

_LAUNCHER_VARS = ("WEFT_RANK", "WEFT_NRANKS", "WEFT_LOCAL_RANK", "WEFT_LOCAL_SIZE", "WEFT_CROSS_RANK",
                  "WEFT_CROSS_SIZE", "WEFT_ROOT_ADDR", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                  "GROUP_RANK", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
                  "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                  "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID",
                  "SLURM_NNODES", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_STEP_NUM_TASKS",
                  "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NODELIST", "SLURM_JOB_ID")


def launcher_env(launcher, rank, n, port):
    master = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    if launcher == "torchrun":
        return dict(master, RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(n),
                    GROUP_RANK="0")
    if launcher == "openmpi":
        return {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(n),
                "OMPI_COMM_WORLD_LOCAL_RANK": str(rank), "OMPI_COMM_WORLD_LOCAL_SIZE": str(n),
                "WEFT_ROOT_ADDR": f"127.0.0.1:{port}"}
    if launcher == "weftrun":
        return dict(master, WEFT_RANK=str(rank), WEFT_NRANKS=str(n), WEFT_LOCAL_RANK=str(rank),
                    WEFT_LOCAL_SIZE=str(n), WEFT_CROSS_RANK="0", WEFT_CROSS_SIZE="1", RANK=str(rank),
                    WORLD_SIZE=str(n))
    if launcher == "slurm":
        return dict(master, SLURM_PROCID=str(rank), SLURM_NTASKS=str(n), SLURM_STEP_ID="0")
    raise ValueError(launcher)


def run_hvd(fn, n, launcher="torchrun", timeout=120, env=None):
    port = free_port()

    def child(rank, n, _init_method):
        for name in _LAUNCHER_VARS:
            os.environ.pop(name, None)
        os.environ.update(launcher_env(launcher, rank, n, port))
        import torch

        torch.set_num_threads(1)
        import weft.torch as hvd

        hvd.init()
        try:
            return fn(rank, n)
        finally:
            hvd.shutdown()

    return run_ranks(child, n, init=False, timeout=timeout, env=dict({"OMP_NUM_THREADS": "1"}, **(env or {})))
