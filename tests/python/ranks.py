"""Runs a function on N ranks as forked processes, each joined to one
torch.distributed process group, and collects what each returned or raised.

    results = run_ranks(fn, n, backend="weft")   # fn(rank, n) -> picklable

A rank that raises makes run_ranks raise RankFailure with every rank's
traceback; a rank still running after `timeout` seconds is killed and
reported as hung. `init=False` leaves init_process_group to fn (it gets
(rank, n, init_method)).
"""
import multiprocessing as mp
import os
import socket
import traceback


class RankFailure(AssertionError):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(fn, rank, n, backend, init_method, init, pg_timeout, env, q):
    try:
        os.environ.update(env)
        import torch.distributed as dist

        if backend == "weft":
            import weft.torch  # noqa: F401
        if init:
            import datetime

            dist.init_process_group(
                backend,
                init_method=init_method,
                rank=rank,
                world_size=n,
                timeout=datetime.timedelta(seconds=pg_timeout),
            )
            out = fn(rank, n)
            dist.destroy_process_group()
        else:
            out = fn(rank, n, init_method)
        q.put((rank, True, out))
    except BaseException:  # noqa: B036 - reported to the parent
        q.put((rank, False, traceback.format_exc()))


def run_ranks(fn, n, backend="weft", timeout=180, init=True, pg_timeout=60, env=None,
              allow_exit=()):
    """fn's result per rank (a list). Ranks in `allow_exit` may end without a result."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    init_method = f"tcp://127.0.0.1:{free_port()}"
    procs = [
        ctx.Process(target=_child, args=(fn, r, n, backend, init_method, init, pg_timeout, env or {}, q))
        for r in range(n)
    ]
    for p in procs:
        p.start()
    results, failures = {}, []
    import queue as _queue
    import time

    deadline = time.monotonic() + timeout
    while len(results) + len(failures) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            rank, ok, payload = q.get(timeout=min(left, 1.0))
        except _queue.Empty:
            # A rank allowed to exit without a result counts as done once dead.
            done = {r for r in allow_exit if not procs[r].is_alive() and r not in results}
            for r in done:
                results[r] = None
            continue
        if ok:
            results[rank] = payload
        else:
            failures.append(f"rank {rank} raised:\n{payload}")
    for r, p in enumerate(procs):
        p.join(timeout=max(0.1, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
            if r not in results:
                failures.append(f"rank {r} hung (still running after {timeout} s; killed)")
    if failures:
        raise RankFailure("\n".join(failures))
    return [results.get(r) for r in range(n)]
