"""What weft.torch's consistency check costs (docs/horovod.md quotes its output).

    PYTHONPATH=<build>/python:python python tests/python/hvd_check_cost.py [ranks] [rounds]

Runs, on forked ranks, with WEFT_TORCH_CHECK=1 and =0 alternately (`rounds`
times each; the median and the best kept): hvd.allreduce of 16 B and of 4 MiB, a grouped
allreduce of 20 tensors, and a DistributedOptimizer step of the example's CNN
(examples/horovod_train.py). Prints microseconds per call and the difference.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

from hvd_ranks import run_hvd  # noqa: E402


def _timed(fn, iters):
    fn()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters * 1e6


def _measure(rank, n):
    import torch
    import torch.nn.functional as F

    import horovod_train
    import weft.torch as hvd

    small, big = torch.ones(4), torch.ones(1 << 20)
    group = [torch.ones(256) for _ in range(20)]
    model = horovod_train.Net()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters())
    x, y = torch.randn(16, 1, 28, 28), torch.randint(0, 10, (16,))

    def step():
        opt.zero_grad()
        F.nll_loss(model(x), y).backward()
        opt.step()

    return {
        "allreduce 16 B": _timed(lambda: hvd.allreduce(small, name="s"), 300),
        "allreduce 4 MiB": _timed(lambda: hvd.allreduce(big, name="b"), 30),
        "grouped_allreduce 20 x 1 KiB": _timed(lambda: hvd.grouped_allreduce(group, name="g"), 200),
        "optimizer step (example CNN, batch 16)": _timed(step, 50),
    }


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    results = {"1": [], "0": []}
    for _ in range(rounds):
        for check in ("1", "0"):
            results[check].append(run_hvd(_measure, n, env={"WEFT_TORCH_CHECK": check})[0])
    print(f"{n} ranks, {rounds} runs each, microseconds per call (rank 0): median (best)")
    print(f"{'':40s} {'check on':>14s} {'check off':>14s} {'cost':>12s}")
    for what in results["1"][0]:
        on = [r[what] for r in results["1"]]
        off = [r[what] for r in results["0"]]
        cells = [f"{statistics.median(v):6.0f} ({min(v):5.0f})" for v in (on, off)]
        cost = f"{statistics.median(on) - statistics.median(off):5.0f} ({min(on) - min(off):4.0f})"
        print(f"{what:40s} {cells[0]:>14s} {cells[1]:>14s} {cost:>12s}")


if __name__ == "__main__":
    main()
