"""hvd.DistributedOptimizer and the broadcast helpers on weft.

N ranks that each take 1/N of a global batch end with the parameters of one
process that trains on the whole batch (each rank trains that reference copy
locally, without communication, and compares): several steps of SGD with
momentum and weight decay, and of Adam, for the default buckets, one bucket
per parameter, `groups`, `num_groups`, backward_passes_per_step=2,
gradient_predivide_factor, op=Sum, fp16 / bf16 compression (within a stated
bound), parameters without gradients on some ranks, and hooks firing in a
different order on each rank. broadcast_parameters / broadcast_optimizer_state
make ranks that started from different seeds identical. The example
(examples/horovod_train.py) follows, with 2 and 4 ranks, the loss curve of one
process with the same global batch, and runs under torchrun and weftrun.
"""
import copy
import os
import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

from hvd_ranks import run_hvd
from ranks import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

GLOBAL_BATCH = 12  # divisible by 2, 3 and 4
STEPS = 5


class Branches(nn.Module):
    """Two branches summed; `swap` builds them in the other order (so backward visits them in
    another order); `skip` leaves branch b out (its parameters get no gradient)."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.a = nn.Linear(16, 4)
        self.b = nn.Linear(16, 4)

    def forward(self, x, swap=False, skip=False):
        h = torch.tanh(self.inp(x))
        if skip:
            return self.a(h)
        return self.b(h) + self.a(h) if swap else self.a(h) + self.b(h)


def batch(step):
    g = torch.Generator().manual_seed(step)
    return torch.randn(GLOBAL_BATCH, 8, generator=g), torch.randn(GLOBAL_BATCH, 4, generator=g)


def make_optimizer(kind, params):
    if kind == "adam":
        return torch.optim.Adam(params, lr=0.01)
    return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=0.01)


def _train(rank, n, cfg):
    """Trains with DistributedOptimizer and, locally, the one-process reference; returns
    (max |difference|, the parameters)."""
    import weft.torch as hvd

    torch.manual_seed(0)
    model = Branches()
    reference = copy.deepcopy(model)
    ref_opt = make_optimizer(cfg.get("opt", "sgd"), reference.parameters())
    kwargs = dict(cfg.get("kwargs", {}))
    if kwargs.get("groups") == "list":
        kwargs["groups"] = [[model.a.weight, model.b.weight], [model.inp.weight, model.a.bias]]
    opt = hvd.DistributedOptimizer(make_optimizer(cfg.get("opt", "sgd"), model.parameters()),
                                   named_parameters=model.named_parameters(), **kwargs)
    passes = kwargs.get("backward_passes_per_step", 1)
    mse = nn.functional.mse_loss
    lo, hi = rank * GLOBAL_BATCH // n, (rank + 1) * GLOBAL_BATCH // n
    for step in range(STEPS):
        opt.zero_grad()
        ref_opt.zero_grad()
        skip_ranks = cfg.get("skip_ranks", ())
        for micro in range(passes):
            x, y = batch(100 * step + micro)
            swap = cfg.get("swap", False) and rank % 2 == 1
            mse(model(x[lo:hi], swap=swap, skip=rank in skip_ranks), y[lo:hi]).backward()
            if skip_ranks:
                # Gradients of branch b: averaged over all ranks, the skipping ones counting zero.
                for r in range(n):
                    out = reference(x[r * GLOBAL_BATCH // n:(r + 1) * GLOBAL_BATCH // n], skip=r in skip_ranks)
                    (mse(out, y[r * GLOBAL_BATCH // n:(r + 1) * GLOBAL_BATCH // n]) / n).backward()
            else:
                mse(reference(x), y).backward()
        if cfg.get("clip"):
            opt.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
            with opt.skip_synchronize():
                opt.step()
        else:
            opt.step()
        if kwargs.get("op") == hvd.Sum:
            for p in reference.parameters():
                p.grad *= n  # the reference steps on the sum of the ranks' (mean) gradients
        ref_opt.step()
    diff = max(float((p - q).abs().max()) for p, q in zip(model.parameters(), reference.parameters()))
    return diff, [p.detach().tolist() for p in model.parameters()]


CASES = {
    "default": ({}, {}, 1e-6),
    "adam": ({"opt": "adam"}, {}, 1e-6),
    "bucket per parameter, hooks in another order per rank": ({"swap": True}, {"WEFT_TORCH_BUCKET_MB": "0"}, 1e-6),
    "groups list": ({"kwargs": {"groups": "list"}}, {}, 1e-6),
    "num_groups=2": ({"kwargs": {"num_groups": 2}}, {}, 1e-6),
    "backward_passes_per_step=2": ({"kwargs": {"backward_passes_per_step": 2}}, {}, 1e-6),
    "gradient_predivide_factor=2": ({"kwargs": {"gradient_predivide_factor": 2.0}}, {}, 1e-6),
    "op=Sum": ({"kwargs": {"op": 1}}, {}, 1e-6),
    "synchronize, clip, skip_synchronize": ({"clip": True}, {}, 1e-6),
    "no gradients on rank 0": ({"skip_ranks": (0,)}, {"WEFT_TORCH_BUCKET_MB": "0"}, 1e-6),
    # 16-bit gradients: each step's update is off by up to 2^-8 (bf16) of the gradient;
    # after 5 steps of lr 0.1 with momentum that is well below 5e-3.
    "fp16": ({"kwargs": {"compression": "fp16"}}, {}, 5e-3),
    "bf16": ({"kwargs": {"compression": "bf16"}}, {}, 5e-3),
}


def _all_cases(rank, n):
    """Every case in turn on the same ranks (one start-up for all: they take ~1 s each)."""
    import weft.torch as hvd

    out = {}
    for case, (cfg, env, _) in CASES.items():
        cfg = copy.deepcopy(cfg)
        if "compression" in cfg.get("kwargs", {}):
            cfg["kwargs"]["compression"] = getattr(hvd.Compression, cfg["kwargs"]["compression"])
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # read when the DistributedOptimizer is built
        try:
            out[case] = _train(rank, n, cfg)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return out


@pytest.mark.parametrize("n", [2, 3])
def test_matches_one_process(n):
    res = run_hvd(_all_cases, n)
    failures = []
    for case, (_, _, tol) in CASES.items():
        for r in range(n):
            diff, params = res[r][case]
            if not diff <= tol:
                failures.append(f"{case}: rank {r} is {diff} from the one-process reference (tolerance {tol})")
            if params != res[0][case][1]:
                failures.append(f"{case}: rank {r}'s parameters differ from rank 0's")
    assert not failures, "\n".join(failures)


def _misuse(rank, n):
    import weft.torch as hvd

    model = nn.Linear(4, 2)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    model(torch.ones(3, 4)).sum().backward()
    errors = []
    try:
        opt.zero_grad()
    except AssertionError as e:
        errors.append(str(e))
    try:
        model(torch.ones(3, 4)).sum().backward()  # a second backward with backward_passes_per_step=1
    except AssertionError as e:
        errors.append(str(e))
    opt.step()
    # An LR scheduler made on the optimizer before it was wrapped: step() still averages.
    model = nn.Linear(4, 2)  # a fresh model: the first optimizer's hooks stay on the old one
    base = torch.optim.SGD(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(base, step_size=1, gamma=0.5)
    opt = hvd.DistributedOptimizer(base)
    before = model.bias.detach().clone()
    opt.zero_grad()
    (model(torch.ones(1, 4)).sum() * (rank + 1)).backward()  # bias gradient rank + 1
    opt.step()
    sched.step()
    moved = (before - model.bias.detach()).tolist()
    if moved != [(n + 1) / 2] * 2 or opt.param_groups[0]["lr"] != 0.5:
        errors.append(f"scheduler made before wrapping: moved {moved}, lr {opt.param_groups[0]['lr']}")
    return errors


def test_misuse_raises_as_horovod():
    for errors in run_hvd(_misuse, 2):
        assert len(errors) == 2, errors  # and the scheduler case added none
        assert "zero_grad() was called after loss.backward()" in errors[0]
        assert "more than backward_passes_per_step" in errors[1]


def _broadcast_state(rank, n):
    import weft.torch as hvd

    torch.manual_seed(10 + rank)  # every rank starts elsewhere
    model = Branches()
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (rank + 1), betas=(0.9, 0.99 - 0.01 * rank))
    if rank != 1:  # rank 1 (the root) and others have state; rank 0 has none yet
        pass
    if rank > 0:
        model(torch.randn(3, 8)).sum().backward()
        opt.step()
        opt.zero_grad()
    hvd.broadcast_parameters(model.state_dict(), root_rank=1)
    hvd.broadcast_optimizer_state(opt, root_rank=1)
    state = opt.state_dict()
    flat = {
        "params": [p.detach().tolist() for p in model.parameters()],
        "groups": [{k: v for k, v in g.items() if k != "params"} for g in state["param_groups"]],
        "state": {pid: {k: (v.tolist() if torch.is_tensor(v) else v) for k, v in s.items()}
                  for pid, s in state["state"].items()},
    }
    sgd = torch.optim.SGD(model.parameters(), lr=0.1 + rank, momentum=0.9)
    hvd.broadcast_optimizer_state(sgd, root_rank=0)  # no state anywhere yet: Horovod's zero step
    flat["sgd"] = [sgd.param_groups[0]["lr"], len(sgd.state_dict()["state"])]
    return flat


@pytest.mark.parametrize("n", [2, 3])
def test_broadcast_parameters_and_optimizer_state(n):
    res = run_hvd(_broadcast_state, n)
    for r in range(n):
        assert res[r]["params"] == res[1]["params"], f"rank {r}: parameters differ from the root's"
        assert res[r]["groups"] == res[1]["groups"], f"rank {r}: {res[r]['groups']} vs {res[1]['groups']}"
        assert res[r]["state"] == res[1]["state"], f"rank {r}: optimizer state differs from the root's"
        assert res[r]["sgd"] == [0.1, 6], res[r]["sgd"]
    assert res[1]["groups"][0]["lr"] == 0.02 and res[1]["groups"][0]["betas"] == (0.9, 0.98)


# ---- the example ------------------------------------------------------------

EXAMPLE_GLOBAL_BATCH, EXAMPLE_LR, EXAMPLE_STEPS = 64, 0.2, 30


def _example(rank, n):
    import horovod_train

    losses, weights = horovod_train.train(batch_size=EXAMPLE_GLOBAL_BATCH // n, lr=EXAMPLE_LR / n,
                                          steps=EXAMPLE_STEPS)
    return losses, sum(float(w.double().sum()) for w in weights)


def test_example_loss_curve_matches_one_process():
    """Same global batch (64) and learning rate (0.2): the rank-averaged loss of 2 and 4
    ranks follows the one-process curve within 1e-4 at every one of 30 steps (float
    rounding only: measured at most 5e-7 here)."""
    one = run_hvd(_example, 1)[0]
    assert one[0][-1] < one[0][0] - 0.05, f"the example does not learn: {one[0]}"
    for n in (2, 4):
        res = run_hvd(_example, n)
        for r in range(n):
            assert res[r] == res[0], f"{n} ranks: rank {r} reports other losses or weights than rank 0"
        worst = max(abs(a - b) for a, b in zip(res[0][0], one[0]))
        assert len(res[0][0]) == EXAMPLE_STEPS and worst < 1e-4, f"{n} ranks: loss {worst} from one process's"


def test_example_under_torchrun():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
           str(free_port()), os.path.join(ROOT, "examples", "horovod_train.py"), "--steps", "20"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 ranks, 20 steps" in out.stdout and "identical on every rank" in out.stdout, out.stdout


def test_bucket_plan():
    """make_buckets without processes: issue order and packing."""
    from weft.torch.optimizer import make_buckets

    ps = [torch.zeros(n) for n in (10, 20, 30, 40)]  # float32: 40, 80, 120, 160 bytes
    ids = lambda buckets: [[next(i for i, q in enumerate(ps) if q is p) for p in b] for b in buckets]  # noqa: E731
    # by size, reverse registration order: [3] (160 B), [2, 1] (200 B), [0]
    assert ids(make_buckets(ps, None, 200)) == [[3], [2, 1], [0]]
    assert ids(make_buckets(ps, None, 1 << 20)) == [[3, 2, 1, 0]]
    assert ids(make_buckets(ps, None, 0)) == [[3], [2], [1], [0]]
    # groups=N: N runs of consecutive parameters, the last run first
    assert ids(make_buckets(ps, 3, 0)) == [[3], [2], [0, 1]]
    # groups as lists: each list a bucket, the others alone, by their last parameter
    assert ids(make_buckets(ps, [[ps[0], ps[3]], [ps[1]]], 0)) == [[0, 3], [2], [1]]


def test_example_under_weftrun():
    """weftrun's environment (WEFT_* first, MASTER_ADDR/PORT for the store) starts hvd.init()."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "weft.launch", "-np", "2", sys.executable,
           os.path.join(ROOT, "examples", "horovod_train.py"), "--steps", "10"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 ranks, 10 steps" in out.stdout and "identical on every rank" in out.stdout, out.stdout


def test_example_under_mpirun():
    """Open MPI's mpirun, as a Horovod user starts a job: OMPI_COMM_WORLD_* give
    the ranks, the job id a store port, and hvd.init() needs nothing else."""
    mpirun = shutil.which("mpirun")
    if not mpirun:
        pytest.skip("mpirun (Open MPI) is not installed: apt-get install openmpi-bin")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "WEFT_RANK"):
        env.pop(k, None)
    cmd = [mpirun, "-np", "2", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none",
           "-x", "PYTHONPATH", "-x", "OMP_NUM_THREADS", sys.executable,
           os.path.join(ROOT, "examples", "horovod_train.py"), "--steps", "10"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 ranks, 10 steps" in out.stdout and "identical on every rank" in out.stdout, out.stdout
