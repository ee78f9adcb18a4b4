"""Which rank runs where: hosts from -H or a hostfile, filled in order."""
import socket
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
