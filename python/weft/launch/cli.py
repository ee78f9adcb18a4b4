"""weftrun's command line (horovodrun's flags, where weft has the feature)."""
import argparse
import os
import socket
import sys

from weft.launch import hosts as hostlib
from weft.launch.procs import Rank, describe_exit, run_elastic, run_job, ssh_argv
from weft.launch.rank_env import RANK_VARS, elastic_env, forwarded, job_facts, rank_env

_LOG_LEVELS = {"TRACE": "TRACE", "DEBUG": "INFO", "INFO": "INFO", "WARNING": "WARN",
               "ERROR": "WARN", "FATAL": "WARN"}


def parser():
    ap = argparse.ArgumentParser(
        prog="weftrun",
        description="Runs a command as N ranks of one weft job, here or on several hosts (ssh).",
        epilog="Example: weftrun -np 4 python train.py. Docs: docs/weftrun.md.")
    ap.add_argument("-np", "--num-proc", type=int, dest="np", help="number of ranks")
    ap.add_argument("-H", "--hosts", help="host:slots,... (default: localhost with -np slots)")
    ap.add_argument("-hostfile", "--hostfile", help="file of 'host slots=N' lines")
    ap.add_argument("-p", "--ssh-port", type=int, help="ssh port of the remote hosts")
    ap.add_argument("-i", "--ssh-identity-file", help="ssh identity (private key) file")
    ap.add_argument("--ssh-option", action="append", default=[], metavar="OPT",
                    help="an ssh -o option for the remote hosts (repeatable)")
    ap.add_argument("--network-interface", "--network-interfaces", dest="nics",
                    help="interfaces weft's tcp uses (WEFT_SOCKET_IFNAME), e.g. eth0 or eth0,eth1")
    ap.add_argument("--master-port", type=int, default=0,
                    help="port of the rendezvous on the first host (default: a free one)")
    ap.add_argument("--start-timeout", type=float,
                    help="seconds the ranks may take to find each other (WEFT_BOOTSTRAP_TIMEOUT_S)")
    ap.add_argument("--timeline-filename",
                    help="Chrome-trace timeline: one file per rank (WEFT_TIMELINE), merged "
                         "into this file at the end when the ranks' files are here")
    ap.add_argument("--fusion-threshold-mb", type=float,
                    help="tensor fusion buffer size in MiB (WEFT_FUSION_THRESHOLD); 0 disables")
    ap.add_argument("--stall-check-warning-time-seconds", type=float,
                    help="report ranks that keep a collective waiting this long (WEFT_STALL_WARN_S)")
    ap.add_argument("--stall-check-shutdown-time-seconds", type=float,
                    help="fail a collective that makes no progress this long (WEFT_TIMEOUT_S)")
    ap.add_argument("--log-level", choices=sorted(_LOG_LEVELS), help="weft's log level (WEFT_DEBUG)")
    ap.add_argument("--output-filename",
                    help="also write each rank's output to DIR/rank.N/{stdout,stderr}")
    ap.add_argument("-x", dest="env", action="append", default=[], metavar="VAR[=VALUE]",
                    help="pass this variable to remote ranks too (repeatable)")
    ap.add_argument("--disable-prefix", action="store_true",
                    help="do not prefix output lines with [rank]<stream>:")
    el = ap.add_argument_group(
        "elastic mode (on when any of --min-np, --max-np, --host-discovery-script is given)")
    el.add_argument("--min-np", type=int,
                    help="fewest workers the job goes on with: below it weftrun stops the job "
                         "(default: -np)")
    el.add_argument("--max-np", type=int,
                    help="most workers at once (default: no bound but the discovered slots)")
    el.add_argument("--host-discovery-script", metavar="S",
                    help="command (run by /bin/sh) printing 'host:slots' lines: the job's hosts, "
                         "at start and every --discovery-interval seconds; free slots get new "
                         "workers (no -H / --hostfile with it)")
    el.add_argument("--discovery-interval", type=float, default=1.0, metavar="S",
                    help="seconds between two runs of the discovery script (default 1)")
    el.add_argument("--elastic-timeout", type=float, default=600.0, metavar="S",
                    help="WEFT_ELASTIC_TIMEOUT_S for the workers' library; also how long weftrun "
                         "waits at start for the discovery script to offer -np slots "
                         "(default 600)")
    ap.add_argument("--check-build", action="store_true",
                    help="print what this weft has (transports, CUDA, torch) and exit")
    ap.add_argument("--verbose", action="store_true", help="print where each rank runs")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the command each rank runs")
    return ap


