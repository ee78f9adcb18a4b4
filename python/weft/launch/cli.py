"""weftrun's command line (horovodrun's flags, where weft has the feature)."""
import argparse
import os
import socket
import sys

from weft.launch import hosts as hostlib
from weft.launch.procs import Rank, describe_exit, run_job, ssh_argv
from weft.launch.rank_env import forwarded, job_facts, rank_env

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
    try:
        if a.hostfile:
            hosts = hostlib.parse_hostfile(a.hostfile)
        elif a.hosts:
            hosts = hostlib.parse_hosts(a.hosts)
        else:
            hosts = [("localhost", a.np or 1)]
        np_ = a.np if a.np is not None else sum(s for _, s in hosts)
        slots = hostlib.assign(np_, hosts)
    except (hostlib.HostError, OSError) as e:
        print(f"weftrun: {e}", file=sys.stderr)
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
    ranks = []
    try:
        for s in slots:
            env_r = rank_env(s, np_, job, settings)
            if a.verbose:
                print(f"weftrun: rank {s.rank} on {s.host} (local rank {s.local_rank})",
                      file=sys.stderr)
            if local[s.host]:
                env = dict(os.environ)
                env.update(env_r)
                ranks.append(Rank(s, command, env, True, a.output_filename, not a.disable_prefix))
            else:
                env = forwarded(names=a.env)
                env.update(env_r)
                argv = ssh_argv(s.host, command, env, cwd, a.ssh_port, a.ssh_identity_file,
                                [x for o in a.ssh_option for x in ("-o", o)])
                ranks.append(Rank(s, argv, None, False, a.output_filename, not a.disable_prefix))
    except OSError as e:
        print(f"weftrun: could not start rank {len(ranks)}: {e}", file=sys.stderr)
        if ranks:
            for r in ranks:
                r.signal(15)
            run_job(ranks, grace_s=1.0)
        return 1
    rc, failed = run_job(ranks)
    if failed is not None:
        print(f"weftrun: rank {failed.slot.rank} (on {failed.slot.host}) exited with "
              f"{describe_exit(failed.returncode)}; the other ranks were stopped", file=sys.stderr)
    if a.timeline_filename:
        _merge_timeline(a.timeline_filename, np_)
    return rc

