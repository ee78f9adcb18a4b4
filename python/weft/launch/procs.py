"""Starting the ranks (here, or over ssh), relaying their output, and
stopping the whole job when one rank fails (or, in elastic mode, when fewer
than --min-np workers are left)."""
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

# A remote rank runs under this shell wrapper: it ends the command when the
# ssh connection closes (its stdin reaches EOF), so that killing weftrun or
# losing the launcher's host never leaves ranks behind. fd 3 keeps the
# connection's stdin (a background job's own stdin is /dev/null in a shell
# without job control); the watcher writes nowhere, so that it never keeps
# the connection open once the rank is done.
_REMOTE_WRAPPER = (
    'exec 3<&0; "$@" </dev/null 3<&- & pid=$!; '
    "( cat <&3 & c=$!; trap 'kill $c; exit 0' TERM; wait $c; "
    "kill -TERM $pid; for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 $pid || exit 0; sleep 0.5; done; "
    "kill -KILL $pid ) >/dev/null 2>&1 & watcher=$!; "
    "exec 3<&-; wait $pid; rc=$?; kill $watcher 2>/dev/null; exit $rc"
)


def ssh_argv(host, command, env, cwd, ssh_port=None, identity=None, ssh_opts=()):
    """The ssh command line that runs `command` (a list) on `host` in `cwd`
    with `env` set."""
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
            "LogLevel=ERROR"]
    if ssh_port:
        argv += ["-p", str(ssh_port)]
    if identity:
        argv += ["-i", identity]
    argv += list(ssh_opts)
    assigns = [f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    remote = (f"cd {shlex.quote(cwd)} && exec env {' '.join(assigns)} "
              f"sh -c {shlex.quote(_REMOTE_WRAPPER)} weftrun-rank "
              + " ".join(shlex.quote(c) for c in command))
    return argv + [host, remote]


class Rank:
    def __init__(self, slot, argv, env, local, out_dir=None, prefix=True, name=None):
        self.slot = slot
        self.local = local
        # How its output and files are labelled: its rank, or in elastic
        # mode the worker's number (joiners have no rank yet).
        self.name = slot.rank if name is None else name
        self.returncode = None
        self.ended = None  # time.monotonic() at exit
        self._files = []
        kwargs = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "env": env,
                  # A session of its own: weftrun signals the rank's whole
                  # process group, not itself.
                  "start_new_session": True}
        if not local:
            kwargs["stdin"] = subprocess.PIPE  # held open: its EOF ends the remote rank
        else:
            kwargs["stdin"] = subprocess.DEVNULL
        self.proc = subprocess.Popen(argv, **kwargs)
        self._pumps = []
        for name, stream, sink in (("stdout", self.proc.stdout, sys.stdout),
                                   ("stderr", self.proc.stderr, sys.stderr)):
            f = None
            if out_dir:
                d = os.path.join(out_dir, f"rank.{self.name}")
                os.makedirs(d, exist_ok=True)
                f = open(os.path.join(d, name), "wb")
                self._files.append(f)
            tag = f"[{self.name}]<{name}>:".encode() if prefix else b""
            t = threading.Thread(target=_pump, args=(stream, sink, tag, f), daemon=True)
            t.start()
            self._pumps.append(t)

    def poll(self):
        if self.returncode is None:
            rc = self.proc.poll()
            if rc is not None:
                self.returncode = rc
                self.ended = time.monotonic()
        return self.returncode

    def signal(self, sig):
        if self.poll() is not None:
            return
        try:
            if self.local:
                os.killpg(self.proc.pid, sig)
            else:
                # Closing stdin makes the remote wrapper end the rank; the
                # local ssh client is then signalled too.
                if self.proc.stdin and not self.proc.stdin.closed:
                    self.proc.stdin.close()
                os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError, BrokenPipeError):
            pass

    def finish(self):
        for t in self._pumps:
            t.join(timeout=5)
        for f in self._files:
            f.close()


_write_lock = threading.Lock()


