"""weft.torch under SLURM's srun, the real one: the test starts a SLURM
cluster of its own (slurm_bed.py: munged, slurmctld, slurmd) and runs jobs
with srun, which sets nothing but its SLURM_* variables. One node: the
Horovod example, the ranks' places, and an sbatch script that runs python
without srun (one process, with a warning). Two nodes: two network namespaces
joined by a veth pair (test-only addresses 10.214.N.1-2 that exist only
inside them) each run a slurmd, and `srun -N 2 -n 4` puts two ranks on
each; they meet at the step's first node with no MASTER_ADDR set. Needs
root and SLURM (apt-get install slurmd slurmctld slurm-client munge);
skips, saying which is missing, otherwise."""
import os
import subprocess
import sys
import time

import pytest

import slurm_bed
from netns_pair import netns_pair
from slurm_bed import Node, slurm_cluster, srun_cmd

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_WHY = slurm_bed.missing()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")

JOB = """\
import os, torch
import weft.torch as hvd
hvd.init()
n = hvd.size()
t = hvd.allreduce(torch.arange(1000, dtype=torch.float32) * (hvd.rank() + 1), op=hvd.Sum)
ok = torch.equal(t, torch.arange(1000, dtype=torch.float32) * (n * (n + 1) // 2))
print("rank", hvd.rank(), "size", n, "local", hvd.local_rank(), hvd.local_size(),
      "cross", hvd.cross_rank(), hvd.cross_size(), "netns", os.stat("/proc/self/ns/net").st_ino,
      "ok" if ok else "WRONG", flush=True)
hvd.shutdown()
"""


def clean_env(env):
    """The environment srun passes on: no rendezvous or launcher of ours."""
    env = dict(env, OMP_NUM_THREADS="1", WEFT_TIMEOUT_S="60", WEFT_TORCH_TIMEOUT_S="120")
    for k in list(env):
        if k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "WEFT_ROOT_ADDR") or \
                k.startswith(("WEFT_RANK", "WEFT_NRANKS", "OMPI_", "PMI_", "SLURM_JOB", "SLURM_STEP")):
            env.pop(k)
    return env


def places(out):
    """rank -> (size, local rank, local size, cross rank, cross size, netns inode), from JOB's lines."""
    got = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 13 and f[0] == "rank":
            assert f[12] == "ok", line
            got[int(f[1])] = (int(f[3]), int(f[5]), int(f[6]), int(f[8]), int(f[9]), int(f[11]))
    return got


def test_horovod_example_under_srun(tmp_path):
    """The Horovod example, started as a SLURM user starts it: srun -n 2."""
    nodes = [Node("weftnode")]
    with slurm_cluster(tmp_path, nodes) as env:
        r = subprocess.run(srun_cmd(nodes, "-n", "2", "-O", sys.executable,
                                    os.path.join(ROOT, "examples", "horovod_train.py"), "--steps", "10"),
                           env=clean_env(env), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 ranks, 10 steps" in r.stdout and "identical on every rank" in r.stdout, r.stdout


def test_places_of_three_ranks_on_one_node(tmp_path):
    nodes = [Node("weftnode")]
    job = tmp_path / "job.py"
    job.write_text(JOB)
    with slurm_cluster(tmp_path, nodes) as env:
        r = subprocess.run(srun_cmd(nodes, "-n", "3", "-O", sys.executable, str(job)),
                           env=clean_env(env), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    got = places(r.stdout)
    assert sorted(got) == [0, 1, 2], r.stdout + r.stderr
    for rank, (size, lr, ls, cr, cs, _) in got.items():
        assert (size, lr, ls, cr, cs) == (3, rank, 3, 0, 1), (rank, got[rank])


def test_sbatch_script_without_srun_runs_one_process_and_says_so(tmp_path):
    """An sbatch script that runs python itself (no srun): SLURM_PROCID=0 and
    SLURM_NTASKS=2 are set, yet only one process runs. hvd.init() runs it as
    one process at once, warning, instead of waiting for a rank that never
    comes."""
    nodes = [Node("weftnode")]
    job = tmp_path / "job.py"
    job.write_text(JOB)
    batch = tmp_path / "batch.sh"
    batch.write_text(f"#!/bin/sh\nexec {sys.executable} {job}\n")
    batch.chmod(0o755)
    out = tmp_path / "batch.out"
    with slurm_cluster(tmp_path, nodes) as env:
        env = clean_env(env)
        r = subprocess.run(["sbatch", "--parsable", "-n", "2", "-O", "-o", str(out), str(batch)],
                           env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        job_id = r.stdout.strip().split(";")[0]
        deadline = time.monotonic() + 120
        while True:  # until the job has left the queue
            q = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T %r"], env=env, capture_output=True,
                               text=True, timeout=60)
            if q.returncode == 0 and not q.stdout.strip():
                break
            if time.monotonic() > deadline:
                pytest.fail(f"job {job_id} still queued: {q.stdout} {q.stderr}\n"
                            + slurm_bed.logs(os.path.dirname(env["SLURM_CONF"])))
            time.sleep(0.5)
        state = subprocess.run(["scontrol", "show", "job", job_id], env=env, capture_output=True, text=True,
                               timeout=60).stdout
    text = out.read_text() if out.exists() else ""
    assert "JobState=COMPLETED" in state, state + text
    assert "SLURM_NTASKS=2 but this process was not started by srun" in text, text
    got = places(text)
    assert list(got) == [0] and got[0][:5] == (1, 0, 1, 0, 1), text


@pytest.fixture
def two_namespaces():
    with netns_pair("wsl") as (spaces, addrs):
        yield [Node(f"{space}-n", space, addr) for space, addr in zip(spaces, addrs)]


def test_four_ranks_on_two_nodes_meet_without_master_addr(two_namespaces, tmp_path):
    nodes = two_namespaces
    job = tmp_path / "job.py"
    job.write_text(JOB)
    with slurm_cluster(tmp_path, nodes) as env:
        r = subprocess.run(srun_cmd(nodes, "-N", "2", "-n", "4", "-O", sys.executable, str(job)),
                           env=clean_env(env), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    got = places(r.stdout)
    assert sorted(got) == [0, 1, 2, 3], r.stdout + r.stderr
    inodes = [os.stat(f"/var/run/netns/{n.netns}").st_ino for n in nodes]
    for rank, (size, lr, ls, cr, cs, inode) in got.items():
        node = rank // 2  # srun's block distribution: ranks 0-1 on the first node
        assert (size, lr, ls, cr, cs) == (4, rank % 2, 2, node, 2), (rank, got[rank])
        assert inode == inodes[node], f"rank {rank} ran in the wrong namespace"


def test_rank_zero_off_the_first_node_says_what_to_set(two_namespaces, tmp_path):
    """With the placement given by hand (rank 0 on the second node), the ranks
    cannot guess where rank 0 is: they say what to set instead of waiting."""
    nodes = two_namespaces
    job = tmp_path / "job.py"
    job.write_text(JOB)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("\n".join([nodes[1].name, nodes[0].name]) + "\n")
    with slurm_cluster(tmp_path, nodes) as env:
        env = dict(clean_env(env), SLURM_HOSTFILE=str(hostfile))
        r = subprocess.run(srun_cmd(nodes, "-N", "2", "-n", "2", "-O", "--distribution=arbitrary",
                                    sys.executable, str(job)),
                           env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0, r.stdout
    assert r.stderr.count("Set MASTER_ADDR and MASTER_PORT") == 2, r.stderr
