"""weftrun: rank placement, the environment each rank gets, output, failure
handling, the timeline and --check-build, with real processes (torch on the
weft backend, and the C API's weft_comm_init_env through ctypes)."""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from weft.launch import hosts


def weftrun(args, timeout=120, **kw):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.update(kw.pop("env", {}))
    return subprocess.run([sys.executable, "-m", "weft.launch", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, **kw)


def script(tmp_path, body, name="job.py"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return str(p)


# ---- placement (pure) -------------------------------------------------------

def test_hosts_fill_in_order_with_local_and_cross_ranks():
    slots = hosts.assign(5, hosts.parse_hosts("a:2,b:4"))
    got = [(s.rank, s.host, s.local_rank, s.local_size, s.cross_rank, s.cross_size) for s in slots]
    assert got == [(0, "a", 0, 2, 0, 2), (1, "a", 1, 2, 0, 2), (2, "b", 0, 3, 1, 2),
                   (3, "b", 1, 3, 1, 2), (4, "b", 2, 3, 0, 1)]


def test_hostfile_and_bad_specs(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("# two nodes\nnode1 slots=2\nnode2:3\nnode1\n")
    assert hosts.parse_hostfile(str(f)) == [("node1", 3), ("node2", 3)]
    for bad in ("a:0", "a:x", ":3", ""):
        with pytest.raises(hosts.HostError):
            hosts.parse_hosts(bad)
    with pytest.raises(hosts.HostError, match="more than the 2 slots"):
        hosts.assign(3, [("a", 2)])


def test_too_many_ranks_is_refused_before_starting_any():
    r = weftrun(["-np", "3", "-H", "localhost:2", sys.executable, "-c", "print('ran')"])
    assert r.returncode == 2 and "more than the 2 slots" in r.stderr and "ran" not in r.stdout


# ---- the job -----------------------------------------------------------------

def test_ranks_get_their_environment_and_prefixed_output(tmp_path):
    job = script(tmp_path, """
        import os
        keys = ["WEFT_RANK", "WEFT_NRANKS", "WEFT_LOCAL_RANK", "WEFT_LOCAL_SIZE",
                "WEFT_CROSS_RANK", "WEFT_CROSS_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                "MASTER_ADDR", "WEFT_JOB_SECRET", "WEFT_FUSION_THRESHOLD"]
        print(" ".join(k + "=" + os.environ.get(k, "-") for k in keys))
    """)
    r = weftrun(["-np", "3", "--fusion-threshold-mb", "2", sys.executable, job])
    assert r.returncode == 0, r.stderr
    lines = sorted(l for l in r.stdout.splitlines() if l.startswith("["))
    assert len(lines) == 3
    secrets = set()
    for rank, line in enumerate(lines):
        assert line.startswith(f"[{rank}]<stdout>:")
        kv = dict(f.split("=", 1) for f in line.split(":", 1)[1].split())
        assert kv["WEFT_RANK"] == kv["RANK"] == kv["WEFT_LOCAL_RANK"] == str(rank)
        assert kv["WEFT_NRANKS"] == kv["WORLD_SIZE"] == kv["WEFT_LOCAL_SIZE"] == "3"
        assert (kv["WEFT_CROSS_RANK"], kv["WEFT_CROSS_SIZE"]) == ("0", "1")
        assert kv["MASTER_ADDR"] == "127.0.0.1"
        assert kv["WEFT_FUSION_THRESHOLD"] == str(2 << 20)
        secrets.add(kv["WEFT_JOB_SECRET"])
    assert len(secrets) == 1 and secrets != {"-"}


def test_torch_job_on_weft_and_timeline(tmp_path):
    job = script(tmp_path, """
        import torch, torch.distributed as dist
        import weft.torch  # noqa: F401
        dist.init_process_group("weft")  # env:// from weftrun's variables
        t = torch.full((1000,), float(dist.get_rank() + 1))
        for _ in range(3):
            dist.all_reduce(t)
        print("sum", int(t[0].item()))
        dist.destroy_process_group()
    """)
    tl = tmp_path / "timeline.json"
    r = weftrun(["-np", "3", "--timeline-filename", str(tl), sys.executable, job])
    assert r.returncode == 0, r.stdout + r.stderr
    # 1+2+3 = 6, three times in place: 6 * 3 * 3 = 54
    assert sorted(l.split(":", 1)[1] for l in r.stdout.splitlines() if "sum" in l) == ["sum 54"] * 3
    events = json.loads(tl.read_text())["traceEvents"]
    pids = {e["pid"] for e in events if e.get("name", "").startswith("allreduce")}
    assert len(pids) == 3, f"allreduce slices from {len(pids)} ranks, not 3"
    for rank in range(3):
        assert (tmp_path / f"timeline.rank{rank}.json").exists()


def test_c_api_joins_through_weftrun_environment(tmp_path):
    # weft_comm_init_env reads WEFT_RANK / WEFT_NRANKS / WEFT_ROOT_ADDR and the
    # job secret weftrun drew.
    job = script(tmp_path, """
        import ctypes, weft.launch.check_build as cb
        lib = cb._libweft()
        comm = ctypes.c_void_p()
        assert lib.weft_comm_init_env(ctypes.byref(comm)) == 0, lib.weft_get_last_error(None)
        buf = (ctypes.c_int32 * 4)(*([1] * 4))
        WEFT_INT32, WEFT_SUM = 2, 0
        rc = lib.weft_allreduce(buf, buf, 4, WEFT_INT32, WEFT_SUM, comm, None)
        assert rc == 0
        print("c-sum", list(buf))
        lib.weft_comm_destroy(comm)
    """)
    r = weftrun(["-np", "2", sys.executable, job])
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("c-sum [2, 2, 2, 2]") == 2


def test_a_failing_rank_stops_the_job_and_is_named(tmp_path):
    job = script(tmp_path, """
        import os, sys, time
        if os.environ["RANK"] == "2":
            time.sleep(0.5)
            sys.exit(5)
        time.sleep(120)
    """)
    t0 = time.monotonic()
    r = weftrun(["-np", "4", sys.executable, job])
    took = time.monotonic() - t0
    assert r.returncode == 5
    assert "rank 2 (on localhost) exited with code 5" in r.stderr
    assert took < 60, f"the other ranks were not stopped ({took:.0f} s)"


def test_output_filename_keeps_each_ranks_streams(tmp_path):
    out = tmp_path / "logs"
    r = weftrun(["-np", "2", "--output-filename", str(out), sys.executable, "-c",
                 "import os, sys; print('out', os.environ['RANK']); "
                 "print('err', os.environ['RANK'], file=sys.stderr)"])
    assert r.returncode == 0
    for rank in (0, 1):
        assert (out / f"rank.{rank}" / "stdout").read_text() == f"out {rank}\n"
        assert (out / f"rank.{rank}" / "stderr").read_text() == f"err {rank}\n"


def test_check_build_lists_what_this_weft_has():
    r = weftrun(["--check-build"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("weft v")
    for t in ("self", "shm", "tcp"):
        assert f"[X] {t}" in r.stdout
    assert "[X] PyTorch" in r.stdout