def _free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _timeline_pattern(path):
    if "%r" in path:
        return path, False
    root, ext = os.path.splitext(path)
    return f"{root}.rank%r{ext or '.json'}", True


def _weft_settings(a):
    s = {}
    if a.nics:
        s["WEFT_SOCKET_IFNAME"] = a.nics
    if a.start_timeout is not None:
        s["WEFT_BOOTSTRAP_TIMEOUT_S"] = a.start_timeout
    if a.fusion_threshold_mb is not None:
        s["WEFT_FUSION_THRESHOLD"] = int(a.fusion_threshold_mb * (1 << 20))
    if a.stall_check_warning_time_seconds is not None:
        s["WEFT_STALL_WARN_S"] = a.stall_check_warning_time_seconds
    if a.stall_check_shutdown_time_seconds is not None:
        s["WEFT_TIMEOUT_S"] = a.stall_check_shutdown_time_seconds
    if a.log_level:
        s["WEFT_DEBUG"] = _LOG_LEVELS[a.log_level]
    if a.timeline_filename:
        s["WEFT_TIMELINE"] = _timeline_pattern(os.path.abspath(a.timeline_filename))[0]
    return s


def _merge_timeline(path, nranks):
    """Joins the ranks' timelines into `path` (Perfetto opens it); ranks'
    files on other hosts stay there (weft-report --timeline merges them)."""
    import json

    pattern, split = _timeline_pattern(os.path.abspath(path))
    if not split:
        return
    events, found = [], 0
    for r in range(nranks):
        try:
            with open(pattern.replace("%r", str(r))) as fh:
                events += json.load(fh).get("traceEvents", [])
            found += 1
        except (OSError, ValueError):
            pass
    if found:
        with open(path, "w") as fh:
            json.dump({"displayTimeUnit": "ns", "traceEvents": events}, fh)
        print(f"weftrun: timeline of {found} of {nranks} ranks -> {path}", file=sys.stderr)


def _log(msg):
    print(f"weftrun: {msg}", file=sys.stderr, flush=True)


def _first_discovery(disc, a):
    """The hosts of the discovery script's first answer that offers -np (and
    --min-np) slots, waiting up to --elastic-timeout for one."""
    import time

    want = max(a.np or 1, a.min_np or 1)
    deadline = time.monotonic() + a.elastic_timeout
    while True:
        found = disc.run_once()
        if found is not None and sum(n for _, n in found) >= want:
            return [(h, n) for h, n in found if n > 0]
        if time.monotonic() >= deadline:
            got = "no answer" if found is None else f"{sum(n for _, n in found)} slots"
            raise hostlib.HostError(f"the host discovery script gave {got} in --elastic-timeout "
                                    f"{a.elastic_timeout:g} s, not the {want} needed to start")
        time.sleep(max(0.0, min(a.discovery_interval, deadline - time.monotonic())))


def _store_host(hosts, local, all_local, discovery):
    """The address the workers reach weftrun's store at (it listens there)."""
    if all_local and not discovery:
        return "127.0.0.1"
    first = hosts[0][0]
    if local[first] and first not in ("localhost", "127.0.0.1") and not first.startswith("127."):
        return first  # as the rendezvous: the first host as written
    remote = [h for h, _ in hosts if not local[h]]
    if remote:  # the address of this machine on the way to the remote hosts
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((remote[0], 9))
                return s.getsockname()[0]
        except OSError:
            return socket.getfqdn()
    # Discovery, and every host so far is this machine by a loopback name: an
    # address of its own that hosts discovered later can reach.
    own = sorted(x for x in hostlib._local_addresses() if not x.startswith("127."))
    return own[0] if own else "127.0.0.1"


