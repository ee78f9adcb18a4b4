"""weftrun in elastic mode (--min-np / --max-np / --host-discovery-script):
failures tolerated down to --min-np, the job's TCPStore that weftrun serves,
and workers started when the discovery script offers more slots. The workers
are small Python scripts (torch's TCPStore, no collectives); each one ends
by itself within a minute, and every test checks that none is left."""
import ast
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from weft.launch import hosts

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False
# weftrun serves the job's store (torch.distributed.TCPStore) in elastic mode.
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="elastic mode needs torch")

# What a worker reads of its environment, printed as one line.
_KEYS = ("WEFT_ELASTIC", "WEFT_ELASTIC_STORE", "WEFT_ELASTIC_MIN_NP", "WEFT_ELASTIC_MAX_NP",
         "WEFT_ELASTIC_WORKER", "WEFT_ELASTIC_JOIN", "WEFT_RANK", "RANK", "WORLD_SIZE")

_PRELUDE = f"""\
import os, sys, time
from datetime import timedelta
W = int(os.environ["WEFT_ELASTIC_WORKER"])
OUT = os.path.dirname(os.path.abspath(__file__))

def env_line(tag):
    print(tag, " ".join(k + "=" + os.environ.get(k, "-") for k in {_KEYS!r}), flush=True)

def store():
    from torch.distributed import TCPStore
    host, port = os.environ["WEFT_ELASTIC_STORE"].rsplit(":", 1)
    return TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=60))
"""


@pytest.fixture
def marker():
    """A word in every worker's command line: no process may keep it after a test."""
    m = f"weftrun-elastic-{os.getpid()}-{time.monotonic_ns()}"
    yield m
    for _ in range(100):
        left = subprocess.run(["pgrep", "-f", m], capture_output=True, text=True).stdout.split()
        if not left:
            return
        time.sleep(0.1)
    for pid in left:  # do not leave them to the next test, then fail
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    pytest.fail(f"processes left running: {left}")



# ---- discovery (no torch) ---------------------------------------------------

def test_discovery_output_is_horovods_format():
    assert hosts.parse_discovery("a:2\nb\n\n# c:9\nc:0\na:1\n") == [("a", 3), ("b", 1), ("c", 0)]
    for bad in ("a:x", ":2", "a:-1"):
        with pytest.raises(hosts.HostError):
            hosts.parse_discovery(bad)


def test_discovery_script_failures_and_its_time_bound(tmp_path, marker):
    assert hosts.run_discovery("printf 'h1:2\\nh2:1\\n'") == [("h1", 2), ("h2", 1)]
    with pytest.raises(hosts.HostError, match="exited with 3: oops"):
        hosts.run_discovery("echo oops >&2; exit 3")
    with pytest.raises(hosts.HostError, match="printed 'x:y' is not host:slots"):
        hosts.run_discovery("echo x:y")
    t0 = time.monotonic()
    with pytest.raises(hosts.HostError, match="ran past 1 s"):
        hosts.run_discovery(f"{sys.executable} -c 'import time; time.sleep(30)' {marker}; "
                            "echo late:1", timeout=1)
    assert time.monotonic() - t0 < 5  # and the marker fixture finds no sleep left


# ---- the job (torch's TCPStore) -----------------------------------------------

def _cmd(args):
    return [sys.executable, "-m", "weft.launch", *args]


def _env(**extra):
    return dict(os.environ, OMP_NUM_THREADS="1", **extra)


def weftrun(args, timeout=120):
    return subprocess.run(_cmd(args), capture_output=True, text=True, timeout=timeout, env=_env())


def job(tmp_path, body, name="job.py"):
    p = tmp_path / name
    p.write_text(_PRELUDE + textwrap.dedent(body))
    return str(p)


def fields(stdout, tag):
    """{worker: {var: value}} of the env_line(tag) lines."""
    out = {}
    for line in stdout.splitlines():
        body = line.split(":", 1)[1] if line.startswith("[") else line
        if body.startswith(tag + " "):
            kv = dict(f.split("=", 1) for f in body.split()[1:])
            out[int(kv["WEFT_ELASTIC_WORKER"])] = kv
    return out


