"""A SLURM cluster of the test's own: munged, slurmctld and one slurmd per
node, configured in a temporary folder, started as root and stopped at the
end (also when a check fails), so that a test runs a job with the real srun.

    with slurm_cluster(tmp_path, [Node("n1")]) as env:         # one node
        subprocess.run(["srun", "-n", "2", ...], env=env)
    with slurm_cluster(tmp_path, [Node("a1", "ns1", "10.214.7.1"), ...]) as env:

A node with a network namespace runs its slurmd there (`nsenter --net`), so
its tasks run there; the first node's namespace also runs slurmctld, and srun
must be started there too (`srun_cmd` says how). Node names resolve in the
tasks through a hosts file of the bed's, bind-mounted over /etc/hosts in a
mount namespace of each slurmd's own (`unshare -m`: nothing changes outside).
`missing()` says what is not installed, for a skip.
"""
import contextlib
import dataclasses
import os
import random
import shutil
import socket
import subprocess
import tempfile
import textwrap
import time
from typing import List, Optional

from ranks import free_port

DAEMONS = {"munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd", "srun": "slurm-client"}


@dataclasses.dataclass
class Node:
    name: str
    netns: Optional[str] = None  # run the node's slurmd (and so its tasks) in this namespace
    addr: str = "127.0.0.1"


def _which(name):
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None)


def missing():
    """What stops a bed from starting here, or None."""
    if os.geteuid() != 0:
        return "a SLURM cluster of the test's own needs root (its slurmd starts tasks)"
    absent = [pkg for name, pkg in DAEMONS.items() if not _which(name)]
    if absent:
        return "SLURM is not installed: apt-get install " + " ".join(sorted(set(absent)))
    return None


def _in(ns, cmd):
    return ["nsenter", f"--net=/var/run/netns/{ns}", *cmd] if ns else list(cmd)


def _with_hosts(hosts, cmd):
    """cmd in a mount namespace of its own where `hosts` is /etc/hosts."""
    return ["unshare", "-m", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"', hosts, *cmd]


def srun_cmd(nodes: List[Node], *args):
    """srun with args, started where the controller runs."""
    return _in(nodes[0].netns, [_which("srun"), *args])


def _config(d, nodes, ports):
    host = socket.gethostname().split(".")[0]
    lines = [f"NodeName={n.name} NodeAddr={n.addr} CPUs=2 State=UNKNOWN" for n in nodes]
    return textwrap.dedent(f"""\
        ClusterName=weft
        SlurmctldHost={host}({nodes[0].addr})
        AuthType=auth/munge
        AuthInfo=socket={d}/munge.sock
        CredType=cred/munge
        SlurmUser=root
        SlurmdUser=root
        SlurmctldPort={ports[0]}
        SlurmdPort={ports[1]}
        FirstJobId={random.randint(1000, 900000)}
        StateSaveLocation={d}/state
        SlurmdSpoolDir={d}/spool-%n
        SlurmctldPidFile={d}/slurmctld.pid
        SlurmdPidFile={d}/slurmd-%n.pid
        SlurmctldLogFile={d}/slurmctld.log
        SlurmdLogFile={d}/slurmd-%n.log
        ProctrackType=proctrack/linuxproc
        TaskPlugin=task/none
        SchedulerType=sched/builtin
        SelectType=select/cons_tres
        SelectTypeParameters=CR_Core
        ReturnToService=2
        MpiDefault=none
        JobCompType=jobcomp/none
        AccountingStorageType=accounting_storage/none
        """) + "\n".join(lines) + "\nPartitionName=weft Nodes=ALL Default=YES MaxTime=INFINITE State=UP " \
        "OverSubscribe=FORCE:8\n"


def logs(d):
    out = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".log"):
            with open(os.path.join(d, name), errors="replace") as f:
                out.append(f"--- {name}\n" + "".join(f.readlines()[-15:]))
    return "\n".join(out)


