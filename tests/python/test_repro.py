"""WEFT_REPRO through the PyTorch backend (docs/reproducibility.md):
dist.all_reduce gives the serial fold over ranks (ordered) bit for bit, and
a DDP run repeated with other WEFT_ALGO values, chunk sizes and transports
ends with bitwise identical weights, in both modes."""
import os
import sys

import pytest
import torch
import torch.distributed as dist

from ranks import run_ranks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import ddp_train  # noqa: E402

N = 3  # with 2 ranks every order gives the same sum; 3 exposes it


def _inputs(rank, count, dtype):
    """Order-exposing values: wide magnitudes, both signs, cancelling big terms."""
    g = torch.Generator().manual_seed(77 + rank)
    span = 10 if dtype == torch.float16 else 20  # float16 stays finite
    mag = torch.exp2(torch.randint(-span, span, (count,), generator=g).double())
    x = (torch.rand(count, generator=g, dtype=torch.float64) + 0.5) * mag
    x = torch.where(torch.rand(count, generator=g) < 0.5, -x, x)
    b = 2.0 ** (span + 2)
    big = torch.full((count,), b if rank % 2 == 0 else -b, dtype=torch.float64)
    x = torch.where(torch.arange(count) % 7 == 0, big, x)
    return x.to(dtype)


def _serial_fold(count, dtype, avg):
    acc = _inputs(0, count, dtype).float() if dtype != torch.float64 else _inputs(0, count, dtype)
    for r in range(1, N):
        x = _inputs(r, count, dtype)
        acc = acc + (x.float() if dtype != torch.float64 else x)
    if avg:
        acc = acc / N
    return acc.to(dtype)


def _all_reduce(rank, n):
    out = {}
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        for avg in (False, True):
            t = _inputs(rank, 100003, dtype)
            dist.all_reduce(t, op=dist.ReduceOp.AVG if avg else dist.ReduceOp.SUM)
            # bytes: a tensor would travel back by a file descriptor of a process that exits
            out[(str(dtype), avg)] = t.contiguous().view(torch.uint8).numpy().tobytes()
    return out


@pytest.mark.parametrize("env", [
    {},
    {"WEFT_ALGO": "ring", "WEFT_SHM_ARENA_CHUNK": "0", "WEFT_CHUNK_BYTES": "8192"},
    {"WEFT_TRANSPORTS": "tcp", "WEFT_SOCKET_IFNAME": "lo", "WEFT_ALGO": "rd"},
], ids=["arena", "shm-fifos-ring", "tcp-rd"])
def test_all_reduce_is_the_serial_fold(env):
    res = run_ranks(_all_reduce, N, env=dict(env, WEFT_REPRO="ordered"))
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        for avg in (False, True):
            want = _serial_fold(100003, dtype, avg)
            for r in range(N):
                got = torch.frombuffer(bytearray(res[r][(str(dtype), avg)]), dtype=dtype)
                bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[want.element_size()]
                assert torch.equal(got.view(bits), want.view(bits)), \
                    f"rank {r} {dtype} avg={avg}: {int((got != want).sum())} elements differ"


def _ddp(rank, n):
    torch.set_num_threads(1)
    loss, weights = ddp_train.train(steps=10)
    return loss, [w.tolist() for w in weights]


_RUNS = [
    {"WEFT_ALGO": "ring"},
    {"WEFT_ALGO": "rd", "WEFT_SHM_ARENA_CHUNK": "0", "WEFT_CHUNK_BYTES": "4096"},
    {"WEFT_TRANSPORTS": "tcp", "WEFT_SOCKET_IFNAME": "lo", "WEFT_ALGO": "hd"},
]


@pytest.mark.parametrize("mode", ["ordered", "exact"])
def test_ddp_weights_bitwise_identical_across_algorithms(mode):
    runs = [run_ranks(_ddp, N, env=dict(e, WEFT_REPRO=mode)) for e in _RUNS]
    ref = runs[0][0][1]
    for i, res in enumerate(runs):
        for r in range(N):
            for a, b in zip(res[r][1], ref):
                assert torch.equal(torch.tensor(a), torch.tensor(b)), \
                    f"{mode}: run {_RUNS[i]} rank {r} differs from {_RUNS[0]} rank 0"