def _pump(stream, sink, tag, copy):
    for line in iter(stream.readline, b""):
        if copy:
            copy.write(line)
        with _write_lock:
            out = sink.buffer if hasattr(sink, "buffer") else sink
            out.write(tag + line if tag else line)
            out.flush()
    stream.close()


def run_job(ranks, grace_s=10.0):
    """Waits for every rank. The first to fail (non-zero exit) ends the rest:
    SIGTERM, then SIGKILL after `grace_s`. Returns (exit code, first failed
    rank or None)."""
    first = None
    stopping_since = None
    forwarded = []

    def on_signal(sig, _frame):
        forwarded.append(sig)
        for r in ranks:
            r.signal(sig)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            alive = [r for r in ranks if r.poll() is None]
            failed = [r for r in ranks if r.returncode not in (None, 0)]
            if first is None and failed:
                first = min(failed, key=lambda r: r.ended)
            if not alive:
                break
            if (first is not None or forwarded) and stopping_since is None:
                stopping_since = time.monotonic()
                for r in alive:
                    r.signal(signal.SIGTERM)
            if stopping_since is not None and time.monotonic() - stopping_since > grace_s:
                for r in alive:
                    r.signal(signal.SIGKILL)
            time.sleep(0.05)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        for r in ranks:
            r.finish()
    if first is not None:
        rc = first.returncode
        return (rc if rc > 0 else 128 - rc), first
    if forwarded:
        return 128 + forwarded[0], None
    return 0, None


def describe_exit(rc):
    """'code 3' or 'signal SIGKILL' for a Popen returncode."""
    if rc < 0:
        try:
            return f"signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"code {rc}"


def _log(msg):
    with _write_lock:
        print(f"weftrun: {msg}", file=sys.stderr, flush=True)


def run_elastic(workers, min_np, grow=None, grace_s=10.0, log=_log):
    """Elastic mode: waits for every worker; one that fails is logged and
    tolerated while the workers alive plus those done (exit 0) are at least
    `min_np`. Below that the rest are stopped as in run_job. `grow(alive)`,
    called every 50 ms until a worker finishes or the job stops, returns the
    workers it started (joiners); `workers` grows by them. Returns (exit
    code, the worker whose failure stopped the job or None, how many failed)."""
    reported = set()
    fatal = None
    failed = 0
    stopping_since = None
    forwarded = []

    def on_signal(sig, _frame):
        forwarded.append(sig)
        for r in workers:
            r.signal(sig)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            for r in list(workers):
                if r in reported or r.poll() is None:
                    continue
                reported.add(r)
                if r.returncode == 0 or stopping_since is not None or forwarded:
                    continue
                failed += 1
                alive = sum(1 for w in workers if w.poll() is None)
                done = sum(1 for w in workers if w.returncode == 0)
                where = "" if r.local else f" on {r.slot.host}"
                log(f"worker {r.name} (pid {r.proc.pid}{where}) exited with "
                    f"{describe_exit(r.returncode)}; {alive} alive")
                if fatal is None and alive + done < min_np:
                    fatal = r
                    log(f"{alive} workers alive and {done} done, fewer than --min-np {min_np}: "
                        "stopping the job")
            alive = [r for r in workers if r.poll() is None]
            if not alive:
                break
            if (fatal is not None or forwarded) and stopping_since is None:
                stopping_since = time.monotonic()
                for r in alive:
                    r.signal(signal.SIGTERM)
            if stopping_since is not None and time.monotonic() - stopping_since > grace_s:
                for r in alive:
                    r.signal(signal.SIGKILL)
            if (grow is not None and stopping_since is None and not forwarded
                    and not any(w.returncode == 0 for w in workers)):
                workers.extend(grow(alive))
            time.sleep(0.05)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        for r in workers:
            r.finish()
    if forwarded:
        return 128 + forwarded[0], None, failed
    if fatal is not None:
        rc = fatal.returncode
        return (rc if rc > 0 else 128 - rc), fatal, failed
    done = sum(1 for w in workers if w.returncode == 0)
    return (0 if done >= min_np else 1), None, failed