def _drain(env, nodes, procs, timeout):
    """Waits (bounded) until slurmctld has no job left: a step's slurmstepd
    ends once the controller took its completion, and outlives a controller
    stopped before that."""
    if not procs or any(p.poll() is not None for p in procs):
        return
    squeue = _in(nodes[0].netns, [_which("squeue"), "-h", "-o", "%i"])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = subprocess.run(squeue, env=env, capture_output=True, text=True, timeout=timeout)
        if r.returncode == 0 and not r.stdout.strip():
            return
        time.sleep(0.2)


def _kill_strays(conf):
    """Kills what is left of the bed's jobs: every process started with its
    SLURM_CONF (slurmstepd and tasks inherit it from slurmd)."""
    mark = f"SLURM_CONF={conf}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark in f.read().split(b"\0"):
                    os.kill(int(pid), 9)
        except (OSError, ValueError):
            pass


@contextlib.contextmanager
def slurm_cluster(tmp, nodes: List[Node], timeout=60):
    """Yields the environment (SLURM_CONF, in the bed's folder) for srun;
    stops every daemon after. The bed's folder is short, in /tmp (slurmd's
    socket paths under it must fit in 108 bytes), and removed at the end;
    `tmp` keeps a copy of its logs."""
    d = tempfile.mkdtemp(prefix="wslurm-", dir="/tmp")
    os.makedirs(os.path.join(d, "state"))
    key = os.path.join(d, "munge.key")
    with open(key, "wb") as f:
        f.write(os.urandom(1024))
    os.chmod(key, 0o400)
    ports = [free_port(), free_port()] if not nodes[0].netns else [6817, 6818]
    conf = os.path.join(d, "slurm.conf")
    with open(conf, "w") as f:
        f.write(_config(d, nodes, ports))
    env = dict(os.environ, SLURM_CONF=conf)
    hosts = os.path.join(d, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 localhost\n" + "".join(f"{n.addr} {n.name}\n" for n in nodes))
    procs = []
    log = open(os.path.join(d, "daemons.out"), "w")
    try:
        start = lambda cmd: procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=log,
                                                          stdin=subprocess.DEVNULL))
        start([_which("munged"), "-F", "--force", f"--socket={d}/munge.sock", f"--key-file={key}",
               f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log", f"--seed-file={d}/munge.seed"])
        deadline = time.monotonic() + timeout
        while not os.path.exists(f"{d}/munge.sock"):
            if time.monotonic() > deadline or procs[0].poll() is not None:
                raise RuntimeError("munged did not start:\n" + logs(d))
            time.sleep(0.05)
        start(_in(nodes[0].netns, [_which("slurmctld"), "-D", "-f", conf]))
        for n in nodes:
            slurmd = [_which("slurmd"), "-D", "-f", conf, "-N", n.name]
            start(_in(n.netns, _with_hosts(hosts, slurmd) if n.netns else slurmd))
        sinfo = _in(nodes[0].netns, [_which("sinfo"), "-h", "-N", "-o", "%N %T"])
        while True:
            r = subprocess.run(sinfo, env=env, capture_output=True, text=True, timeout=timeout)
            states = dict(line.split() for line in r.stdout.splitlines() if line.strip())
            if len(states) == len(nodes) and all(s == "idle" for s in states.values()):
                break
            dead = [p.args for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"the SLURM cluster did not come up (nodes: {states or r.stderr.strip()}; "
                                   f"exited: {dead}):\n{logs(d)}")
            time.sleep(0.2)
        yield env
    finally:
        _drain(env, nodes, procs, timeout=20)
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=15)
        _kill_strays(conf)
        log.close()
        keep = os.path.join(str(tmp), "slurm-logs")
        os.makedirs(keep, exist_ok=True)
        for name in os.listdir(d):
            if name.endswith((".log", ".out")):
                shutil.copy(os.path.join(d, name), keep)
        shutil.rmtree(d, ignore_errors=True)
