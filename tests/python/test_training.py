"""Training on weft: DDP matches gloo (bitwise with 2 ranks, 1e-5 with 3), an
FSDP2 (fully_shard) model trains, and the torchrun example runs."""
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

from ranks import free_port, run_ranks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import ddp_train  # noqa: E402


def _ddp(rank, n):
    torch.set_num_threads(1)
    loss, weights = ddp_train.train(steps=15)
    return loss, [w.tolist() for w in weights]


@pytest.mark.parametrize("n,tol", [(2, 0.0), (3, 1e-5)])
def test_ddp_matches_gloo(n, tol):
    weft = run_ranks(_ddp, n, backend="weft")
    gloo = run_ranks(_ddp, n, backend="gloo")
    for r in range(n):
        for a, b in zip(weft[r][1], gloo[r][1]):
            ta, tb = torch.tensor(a), torch.tensor(b)
            if tol == 0:
                assert torch.equal(ta, tb), f"rank {r}: weights differ from gloo's (max {((ta - tb).abs().max())})"
            else:
                assert torch.allclose(ta, tb, atol=tol, rtol=0), f"rank {r}: max diff {(ta - tb).abs().max()}"
        # every rank holds the same weights
        for a, b in zip(weft[r][1], weft[0][1]):
            assert torch.equal(torch.tensor(a), torch.tensor(b))


def _fsdp2(rank, n):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.set_num_threads(1)
    mesh = init_device_mesh("cpu", (n,))
    model = ddp_train.make_model()
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for x, y in ddp_train.batches(rank, 10):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    full = [p.full_tensor().tolist() for p in model.parameters()]
    return losses, full


def test_fsdp2_step_runs_and_ranks_agree():
    res = run_ranks(_fsdp2, 2)
    losses, full0 = res[0]
    assert losses[-1] < losses[0], f"loss did not fall: {losses}"
    assert res[1][1] == full0, "the unsharded weights differ between ranks"


def test_torchrun_example():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    port = free_port()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(port), os.path.join(ROOT, "examples", "ddp_train.py"), "--steps", "20"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "backend weft, 2 ranks" in out.stdout and "identical on every rank" in out.stdout, out.stdout