@needs_torch
def test_a_failed_worker_is_tolerated_above_min_np(tmp_path, marker):
    w = job(tmp_path, """
        env_line("env")
        flag = os.path.join(OUT, "failing")
        if W == 1:
            open(flag, "w").close()
            sys.exit(1)
        deadline = time.monotonic() + 60  # still running when worker 1 fails
        while not os.path.exists(flag) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)
        print("finished", W, flush=True)
    """)
    r = weftrun(["-np", "3", "--min-np", "2", sys.executable, w, marker])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "weftrun: worker 1 (pid " in r.stderr and "exited with code 1; 2 alive" in r.stderr
    assert "1 worker(s) failed and were tolerated" in r.stderr
    assert sorted(l for l in r.stdout.splitlines() if "finished" in l) == \
        ["[0]<stdout>:finished 0", "[2]<stdout>:finished 2"]
    env = fields(r.stdout, "env")
    assert sorted(env) == [0, 1, 2]
    for n, kv in env.items():
        # The initial workers keep their usual rank variables.
        assert kv["WEFT_RANK"] == kv["RANK"] == str(n) and kv["WORLD_SIZE"] == "3"
        assert (kv["WEFT_ELASTIC"], kv["WEFT_ELASTIC_JOIN"]) == ("1", "0")
        # No discovery script: nothing joins, -np is the most there can be.
        assert (kv["WEFT_ELASTIC_MIN_NP"], kv["WEFT_ELASTIC_MAX_NP"]) == ("2", "3")
    assert "joins" not in r.stderr  # no respawn without discovery


@needs_torch
def test_below_min_np_the_job_is_stopped(tmp_path, marker):
    w = job(tmp_path, """
        import signal
        if W == 2:
            time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)
        print("not stopped", W, flush=True)
    """)
    t0 = time.monotonic()
    r = weftrun(["-np", "3", "--min-np", "3", sys.executable, w, marker])
    took = time.monotonic() - t0
    assert r.returncode == 128 + signal.SIGKILL, r.stdout + r.stderr
    assert "worker 2 (pid " in r.stderr and "exited with signal SIGKILL; 2 alive" in r.stderr
    assert "fewer than --min-np 3" in r.stderr
    assert "stopped the job: fewer than --min-np 3 workers left after worker 2 failed" in r.stderr
    assert "not stopped" not in r.stdout
    assert took < 40, f"the other workers were not stopped ({took:.0f} s)"


@needs_torch
def test_the_initial_workers_share_weftruns_store(tmp_path, marker):
    w = job(tmp_path, """
        env_line("env")
        s = store()
        s.set(f"worker{W}", str(os.getpid()))
        s.add("arrived", 1)
        deadline = time.monotonic() + 60
        while int(s.add("arrived", 0)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        print("saw", sorted(s.get(f"worker{n}").decode() for n in range(3)), flush=True)
    """)
    r = weftrun(["-np", "3", "--max-np", "4", sys.executable, w, marker])
    assert r.returncode == 0, r.stdout + r.stderr
    env = fields(r.stdout, "env")
    assert sorted(env) == [0, 1, 2]
    stores = {kv["WEFT_ELASTIC_STORE"] for kv in env.values()}
    assert len(stores) == 1 and stores.pop().startswith("127.0.0.1:")
    for kv in env.values():
        assert (kv["WEFT_ELASTIC_MIN_NP"], kv["WEFT_ELASTIC_MAX_NP"]) == ("3", "4")
    saw = {l.split(":", 1)[1] for l in r.stdout.splitlines() if "saw" in l}
    assert len(saw) == 1 and r.stdout.count("saw [") == 3, r.stdout
    pids = ast.literal_eval(saw.pop()[4:])  # the three workers' pids, set by each through the store
    assert len(set(pids)) == 3 and all(p.isdigit() for p in pids)


def _discovery(tmp_path, slots):
    (tmp_path / "slots").write_text(slots)
    d = tmp_path / "discover.sh"
    d.write_text(f"#!/bin/sh\nif [ -e {tmp_path}/broken ]; then echo broken >&2; exit 3; fi\n"
                 f"cat {tmp_path}/slots\n")
    d.chmod(0o755)
    return str(d)


