"""Data-parallel training on weft: a small MLP under DistributedDataParallel.

    torchrun --nproc-per-node 2 examples/ddp_train.py            # backend weft
    torchrun --nproc-per-node 2 examples/ddp_train.py --backend gloo

With weft installed (pip install .), init_process_group("weft") needs no
import: torch finds the backend through its entry point. Every rank trains
on its own shard of a synthetic regression problem; at the end rank 0
prints the loss and a checksum of the weights, which is the same on every
rank (DDP keeps them in step) and the same as with gloo.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def batches(rank, steps, batch=64):
    g = torch.Generator().manual_seed(1000 + rank)
    w = torch.linspace(-1, 1, 32)
    for _ in range(steps):
        x = torch.randn(batch, 32, generator=g)
        yield x, (x @ w).unsqueeze(1) + 0.01 * torch.randn(batch, 1, generator=g)


def train(steps=20, lr=0.05):
    """Trains on the current default group; returns (last loss, weights)."""
    rank = dist.get_rank()
    model = DDP(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss = torch.tensor(0.0)
    for x, y in batches(rank, steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return loss.item(), [p.detach().clone() for p in model.module.parameters()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="weft")
    ap.add_argument("--steps", type=int, default=50)
    args = ap.parse_args()
    dist.init_process_group(args.backend)  # env:// from torchrun
    loss, weights = train(args.steps)
    checksum = sum(float(w.double().sum()) for w in weights)
    sums = [None] * dist.get_world_size()
    dist.all_gather_object(sums, checksum)
    if dist.get_rank() == 0:
        same = all(s == sums[0] for s in sums)
        print(f"backend {dist.get_backend()}, {dist.get_world_size()} ranks, {args.steps} steps: "
              f"loss {loss:.6f}, weight checksum {checksum:.10f}, "
              f"{'identical on every rank' if same else 'DIFFERENT across ranks'}")
        if not same:
            raise SystemExit(1)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
