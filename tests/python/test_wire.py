"""The DDP comm hook of weft/torch/hooks.py (docs/compression.md): each
gradient bucket averaged with a bf16 / fp16 wire and float32 accumulation.
Checked on 2 ranks over tcp: every averaged gradient within the stated bound
of the exact average (from every rank's local gradients, gathered), the same
bits on every rank, and training that stays close to the uncompressed run.
"""
import os
import sys

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ranks import run_ranks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import ddp_train  # noqa: E402

TCP = {"WEFT_TRANSPORTS": "tcp", "WEFT_SOCKET_IFNAME": "lo"}
UNIT = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}


def _one_step(wire):
    def fn(rank, n):
        from weft.torch.hooks import WireState, wire_allreduce_hook

        torch.set_num_threads(1)
        model = DDP(ddp_train.make_model())
        seen = []

        def hook(state, bucket):
            local = bucket.buffer().clone()
            fut = wire_allreduce_hook(state, bucket)
            return fut.then(lambda f: seen.append((local, f.value().clone())) or f.value())

        model.register_comm_hook(WireState(wire), hook)
        x, y = next(ddp_train.batches(rank, 1))
        nn.functional.mse_loss(model(x), y).backward()
        out = []
        for local, avg in seen:
            everyone = [torch.empty_like(local) for _ in range(n)]
            dist.all_gather(everyone, local)
            stack = torch.stack(everyone).double()
            exact = stack.sum(0) / n
            mag = stack.abs().sum(0) / n
            out.append((avg.tolist(), exact.tolist(), mag.tolist()))
        return out

    return fn


@pytest.mark.parametrize("wire", ["bf16", "fp16"])
def test_hook_averages_within_the_bound_and_ranks_agree(wire):
    n = 2
    res = run_ranks(_one_step(wire), n, env=TCP)
    u = UNIT[wire]
    rel = (1 + u) ** n * (1 + 2.0 ** -24) ** (n + 1) - 1
    assert len(res[0]) >= 1, "the hook never ran"
    for b, (avg, exact, mag) in enumerate(res[0]):
        avg, exact, mag = torch.tensor(avg).double(), torch.tensor(exact), torch.tensor(mag)
        floor = n * 2.0 ** -38 * float(mag.max()) if wire == "fp16" else 0.0
        err = (avg - exact).abs()
        bound = rel * mag + floor
        assert bool((err <= bound).all()), f"bucket {b}: max error {float((err - bound).max())} over"
        assert not torch.equal(avg, exact.float().double()), "the bucket was not compressed"
        for r in range(1, n):
            assert torch.equal(torch.tensor(res[r][b][0]), torch.tensor(res[0][b][0])), \
                f"rank {r} averaged bucket {b} differently"


def _train(wire):
    def fn(rank, n):
        from weft.torch.hooks import WireState, wire_allreduce_hook

        torch.set_num_threads(1)
        model = DDP(ddp_train.make_model())
        if wire:
            model.register_comm_hook(WireState(wire), wire_allreduce_hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        loss = torch.tensor(0.0)
        for x, y in ddp_train.batches(rank, 15):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        return loss.item(), [p.detach().clone().tolist() for p in model.module.parameters()]

    return fn


def test_training_with_the_hook_stays_close_to_uncompressed():
    plain = run_ranks(_train(None), 2, env=TCP)
    for wire, tol in (("bf16", 2e-2), ("fp16", 3e-3)):
        comp = run_ranks(_train(wire), 2, env=TCP)
        for a, b in zip(comp[0][1], plain[0][1]):
            ta, tb = torch.tensor(a), torch.tensor(b)
            assert torch.allclose(ta, tb, atol=tol, rtol=0), f"{wire}: max diff {(ta - tb).abs().max()}"
        for a, b in zip(comp[1][1], comp[0][1]):
            assert torch.equal(torch.tensor(a), torch.tensor(b)), f"{wire}: ranks' weights differ"
        assert abs(comp[0][0] - plain[0][0]) < 0.1 * max(plain[0][0], 1e-3) + tol
