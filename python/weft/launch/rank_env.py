"""The environment each rank starts with."""
import os
import secrets

# Variables that describe one machine's session: never sent to another host
# (a remote rank keeps its own).
_HOST_ONLY = {
    "HOME", "HOSTNAME", "LOGNAME", "MAIL", "OLDPWD", "PWD", "SHELL", "SHLVL", "SSH_AGENT_PID",
    "SSH_AUTH_SOCK", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "TERM", "TMPDIR", "USER", "_",
    "DISPLAY", "XDG_RUNTIME_DIR", "XDG_SESSION_ID",
}


def job_facts(master_addr, master_port, root_port, secret=None):
    """What every rank of one job shares."""
    return {
        "master_addr": master_addr,
        "master_port": master_port,
        "root_port": root_port,
        # weft's bootstrap refuses peers without it: a fresh one per job.
        "secret": secret if secret is not None else secrets.randbits(62) + 1,
    }


def rank_env(slot, nranks, job, extra=None):
    """The variables that tell one rank who it is (weft's, torchrun's)."""
    env = {
        "WEFT_RANK": slot.rank,
        "WEFT_NRANKS": nranks,
        "WEFT_LOCAL_RANK": slot.local_rank,
        "WEFT_LOCAL_SIZE": slot.local_size,
        "WEFT_CROSS_RANK": slot.cross_rank,
        "WEFT_CROSS_SIZE": slot.cross_size,
        "WEFT_ROOT_ADDR": f"{job['master_addr']}:{job['root_port']}",
        "WEFT_JOB_SECRET": job["secret"],
        # torchrun's names: torch.distributed's env:// rendezvous and scripts
        # written for torchrun read these.
        "RANK": slot.rank,
        "WORLD_SIZE": nranks,
        "LOCAL_RANK": slot.local_rank,
        "LOCAL_WORLD_SIZE": slot.local_size,
        "GROUP_RANK": slot.node,
        "MASTER_ADDR": job["master_addr"],
        "MASTER_PORT": job["master_port"],
    }
    env.update(extra or {})
    return {k: str(v) for k, v in env.items()}


def forwarded(environ=None, names=()):
    """What a remote rank gets of the launcher's environment: the variables
    named with -x, and every WEFT_*, NCCL_*, PYTHON*, OMP_* and CUDA_* one
    (as horovodrun forwards them), never the session's own."""
    environ = os.environ if environ is None else environ
    out = {}
    for k, v in environ.items():
        if k in _HOST_ONLY:
            continue
        if k.startswith(("WEFT_", "NCCL_", "PYTHON", "OMP_", "CUDA_", "HOROVOD_")) or k in names:
            out[k] = v
    for name in names:
        if "=" in name:
            k, _, v = name.partition("=")
            out[k] = v
    return out


# What rank_env sets that a joiner (elastic mode) must not have: it has no
# rank until the library registers it through the store.
RANK_VARS = (
    "WEFT_RANK", "WEFT_NRANKS", "WEFT_LOCAL_RANK", "WEFT_LOCAL_SIZE", "WEFT_CROSS_RANK",
    "WEFT_CROSS_SIZE", "WEFT_ROOT_ADDR", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
)


def elastic_env(store, min_np, max_np, timeout_s, worker, join):
    """What every worker of an elastic job gets (docs/weftrun.md): the job's
    store (host:port), its bounds (max_np 0: none), the worker's number and
    whether it joins a running job."""
    return {
        "WEFT_ELASTIC": "1",
        "WEFT_ELASTIC_STORE": store,
        "WEFT_ELASTIC_MIN_NP": str(min_np),
        "WEFT_ELASTIC_MAX_NP": str(max_np or 0),
        "WEFT_ELASTIC_TIMEOUT_S": f"{timeout_s:g}",
        "WEFT_ELASTIC_WORKER": str(worker),
        "WEFT_ELASTIC_JOIN": "1" if join else "0",
    }
