"""A killed rank, a hung rank and a rank that never arrives: the others raise
within the process group's timeout, with a message naming the rank."""
import os
import time

import torch
import torch.distributed as dist

from ranks import run_ranks


def _killed(rank, n):
    dist.barrier()
    if rank == n - 1:
        os._exit(3)  # dies without a word
    t0 = time.monotonic()
    try:
        for _ in range(50):
            dist.all_reduce(torch.ones(1000))
        return ("no error", time.monotonic() - t0)
    except Exception as e:  # noqa: BLE001
        return (str(e), time.monotonic() - t0)


def test_killed_rank_is_named_on_every_survivor():
    res = run_ranks(_killed, 3, pg_timeout=20, allow_exit=(2,))
    for r in (0, 1):
        msg, took = res[r]
        assert msg != "no error", f"rank {r} did not notice rank 2's death"
        assert "rank 2" in msg, f"rank {r}'s error does not name rank 2: {msg}"
        assert took < 20, f"rank {r} took {took:.1f} s (timeout 20 s)"


def _hung(rank, n):
    if rank == 1:
        time.sleep(15)  # never joins the all_reduce
        os._exit(0)
    t0 = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4))
        return ("no error", time.monotonic() - t0)
    except Exception as e:  # noqa: BLE001
        return (str(e), time.monotonic() - t0)


def test_hung_rank_times_out_naming_it():
    res = run_ranks(_hung, 2, pg_timeout=4, allow_exit=(1,))
    msg, took = res[0]
    assert msg != "no error"
    assert "rank 1" in msg, msg
    assert "timed out" in msg.lower(), msg
    assert took < 4 + 10, f"took {took:.1f} s with a 4 s timeout"


def _never_arrives(rank, n, init_method):
    import datetime

    if rank == 1:
        time.sleep(20)
        os._exit(0)
    import weft.torch  # noqa: F401

    t0 = time.monotonic()
    try:
        dist.init_process_group("weft", init_method=init_method, rank=rank, world_size=n,
                                timeout=datetime.timedelta(seconds=4))
        return ("no error", time.monotonic() - t0)
    except Exception as e:  # noqa: BLE001
        return (str(e), time.monotonic() - t0)


def test_rank_that_never_arrives_fails_init_in_time():
    res = run_ranks(_never_arrives, 2, init=False, allow_exit=(1,))
    msg, took = res[0]
    assert msg != "no error"
    assert took < 4 + 10, f"took {took:.1f} s with a 4 s timeout: {msg}"
