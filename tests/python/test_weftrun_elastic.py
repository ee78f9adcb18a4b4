"""weftrun's host discovery (elastic mode): the script's output format, its
failures and its time bound."""
import os
import signal
import subprocess
import sys
import time

import pytest

from weft.launch import hosts


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