def _wait_for(paths, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert proc.poll() is None, "weftrun ended early: " + "".join(proc.communicate())
        assert time.monotonic() < deadline, f"not all of {paths} appeared"
        time.sleep(0.05)


def _stop(proc):
    if proc.poll() is None:  # a failed check: weftrun stops its workers on SIGTERM
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


@needs_torch
def test_discovered_slots_start_a_joiner_that_reaches_the_store(tmp_path, marker):
    disc = _discovery(tmp_path, "localhost:2\n")
    w = job(tmp_path, """
        env_line("env")
        open(os.path.join(OUT, f"up.{W}"), "w").close()
        s = store()
        if os.environ["WEFT_ELASTIC_JOIN"] == "1":
            s.set("joined", str(W))
            print("joiner got", s.get("hello").decode(), flush=True)
            sys.exit(0)
        if W == 0:
            s.set("hello", "from-0")
        open(os.path.join(OUT, f"ready.{W}"), "w").close()
        s.wait(["joined"], timedelta(seconds=60))
        print("saw joiner", s.get("joined").decode(), flush=True)
    """)
    p = subprocess.Popen(_cmd(["-np", "2", "--max-np", "3", "--host-discovery-script", disc,
                               "--discovery-interval", "0.2", sys.executable, w, marker]),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         # weftrun's own rank variables (say, it runs under another
                         # launcher) must not reach a joiner either.
                         env=_env(RANK="99", WEFT_RANK="99", WORLD_SIZE="99"))
    try:
        _wait_for([tmp_path / "ready.0", tmp_path / "ready.1"], p)
        time.sleep(1)  # discovery keeps saying 2 slots: nobody joins
        assert not (tmp_path / "up.2").exists() and p.poll() is None
        (tmp_path / "slots").write_text("localhost:3\n")
        out, err = p.communicate(timeout=90)
    finally:
        _stop(p)
    assert p.returncode == 0, out + err
    assert "discovered localhost:3" in err
    assert "worker 2 (pid " in err and "joins on localhost" in err, err
    env = fields(out, "env")
    assert sorted(env) == [0, 1, 2], out
    j = env[2]
    assert j["WEFT_ELASTIC_JOIN"] == "1" and j["WEFT_ELASTIC"] == "1"
    # A joiner has no rank of its own until the library registers it.
    assert j["WEFT_RANK"] == j["RANK"] == j["WORLD_SIZE"] == "-"
    assert j["WEFT_ELASTIC_STORE"] == env[0]["WEFT_ELASTIC_STORE"] == env[1]["WEFT_ELASTIC_STORE"]
    assert j["WEFT_ELASTIC_MAX_NP"] == "3"
    assert "[2]<stdout>:joiner got from-0" in out
    assert out.count("saw joiner 2") == 2


@needs_torch
def test_discovery_respawns_up_to_max_np_and_survives_a_broken_script(tmp_path, marker):
    # 4 slots offered, --max-np 3: one joiner at once; worker 0 then fails,
    # and only the next discovery answer starts a new worker in its place.
    disc = _discovery(tmp_path, "localhost:4\nlocalhost:0\n# comment\n")
    w = job(tmp_path, """
        env_line("env")
        open(os.path.join(OUT, f"up.{W}"), "w").close()
        if W == 0:
            time.sleep(1)
            sys.exit(7)
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(OUT, "end")) and time.monotonic() < deadline:
            time.sleep(0.05)
    """)
    p = subprocess.Popen(_cmd(["-np", "2", "--min-np", "1", "--max-np", "3",
                               "--host-discovery-script", disc, "--discovery-interval", "0.3",
                               sys.executable, w, marker]),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        _wait_for([tmp_path / f"up.{n}" for n in (0, 1, 2, 3)], p)
        (tmp_path / "broken").touch()  # a failing script is logged and ignored
        time.sleep(1.5)
        (tmp_path / "end").touch()
        out, err = p.communicate(timeout=90)
    finally:
        _stop(p)
    assert p.returncode == 0, out + err
    assert "worker 0 (pid " in err and "exited with code 7" in err
    assert "exited with 3: broken; ignored" in err
    env = fields(out, "env")
    # 0, 1 at start; 2 joins (3 alive = --max-np); 3 replaces 0; no more.
    assert sorted(env) == [0, 1, 2, 3], out + err
    assert [env[n]["WEFT_ELASTIC_JOIN"] for n in (0, 1, 2, 3)] == ["0", "0", "1", "1"]
    assert err.count(" joins on localhost") == 2, err


def test_elastic_flags_are_checked_before_anything_starts(tmp_path):
    for args, msg in ((["-np", "2", "--min-np", "3"], "--min-np 3 must be between 1 and -np 2"),
                      (["-np", "3", "--max-np", "2"], "--max-np 2 is less than -np 3"),
                      (["-np", "2", "-H", "localhost:2", "--host-discovery-script", "true"],
                       "no -H / --hostfile with it"),
                      (["-np", "2", "--min-np", "1", "--elastic-timeout", "0"],
                       "must be positive")):
        r = weftrun([*args, sys.executable, "-c", "print('ran')"], timeout=60)
        assert r.returncode == 2 and msg in r.stderr and "ran" not in r.stdout, r.stderr
