"""weft.torch.elastic (issue 28; docs/elastic.md) with real processes running
examples/elastic_train.py: a worker killed (SIGKILL) or stopped (SIGSTOP) in
the middle of training; the survivors, the same processes, shrink, restore
the last commit and finish with identical parameters; a stopped worker that
wakes up fails cleanly, told it was left out."""
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "elastic_train.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(n, out, extra_env, steps=40):
    port = free_port()
    procs = []
    for rank in range(n):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   WEFT_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", **extra_env)
        log = open(os.path.join(out, f"rank{rank}.log"), "w")
        procs.append(subprocess.Popen([sys.executable, EXAMPLE, "--steps", str(steps), "--out", out],
                                      stdout=log, stderr=subprocess.STDOUT, env=env))
    return procs


def wait_for(path, text, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with open(path) as f:
            if text in f.read():
                return
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not in {path} within {timeout} s")


def logs(out):
    return "\n".join(f"== {p}\n" + open(p).read()[-3000:] for p in sorted(glob.glob(os.path.join(out, "*.log"))))


def finish(procs, timeout=150):
    end = time.monotonic() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1, end - time.monotonic())))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append("hung")
    return codes


def results(out):
    return [json.load(open(p)) for p in glob.glob(os.path.join(out, "*.json"))]


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_a_killed_worker_the_survivors_go_on_in_the_same_processes(tmp_path, transport):
    out = str(tmp_path)
    procs = start(4, out, {"WEFT_TRANSPORTS": transport, "WEFT_TORCH_TIMEOUT_S": "60",
                           "WEFT_SHRINK_TIMEOUT_S": "10"})
    victim = procs[2]
    try:
        wait_for(os.path.join(out, "rank0.log"), "batch 12 ")
        victim.send_signal(signal.SIGKILL)
        codes = finish([p for p in procs if p is not victim])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert codes == [0, 0, 0], logs(out)
    res = results(out)
    assert len(res) == 3, logs(out)
    survivors = {p.pid for p in procs if p is not victim}
    assert {r["pid"] for r in res} == survivors  # the same processes went on
    assert sorted(r["rank"] for r in res) == [0, 1, 2] and {r["size"] for r in res} == {3}
    assert {r["batches"] for r in res} == {40}
    assert len({r["params"] for r in res}) == 1, res  # every rank ends with the same parameters
    for r in res:
        assert len(r["recoveries"]) == 1, r
        seconds, old, new = r["recoveries"][0]
        assert (old, new) == (4, 3) and seconds < 30, r
    assert "recovered: 4 -> 3 ranks" in open(os.path.join(out, "rank0.log")).read()


def test_a_stopped_worker_is_left_out_and_fails_cleanly_when_woken(tmp_path):
    out = str(tmp_path)
    procs = start(4, out, {"WEFT_TORCH_TIMEOUT_S": "4", "WEFT_SHRINK_TIMEOUT_S": "4"})
    victim = procs[2]
    try:
        wait_for(os.path.join(out, "rank0.log"), "batch 12 ")
        victim.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        codes = finish([p for p in procs if p is not victim])
        took = time.monotonic() - t0
        victim.send_signal(signal.SIGCONT)
        victim_code = finish([victim], timeout=60)[0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert codes == [0, 0, 0], logs(out)
    res = results(out)
    assert len(res) == 3 and len({r["params"] for r in res}) == 1, logs(out)
    assert all(r["size"] == 3 and r["batches"] == 40 for r in res), res
    assert took < 60, took
    # Woken: it does not go on as if nothing happened; it learns it was left out.
    assert victim_code not in (0, "hung"), logs(out)
    assert "left this rank out" in open(os.path.join(out, "rank2.log")).read(), logs(out)