def _elastic_store(host):
    """torch's TCPStore, served by weftrun, listening on `host` only."""
    from torch.distributed import TCPStore

    family, kind, proto, _, addr = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
    ls = socket.socket(family, kind, proto)
    try:
        ls.bind(addr[:2] if family == socket.AF_INET else addr)
        ls.listen(1024)
        port = ls.getsockname()[1]
        store = TCPStore(host, port, is_master=True, wait_for_workers=False,
                         master_listen_fd=ls.fileno())
        ls.detach()  # the store owns the socket now
    except (TypeError, ValueError):  # a torch without master_listen_fd: every address
        ls.close()
        store = TCPStore(host, 0, is_master=True, wait_for_workers=False)
        port = store.port
    return store, f"{host}:{port}"


def main(argv=None):
    a = parser().parse_args(argv)
    if a.check_build:
        from weft.launch.check_build import report

        text, ok = report()
        print(text)
        return 0 if ok else 1
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        parser().error("no command to run (weftrun -np N COMMAND ...)")
    elastic = a.min_np is not None or a.max_np is not None or bool(a.host_discovery_script)
    disc = None
    if elastic and not (a.discovery_interval > 0 and a.elastic_timeout > 0):
        _log("--discovery-interval and --elastic-timeout must be positive")
        return 2
    if a.host_discovery_script:
        if a.hosts or a.hostfile:
            _log("--host-discovery-script finds the hosts: no -H / --hostfile with it")
            return 2
        disc = hostlib.Discovery(a.host_discovery_script, a.discovery_interval, _log)
    try:
        if disc is not None:
            hosts = _first_discovery(disc, a)
        elif a.hostfile:
            hosts = hostlib.parse_hostfile(a.hostfile)
        elif a.hosts:
            hosts = hostlib.parse_hosts(a.hosts)
        else:
            hosts = [("localhost", a.np or a.min_np or 1)]
        np_ = a.np
        if np_ is None:
            np_ = sum(s for _, s in hosts)
            if a.max_np:
                np_ = min(np_, a.max_np)
        slots = hostlib.assign(np_, hosts)
    except (hostlib.HostError, OSError) as e:
        print(f"weftrun: {e}", file=sys.stderr)
        return 2
    min_np = a.min_np if a.min_np is not None else np_
    if elastic:
        if not 1 <= min_np <= np_:
            _log(f"--min-np {min_np} must be between 1 and -np {np_}")
            return 2
        if a.max_np is not None and a.max_np < np_:
            _log(f"--max-np {a.max_np} is less than -np {np_}")
            return 2
    local = {h: hostlib.is_local(h) for h, _ in hosts}
    first = slots[0].host
    all_local = all(local[s.host] for s in slots)
    if all_local:
        master = "127.0.0.1"
    elif local[first] and first in ("localhost", "127.0.0.1"):
        print("weftrun: the first host is 'localhost' but other hosts are remote: name it by an "
              "address they can reach", file=sys.stderr)
        return 2
    else:
        master = first
    if local[first]:
        mport, rport = a.master_port or _free_port(), _free_port()
    else:
        import random

        mport = a.master_port or random.randrange(20000, 40000)
        rport = mport + 1
    job = job_facts(master, mport, rport)
    settings = _weft_settings(a)
    cwd = os.getcwd()
    ssh_opts = [x for o in a.ssh_option for x in ("-o", o)]
    store = store_addr = None  # the store serves the job as long as main() holds it
    # Without a discovery script nothing joins: -np is the most there can be.
    max_np = a.max_np if a.max_np is not None else (0 if disc is not None else np_)
    if elastic:
        try:
            store, store_addr = _elastic_store(_store_host(hosts, local, all_local, disc))
        except ImportError as e:
            _log(f"elastic mode needs torch (weftrun serves the job's torch.distributed.TCPStore): "
                 f"{e}")
            return 2
        except (OSError, RuntimeError) as e:
            _log(f"could not start the elastic store: {e}")
            return 1
        if a.verbose:
            _log(f"elastic store at {store_addr}")

    def start(slot, env_r, name=None, join=False):
        if slot.host not in local:
            local[slot.host] = hostlib.is_local(slot.host)
        if local[slot.host]:
            env = dict(os.environ)
            if join:
                for k in RANK_VARS:
                    env.pop(k, None)
            env.update({k: str(v) for k, v in env_r.items()})
            return Rank(slot, command, env, True, a.output_filename, not a.disable_prefix, name)
        env = forwarded(names=a.env)
        if join:
            for k in RANK_VARS:
                env.pop(k, None)
        env.update({k: str(v) for k, v in env_r.items()})
        argv = ssh_argv(slot.host, command, env, cwd, a.ssh_port, a.ssh_identity_file, ssh_opts)
        return Rank(slot, argv, None, False, a.output_filename, not a.disable_prefix, name)

    ranks = []
    try:
        for s in slots:
            extra = settings
            if elastic:
                extra = dict(settings, **elastic_env(store_addr, min_np, max_np,
                                                     a.elastic_timeout, s.rank, False))
            env_r = rank_env(s, np_, job, extra)
            if a.verbose:
                print(f"weftrun: rank {s.rank} on {s.host} (local rank {s.local_rank})",
                      file=sys.stderr)
            ranks.append(start(s, env_r))
    except OSError as e:
        print(f"weftrun: could not start rank {len(ranks)}: {e}", file=sys.stderr)
        if ranks:
            for r in ranks:
                r.signal(15)
            run_job(ranks, grace_s=1.0)
        return 1
    if not elastic:
        rc, failed = run_job(ranks)
        if failed is not None:
            print(f"weftrun: rank {failed.slot.rank} (on {failed.slot.host}) exited with "
                  f"{describe_exit(failed.returncode)}; the other ranks were stopped",
                  file=sys.stderr)
    else:
        grow = None
        if disc is not None:
            grow = _grower(disc, max_np, np_, lambda host, n: start(
                hostlib.Slot(-1, host, -1, -1, -1, -1, -1),
                dict(settings, WEFT_JOB_SECRET=str(job["secret"]),
                     **elastic_env(store_addr, min_np, max_np, a.elastic_timeout, n, True)),
                n, join=True))
            disc.start()
        try:
            rc, fatal, nfailed = run_elastic(ranks, min_np, grow)
        finally:
            if disc is not None:
                disc.stop()
        if fatal is not None:
            _log(f"stopped the job: fewer than --min-np {min_np} workers left after worker "
                 f"{fatal.name} failed")
        elif nfailed and rc == 0:
            _log(f"{nfailed} worker(s) failed and were tolerated (elastic mode, --min-np {min_np})")
    if a.timeline_filename:
        _merge_timeline(a.timeline_filename, np_)
    return rc


def _grower(disc, max_np, first_free, start):
    """run_elastic's grow(): on each new answer of the discovery script, new
    workers (joiners) for the slots of each host not taken by a live worker,
    up to max_np in all; numbered on from -np."""
    seen = [disc.latest()[0]]
    counter = [first_free]

    def grow(alive):
        runs, found = disc.latest()
        if runs == seen[0] or not found:
            return []
        seen[0] = runs
        taken = {}
        for r in alive:
            taken[r.slot.host] = taken.get(r.slot.host, 0) + 1
        new = []
        for host, n in found:
            for _ in range(n - taken.get(host, 0)):
                if max_np and len(alive) + len(new) >= max_np:
                    return new
                name = counter[0]
                counter[0] += 1
                try:
                    w = start(host, name)
                except OSError as e:
                    _log(f"could not start worker {name} on {host}: {e}")
                    break
                _log(f"worker {name} (pid {w.proc.pid}) joins on {host}; "
                     f"{len(alive) + len(new) + 1} alive")
                new.append(w)
        return new

    return grow
