"""weftrun across hosts: two network namespaces play two hosts (a veth pair,
test-only addresses 10.214.N.1-2 that exist only inside them), an sshd of
the test's own runs in the second, and weftrun, started in the first, puts
two ranks on each host: local ones directly, remote ones over ssh. Needs
root and sshd; skips, saying why, otherwise. Everything is removed at the
end, also when a check fails."""
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from netns_pair import netns_pair, sh

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="creating network namespaces needs root"),
    pytest.mark.skipif(not os.path.exists(SSHD) or not shutil.which("ssh-keygen"),
                       reason="sshd / ssh-keygen missing (apt install openssh-server)"),
]


@pytest.fixture
def two_hosts(tmp_path):
    sshd = None
    with netns_pair("wrun") as ((a, b), addr):
        try:
            key = tmp_path / "id"
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "hostkey"))
            shutil.copy(f"{key}.pub", tmp_path / "authorized_keys")
            cfg = tmp_path / "sshd_config"
            cfg.write_text(textwrap.dedent(f"""\
                ListenAddress {addr[1]}
                Port 2222
                HostKey {tmp_path}/hostkey
                AuthorizedKeysFile {tmp_path}/authorized_keys
                PermitRootLogin prohibit-password
                PasswordAuthentication no
                KbdInteractiveAuthentication no
                UsePAM no
                StrictModes no
                PidFile none
                AcceptEnv *
                """))
            os.makedirs("/run/sshd", exist_ok=True)
            sshd = subprocess.Popen(["ip", "netns", "exec", b, SSHD, "-D", "-e", "-f", str(cfg)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            ssh = ["ip", "netns", "exec", a, "ssh", "-o", "BatchMode=yes", "-o",
                   "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o",
                   "LogLevel=ERROR", "-p", "2222", "-i", str(key), addr[1], "true"]
            for _ in range(100):
                if subprocess.run(ssh, capture_output=True).returncode == 0:
                    break
                time.sleep(0.1)
            else:
                pytest.fail("the test's sshd did not answer: " + (sshd.stderr.read1(4096).decode()
                                                                  if sshd.poll() is not None else ""))
            yield {"ns": (a, b), "addr": list(addr), "key": str(key)}
        finally:
            if sshd is not None:
                sshd.terminate()
                sshd.wait(timeout=10)


def weftrun_in(bed, args, timeout=180):
    env = dict(os.environ, OMP_NUM_THREADS="1", WEFT_TIMEOUT_S="60")
    return subprocess.run(
        ["ip", "netns", "exec", bed["ns"][0], sys.executable, "-m", "weft.launch",
         "-H", f"{bed['addr'][0]}:2,{bed['addr'][1]}:2", "-p", "2222", "-i", bed["key"],
         "--ssh-option", "UserKnownHostsFile=/dev/null", "--network-interface", "^lo", *args],
        capture_output=True, text=True, timeout=timeout, env=env)


def netns_inode(ns):
    return os.stat(f"/var/run/netns/{ns}").st_ino


def test_four_ranks_on_two_hosts_train_on_weft(two_hosts, tmp_path):
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent("""\
        import os, torch, torch.distributed as dist
        import weft.torch  # noqa: F401
        dist.init_process_group("weft")
        t = torch.arange(1000, dtype=torch.float32) * (dist.get_rank() + 1)
        dist.all_reduce(t)
        ok = torch.equal(t, torch.arange(1000, dtype=torch.float32) * 10)
        print("rank", os.environ["RANK"], "node", os.environ["WEFT_CROSS_RANK"],
              "local", os.environ["LOCAL_RANK"], "netns", os.stat("/proc/self/ns/net").st_ino,
              "ok" if ok else "WRONG")
        dist.destroy_process_group()
        """))
    r = weftrun_in(two_hosts, ["-np", "4", sys.executable, str(job)])
    assert r.returncode == 0, r.stdout + r.stderr
    lines = sorted(l.split(":", 1)[1].split() for l in r.stdout.splitlines() if "netns" in l)
    assert len(lines) == 4, r.stdout + r.stderr
    a, b = (netns_inode(ns) for ns in two_hosts["ns"])
    for rank, f in enumerate(lines):
        assert f[1] == str(rank) and f[-1] == "ok", f
        host = rank // 2
        assert (f[3], f[5]) == (str(host), str(rank % 2))
        assert int(f[7]) == (a, b)[host], f"rank {rank} ran in the wrong namespace"


def test_a_failure_stops_the_remote_ranks_too(two_hosts, tmp_path):
    marker = f"weftrun-stray-{os.getpid()}"
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(f"""\
        import os, sys, time
        sys.argv[0] = "{marker}"
        if os.environ["RANK"] == "0":
            time.sleep(1)
            sys.exit(9)
        time.sleep(300)
        """))
    t0 = time.monotonic()
    r = weftrun_in(two_hosts, ["-np", "4", sys.executable, str(job), marker])
    assert r.returncode == 9 and "rank 0" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 60
    # The remote ranks end when their ssh connection closes.
    for _ in range(100):
        left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
        if not left.strip():
            break
        time.sleep(0.1)
    assert not left.strip(), f"ranks left running: {left}"


def test_elastic_joiner_on_a_discovered_remote_host_reaches_the_store(two_hosts, tmp_path):
    # One worker on the first host; the discovery script then offers a slot
    # on the second: weftrun starts a joiner there over ssh, which reaches
    # the store weftrun serves on the first host's address.
    a_addr, b_addr = two_hosts["addr"]
    slots = tmp_path / "slots"
    slots.write_text(f"{a_addr}:1\n")
    disc = tmp_path / "discover.sh"
    disc.write_text(f"#!/bin/sh\ncat {slots}\n")
    disc.chmod(0o755)
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent("""\
        import os
        from datetime import timedelta
        from torch.distributed import TCPStore
        host, port = os.environ["WEFT_ELASTIC_STORE"].rsplit(":", 1)
        s = TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=60))
        if os.environ["WEFT_ELASTIC_JOIN"] == "1":
            s.set("joined", str(os.stat("/proc/self/ns/net").st_ino))
        else:
            open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ready"), "w").close()
            s.wait(["joined"], timedelta(seconds=90))
            print("joiner in netns", s.get("joined").decode(), "store", host, flush=True)
        """))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.Popen(
        ["ip", "netns", "exec", two_hosts["ns"][0], sys.executable, "-m", "weft.launch",
         "-p", "2222", "-i", two_hosts["key"], "--ssh-option", "UserKnownHostsFile=/dev/null",
         "-np", "1", "--max-np", "2", "--host-discovery-script", str(disc),
         "--discovery-interval", "0.3", sys.executable, str(job)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists():
            assert p.poll() is None and time.monotonic() < deadline, "".join(p.communicate())
            time.sleep(0.05)
        slots.write_text(f"{a_addr}:1\n{b_addr}:1\n")
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.terminate()
            p.communicate(timeout=30)
    assert p.returncode == 0, out + err
    assert f"joins on {b_addr}" in err, err
    b_ino = netns_inode(two_hosts["ns"][1])
    assert f"joiner in netns {b_ino} store {a_addr}" in out, out + err
