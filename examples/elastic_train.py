"""Elastic training with Horovod's API on weft: workers may die, hang, or be added.

    weftrun -np 4 --min-np 2 --max-np 4 --host-discovery-script ./slots.sh \\
        python examples/elastic_train.py --steps 60

A worker killed (or stopped) in the middle of training does not end the job:
the survivors find out who is left, restore the last commit and go on in the
same processes; a worker that weftrun adds joins at the next commit and
receives the state. Synthetic data (no downloads): a linear regression
target learnt by a small MLP, each global batch split over the ranks there
are at that step. At the end each rank writes what it ends with (--out).
docs/elastic.md.
"""
import argparse
import hashlib
import json
import os
import time

import torch
import torch.nn.functional as F

import weft.torch as hvd


def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60, help="global batches to train")
    ap.add_argument("--batch", type=int, default=64, help="global batch size")
    ap.add_argument("--commit-every", type=int, default=5, help="commit the state every this many batches")
    ap.add_argument("--sleep", type=float, default=0.05, help="seconds of pretend work per batch")
    ap.add_argument("--out", help="directory for each rank's result (<pid>.json)")
    ap.add_argument("--hold-for-workers", type=int, default=0, metavar="N",
                    help="each commit waits (up to --hold-max-s) until the job has N workers: "
                         "to watch a worker weftrun adds join before training ends")
    ap.add_argument("--hold-max-s", type=float, default=120.0, help="the longest one commit holds")
    return ap.parse_args()


def global_batch(step, size, features=16):
    """The step's global batch, the same on every rank (seeded by the step)."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(size, features, generator=g)
    w = torch.arange(features, dtype=torch.float32) / features
    y = (x @ w).unsqueeze(1) + 0.01 * torch.randn(size, 1, generator=g)
    return x, y


def hold(state, args, poll_s=0.2):
    """Waits at a commit for the job to reach --hold-for-workers workers.
    Every rank polls the same number of times (the count, not a clock,
    bounds it), so their collectives match; a waiting joiner raises
    HostsUpdatedInterrupt, which lets it in and restarts train()."""
    for _ in range(int(args.hold_max_s / poll_s)):
        if hvd.size() >= args.hold_for_workers:
            return
        state.check_host_updates()
        time.sleep(poll_s)


def main():
    args = parse()
    hvd.init()
    print(f"worker pid {os.getpid()} rank {hvd.rank()} of {hvd.size()}", flush=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                   named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, opt, batch=0, losses=[])
    started = time.monotonic()

    @hvd.elastic.run
    def train(state):
        while state.batch < args.steps:
            x, y = global_batch(state.batch, args.batch)
            rank, size = hvd.rank(), hvd.size()
            xs, ys = x[rank::size], y[rank::size]  # this rank's share at this step
            opt.zero_grad()
            loss = F.mse_loss(model(xs), ys)
            loss.backward()
            opt.step()
            avg = hvd.allreduce(loss.detach(), name="loss").item()
            state.batch += 1
            state.losses.append(avg)
            if rank == 0:
                print(f"batch {state.batch} size {size} loss {avg:.5f}", flush=True)
            if state.batch % args.commit_every == 0:
                state.commit()
                hold(state, args)
            time.sleep(args.sleep)

    train(state)
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    result = {"pid": os.getpid(), "rank": hvd.rank(), "size": hvd.size(), "batches": state.batch,
              "params": digest, "final_loss": state.losses[-1], "recoveries": hvd.elastic.recoveries(),
              "seconds": time.monotonic() - started}
    print(f"done: rank {hvd.rank()} of {hvd.size()} params {digest[:16]} recoveries {result['recoveries']}",
          flush=True)
    if args.out:
        with open(os.path.join(args.out, f"{os.getpid()}.json"), "w") as f:
            json.dump(result, f)
    hvd.shutdown()


if __name__ == "__main__":
    main()
