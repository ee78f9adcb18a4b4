"""What weft.torch's consistency check costs (docs/horovod.md quotes its output).

    PYTHONPATH=<build>/python:python python tests/python/hvd_check_cost.py [ranks] [blocks]

On forked ranks, each measurement alternates blocks of calls with the check
on and off (WEFT_TORCH_CHECK is read at each call; every rank switches at
the same call), so both see the same machine load: hvd.allreduce of 16 B
and of 4 MiB, a grouped allreduce of 20 tensors, and a DistributedOptimizer
step of the example's CNN (examples/horovod_train.py, one bucket). Prints
microseconds per call, the median and the best block of each.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

from hvd_ranks import run_hvd  # noqa: E402


def _blocks(fn, iters, blocks):
    """{check: [microseconds per call of each block]}, blocks alternating on / off."""
    out = {"1": [], "0": []}
    fn()
    for _ in range(blocks):
        for check in ("1", "0"):
            os.environ["WEFT_TORCH_CHECK"] = check
            start = time.perf_counter()
            for _ in range(iters):
                fn()
            out[check].append((time.perf_counter() - start) / iters * 1e6)
    os.environ["WEFT_TORCH_CHECK"] = "1"
    return out


def _measure(rank, n, blocks):
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
        "allreduce 16 B": _blocks(lambda: hvd.allreduce(small, name="s"), 100, blocks),
        "allreduce 4 MiB": _blocks(lambda: hvd.allreduce(big, name="b"), 10, blocks),
        "grouped_allreduce 20 x 1 KiB": _blocks(lambda: hvd.grouped_allreduce(group, name="g"), 50, blocks),
        "optimizer step (example CNN, batch 16)": _blocks(step, 20, blocks),
    }


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    blocks = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    res = run_hvd(lambda rank, n: _measure(rank, n, blocks), n, timeout=600)[0]
    print(f"{n} ranks, {blocks} blocks each, microseconds per call (rank 0): median (best)")
    print(f"{'':40s} {'check on':>14s} {'check off':>14s} {'cost':>12s}")
    for what, v in res.items():
        on, off = v["1"], v["0"]
        cells = [f"{statistics.median(x):6.0f} ({min(x):5.0f})" for x in (on, off)]
        cost = f"{statistics.median(on) - statistics.median(off):5.0f} ({min(on) - min(off):4.0f})"
        print(f"{what:40s} {cells[0]:>14s} {cells[1]:>14s} {cost:>12s}")


if __name__ == "__main__":
    main()
