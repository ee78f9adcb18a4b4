"""Which rank runs where: hosts from -H, a hostfile or (elastic mode) a host
discovery script, filled in order."""
import os
import signal
import socket
import subprocess
import threading
from dataclasses import dataclass


class HostError(ValueError):
    pass


@dataclass(frozen=True)
class Slot:
    rank: int
    host: str
    local_rank: int
    local_size: int
    cross_rank: int  # this host's index among the hosts with this local_rank
    cross_size: int  # how many hosts have a rank with this local_rank
    node: int  # this host's index among the hosts used


def parse_hosts(spec):
    """'a:2,b:4' (or 'a,b': one slot each) -> [('a', 2), ('b', 4)]."""
    out = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, slots = item.rpartition(":")
        if not sep:
            host, slots = item, "1"
        if not host or not slots.isdigit() or int(slots) < 1:
            raise HostError(f"-H: '{item}' is not host:slots with slots a positive number")
        out.append((host, int(slots)))
    if not out:
        raise HostError(f"-H: no hosts in '{spec}'")
    return _merge(out)


def parse_hostfile(path):
    """Lines 'host slots=N', 'host:N' or 'host' (one slot); '#' comments."""
    out = []
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            host, slots = fields[0], 1
            if ":" in host:
                host, _, s = host.rpartition(":")
                slots = s
            for f in fields[1:]:
                key, _, value = f.partition("=")
                if key == "slots":  # max_slots and others: not needed here
                    slots = value
            if not str(slots).isdigit() or int(slots) < 1:
                raise HostError(f"{path}:{n}: '{line}': slots must be a positive number")
            out.append((host, int(slots)))
    if not out:
        raise HostError(f"{path}: no hosts")
    return _merge(out)


def parse_discovery(text):
    """A discovery script's output, Horovod's format: lines 'host:slots' (or
    'host': one slot; 'host:0': none); blank lines and '#' comments skipped."""
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        host, sep, slots = line.rpartition(":")
        if not sep:
            host, slots = line, "1"
        if not host or not slots.isdigit():
            raise HostError(f"'{line}' is not host:slots")
        out.append((host, int(slots)))
    return _merge(out)


def run_discovery(script, timeout=10.0, started=None):
    """Runs the discovery script (by /bin/sh) once, at most `timeout` seconds,
    and returns its hosts; HostError says why there are none. `started(p)`
    is told the process (so that another thread may kill it)."""
    p = subprocess.Popen(script, shell=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    if started:
        started(p)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(p)
        raise HostError(f"the host discovery script ran past {timeout:g} s")
    except BaseException:
        _kill_group(p)
        raise
    if p.returncode != 0:
        last = (err.strip().splitlines() or [""])[-1]
        raise HostError(f"the host discovery script exited with {p.returncode}"
                        + (f": {last}" if last else ""))
    try:
        return parse_discovery(out)
    except HostError as e:
        raise HostError(f"the host discovery script printed {e}") from None


def _kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        p.communicate(timeout=2)
    except subprocess.TimeoutExpired:  # a grandchild left the group and holds the pipes
        pass


class Discovery:
    """Runs the discovery script every `interval` seconds (from the end of one
    run to the start of the next) on a thread of its own. latest() is the
    number of successful runs so far and the hosts of the last one; a failing
    run is logged (once, until it changes) and leaves the hosts as they were."""

    def __init__(self, script, interval, log, timeout=10.0):
        self.script, self.interval, self.timeout, self._log = script, interval, timeout, log
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._runs, self._hosts, self._error = 0, None, None
        self._proc = None
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self):
        self._thread.start()

    def latest(self):
        with self._lock:
            return self._runs, self._hosts

    def run_once(self):
        try:
            hosts = run_discovery(self.script, self.timeout, self._started)
        except (HostError, OSError) as e:
            if self._stop.is_set():
                return None
            if str(e) != self._error:
                self._log(f"{e}; ignored")
                self._error = str(e)
            return None
        with self._lock:
            if hosts != self._hosts:
                listed = ",".join(f"{h}:{n}" for h, n in hosts) or "no hosts"
                self._log(f"discovered {listed}")
            self._runs += 1
            self._hosts = hosts
            self._error = None
        return hosts

    def _started(self, p):
        self._proc = p
        if self._stop.is_set():
            self._kill()

    def _kill(self):
        p = self._proc
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _loop(self):
        while not self._stop.wait(self.interval):
            self.run_once()

    def stop(self):
        self._stop.set()
        self._kill()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def _merge(hosts):
    seen = {}
    for host, slots in hosts:
        seen[host] = seen.get(host, 0) + slots
    return list(seen.items())


def assign(np_, hosts):
    """Fills hosts in order, each up to its slots, with ranks 0..np_-1."""
    total = sum(s for _, s in hosts)
    if np_ < 1:
        raise HostError(f"-np {np_}: need at least one process")
    if np_ > total:
        listed = ",".join(f"{h}:{s}" for h, s in hosts)
        raise HostError(f"-np {np_} is more than the {total} slots of the hosts ({listed})")
    placed = []  # (host, count) of the hosts used
    left = np_
    for host, slots in hosts:
        if left == 0:
            break
        k = min(slots, left)
        placed.append((host, k))
        left -= k
    slots = []
    rank = 0
    for node, (host, k) in enumerate(placed):
        for lr in range(k):
            having = [i for i, (_, c) in enumerate(placed) if c > lr]
            slots.append(Slot(rank, host, lr, k, having.index(node), len(having), node))
            rank += 1
    return slots


_LOCAL_NAMES = {"localhost", "127.0.0.1", "::1"}


def is_local(host):
    """Whether `host` names this machine (then no ssh is needed)."""
    if host in _LOCAL_NAMES or host.startswith("127."):
        return True
    names = {socket.gethostname(), socket.getfqdn()}
    if host in names:
        return True
    try:
        addr = socket.gethostbyname(host)
    except OSError:
        return False
    if addr.startswith("127."):
        return True
    return addr in _local_addresses()


def _local_addresses():
    addrs = set()
    try:
        import fcntl  # noqa: F401  (Linux: read the interfaces' addresses)
        import struct

        for _, name in socket.if_nameindex():
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                try:
                    req = struct.pack("256s", name.encode()[:15])
                    res = fcntl.ioctl(s.fileno(), 0x8915, req)  # SIOCGIFADDR
                    addrs.add(socket.inet_ntoa(res[20:24]))
                except OSError:
                    pass
    except (ImportError, OSError):
        pass
    return addrs
