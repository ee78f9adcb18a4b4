#!/usr/bin/env python3
"""End-to-end telemetry tests: run weft-train-sim (4 ranks as processes, a
training-like loop) with a fault, then check what the telemetry files say and
what weft-report concludes.

  test_report.py CASE SIM REPORT

CASE: straggler | network | input | stall | mismatch | timeline_kill |
timeline_merge. Exit 0 on success, 1 on failure (with the evidence).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

CASE, SIM, REPORT = sys.argv[1], sys.argv[2], sys.argv[3]
TMP = tempfile.mkdtemp(prefix="weft-telemetry-%s-" % CASE)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run_sim(args, env=None, expect_ok=True, timeout=240):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([SIM] + args, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout, universal_newlines=True)
    print("$ %s %s\n%s" % (" ".join("%s=%s" % kv for kv in (env or {}).items()),
                          " ".join([SIM] + args), p.stdout[-6000:]))
    if expect_ok and p.returncode != 0:
        fail("weft-train-sim exited %d" % p.returncode)
    return p


def report(*args):
    p = subprocess.run([sys.executable, REPORT] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
    print("$ weft-report %s\n%s" % (" ".join(args), p.stdout))
    if p.returncode != 0:
        fail("weft-report exited %d" % p.returncode)
    return p.stdout


def verdict(stats_dir):
    report(stats_dir)  # the text form, for the log
    d = json.loads(report("--json", stats_dir))
    comm = d["communicators"][0]
    if comm["ranks_missing"]:
        fail("ranks missing from the stats: %s" % comm["ranks_missing"])
    return comm["verdict"], comm


def stats_env():
    return {"WEFT_STATS": os.path.join(TMP, "stats-%r.json")}


def case_straggler():
    # Rank 2 computes 25 ms longer than the others each step: on the shm
    # arena (stamps in the flag line), over shm FIFOs with a ring (stamps in
    # slot headers, passed on hop by hop) and over tcp (part headers).
    variants = [{}, {"WEFT_SHM_ARENA_CHUNK": "0", "WEFT_ALGO": "ring"},
                {"WEFT_TRANSPORTS": "tcp", "WEFT_SOCKET_IFNAME": "lo"}]
    if os.environ.get("WEFT_TEST_HAVE_UCX") == "1":  # stamps in ucx's message header
        variants.append({"WEFT_TRANSPORTS": "ucx", "UCX_TLS": "tcp", "WEFT_ALGO": "ring"})
    for extra in variants:
        for f in os.listdir(TMP):
            os.remove(os.path.join(TMP, f))
        run_sim(["--ranks", "4", "--steps", "20", "--compute-ms", "2", "--bytes", "256K",
                 "--slow-rank", "2", "--slow-ms", "25"], dict(stats_env(), **extra))
        v, comm = verdict(TMP)
        if v["kind"] != "straggler-bound" or v["ranks"] != [2]:
            fail("%s: expected straggler-bound naming rank 2, got %s %s" % (extra, v["kind"],
                                                                          v["ranks"]))
        top = comm["waited_for"][0]
        if top["rank"] != 2 or sorted(top["waited_by"]) != [0, 1, 3]:
            fail("%s: rank 2 should be the one ranks 0, 1, 3 waited for: %s" % (
                extra, comm["waited_for"]))
        # 19 or 20 steps of ~25 ms, for each of 3 ranks: far more than 0.9 s.
        if top["cost_ms"] < 3 * 15 * 20:
            fail("%s: waiting for rank 2 cost only %.1f ms" % (extra, top["cost_ms"]))


def case_network():
    # Every rank's sends are throttled to 100 MB/s; compute is 1 ms a step.
    env = stats_env()
    env["WEFT_TEST_THROTTLE_MBPS"] = "100"
    run_sim(["--ranks", "4", "--steps", "8", "--compute-ms", "1", "--bytes", "2M"], env)
    v, comm = verdict(TMP)
    if v["kind"] != "network-bound":
        fail("expected network-bound, got %s: %s" % (v["kind"], v["evidence"]))
    if abs(comm["link_GBs"] - 0.1) > 1e-6:
        fail("the links should be reported at the throttle, 0.1 GB/s: %s" % comm["link_GBs"])


def case_input():
    # Every rank computes 25 ms per step; the allreduce is small.
    run_sim(["--ranks", "4", "--steps", "16", "--compute-ms", "25", "--bytes", "64K"],
            stats_env())
    v, _ = verdict(TMP)
    if v["kind"] != "input/compute-bound":
        fail("expected input/compute-bound, got %s: %s" % (v["kind"], v["evidence"]))


def case_stall():
    # Rank 3 stops calling half way; the others must say so after 1 s, then
    # time out naming it, and dump their flight recorders.
    env = {"WEFT_STALL_WARN_S": "1", "WEFT_TIMEOUT_S": "4", "WEFT_FLIGHT_RECORDER": "4"}
    p = run_sim(["--ranks", "4", "--steps", "6", "--compute-ms", "1", "--bytes", "4K",
                 "--stall-rank", "3", "--stall-s", "7"], env, expect_ok=False)
    out = p.stdout
    for r in (0, 1, 2):
        stall = [l for l in out.splitlines()
                 if ("rank %d: allreduce #4" % r) in l and "WEFT_STALL_WARN_S" in l]
        if not stall:
            fail("rank %d printed no stall report for allreduce #4" % r)
        if "rank 3" not in stall[0] or "has not entered it" not in stall[0]:
            fail("rank %d's stall report does not name rank 3: %s" % (r, stall[0]))
        if "allreduce #3" not in stall[0]:
            fail("rank %d's stall report does not say what rank 3 did last: %s" % (r, stall[0]))
        timeout = [l for l in out.splitlines() if l.startswith("rank %d: step 3: timed out" % r)]
        if not timeout or "rank 3" not in timeout[0]:
            fail("rank %d did not time out naming rank 3" % r)
        if ("rank %d flight recorder" % r) not in out:
            fail("rank %d dumped no flight recorder" % r)


def case_mismatch():
    # Rank 1 calls an int32 max where the others call a float32 sum of the
    # same size. On the shm arena every rank compares every rank's call, so
    # all 4 fail with invalid usage naming both calls. Over messages (tcp,
    # and ucx where built) the ranks that exchange data with rank 1 see the
    # mismatch (rank 1 itself and at least one partner); the others fail at
    # once too, naming the peer that left, never hanging.
    envs = [{}, {"WEFT_TRANSPORTS": "tcp", "WEFT_SOCKET_IFNAME": "lo"}]
    if os.environ.get("WEFT_TEST_HAVE_UCX") == "1":
        envs.append({"WEFT_TRANSPORTS": "ucx", "UCX_TLS": "tcp"})
    for env in envs:
        env = dict(env, WEFT_TIMEOUT_S="5")
        arena = "WEFT_TRANSPORTS" not in env
        p = run_sim(["--ranks", "4", "--steps", "3", "--compute-ms", "1", "--bytes", "4K",
                     "--mismatch-rank", "1"], env, expect_ok=False)
        lines = [l for l in p.stdout.splitlines() if l.startswith("rank ") and "step 0" in l]
        if len(lines) != 4:
            fail("expected an error from each of the 4 ranks at step 0, got %d" % len(lines))
        seen = []
        for l in lines:
            if "invalid usage" in l and "mismatched collectives" in l:
                if "rank 1" not in l or "int32" not in l or "float" not in l:
                    fail("does not name rank 1's int32 call and the float one: " + l)
                seen.append(int(l.split()[1].rstrip(":")))
            elif arena:
                fail("not an invalid-usage mismatch: " + l)
            elif "remote peer failed" not in l or not re.search(r"rank \d", l.split(":", 1)[1]):
                fail("neither the mismatch nor a peer named: " + l)
        if not arena and (1 not in seen or len(seen) < 2):
            fail("rank 1 and a partner must report the mismatch, got ranks %s" % seen)

def case_interval():
    # WEFT_STATS_INTERVAL_S: a rank killed mid-run (it never reaches
    # destroy) still leaves the stats it wrote on the way, and weft-report
    # reads the run with it.
    env = stats_env()
    env.update({"WEFT_STATS_INTERVAL_S": "0.1", "WEFT_TIMEOUT_S": "5"})
    run_sim(["--ranks", "4", "--steps", "30", "--compute-ms", "20", "--bytes", "16K",
             "--kill-rank", "1", "--kill-step", "20"], env, expect_ok=False)
    path = os.path.join(TMP, "stats-1.json")
    if not os.path.exists(path):
        fail("the killed rank left no stats file")
    with open(path) as f:
        d = json.load(f)
    if not 5 <= d["ops"] < 21:
        fail("the killed rank's stats should hold some of its 20 ops: %d" % d["ops"])
    if os.path.exists(path + ".tmp"):
        fail("a temporary stats file was left behind")
    _, comm = verdict(TMP)
    if comm["ranks_missing"]:
        fail("missing ranks %s" % comm["ranks_missing"])


def case_png():
    # The per-rank stacked bars: a PNG file, when matplotlib is there.
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("SKIP: python3 matplotlib is not installed")
        sys.exit(77)
    run_sim(["--ranks", "4", "--steps", "6", "--compute-ms", "2", "--bytes", "64K",
             "--slow-rank", "1", "--slow-ms", "10"], stats_env())
    png = os.path.join(TMP, "bars.png")
    report("--png", png, TMP)
    with open(png, "rb") as f:
        head = f.read(8)
    if head != b"\x89PNG\r\n\x1a\n" or os.path.getsize(png) < 2000:
        fail("not a PNG image: %r" % head)


def load_trace(path):
    with open(path) as f:
        d = json.load(f)  # must be valid JSON, whatever happened to the process
    return d["traceEvents"]


def case_timeline_kill():
    # Rank 1 is killed (SIGKILL) at step 25 of 40 (30 ms each): its timeline
    # must still be valid JSON with the ops it flushed before.
    env = {"WEFT_TIMELINE": os.path.join(TMP, "tl-%r.json"), "WEFT_TIMEOUT_S": "5"}
    run_sim(["--ranks", "4", "--steps", "40", "--compute-ms", "30", "--bytes", "16K",
             "--kill-rank", "1", "--kill-step", "25"], env, expect_ok=False)
    for r in range(4):
        evs = load_trace(os.path.join(TMP, "tl-%d.json" % r))
        ops = [e for e in evs if e.get("name", "").startswith("allreduce #")]
        if not ops:
            fail("rank %d's timeline has no allreduce" % r)
        if r == 1 and len(ops) >= 25:
            fail("rank 1 was killed at step 25 but its timeline has %d ops" % len(ops))
        print("rank %d: %d events, %d allreduces, valid JSON" % (r, len(evs), len(ops)))


def case_timeline_merge():
    # A straggler run: merged, the timelines show rank 2 as the last arrival
    # in the WAIT_FOR_PEERS slices of the other ranks.
    env = {"WEFT_TIMELINE": os.path.join(TMP, "tl-%r.json")}
    run_sim(["--ranks", "4", "--steps", "10", "--compute-ms", "1", "--bytes", "256K",
             "--slow-rank", "2", "--slow-ms", "20"], env)
    merged = os.path.join(TMP, "merged.json")
    report("--timeline", "-o", merged, *[os.path.join(TMP, "tl-%d.json" % r) for r in range(4)])
    evs = load_trace(merged)
    pids = {e["pid"] for e in evs if e.get("ph") == "X"}
    if pids != {0, 1, 2, 3}:
        fail("merged timeline has tracks for ranks %s" % sorted(pids))
    for name in ("WAIT_FOR_PEERS", "TRANSFER"):
        if not any(e.get("name") == name for e in evs):
            fail("no %s slice" % name)
    waits = [e for e in evs if e.get("name") == "WAIT_FOR_PEERS" and e["pid"] != 2
             and e["dur"] > 10000]
    if len(waits) < 3 * 8:
        fail("expected long WAIT_FOR_PEERS slices on ranks 0, 1, 3; got %d" % len(waits))
    if any(e["args"]["last_rank"] != 2 for e in waits):
        fail("long waits not attributed to rank 2: %s" % [e["args"] for e in waits][:5])
    ops = [e for e in evs if e.get("name", "").startswith("allreduce #") and e["pid"] == 0]
    a = ops[-1]["args"]
    for k in ("seq", "bytes", "algorithm", "busbw_GBs"):
        if k not in a:
            fail("op slice lacks %s: %s" % (k, a))


try:
    globals()["case_" + CASE]()
    print("PASS")
finally:
    shutil.rmtree(TMP, ignore_errors=True)
