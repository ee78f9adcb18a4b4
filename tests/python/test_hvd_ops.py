"""weft.torch's Horovod API, every function on 2, 3 and 4 ranks started as a
launcher would (hvd.init() from the environment), each result checked against
what the rank computes locally from every rank's inputs."""
import pytest
import torch

from hvd_ranks import run_hvd
from ranks import run_ranks


def data(r, shape=(3, 4), dtype=torch.float32):
    """Rank r's input: distinct per rank, reproducible anywhere."""
    g = torch.Generator().manual_seed(100 + r)
    return (torch.randn(shape, generator=g) * 4).round().to(dtype)


def _basics(rank, n):
    import weft.torch as hvd

    assert hvd.is_initialized() and hvd.weft_built() and not hvd.mpi_built() and not hvd.nccl_built()
    return (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), hvd.cross_rank(), hvd.cross_size())


@pytest.mark.parametrize("launcher", ["torchrun", "openmpi", "weftrun", "slurm"])
def test_init_from_launcher_env(launcher):
    res = run_hvd(_basics, 3, launcher=launcher)
    assert res == [(r, 3, r, 3, 0, 1) for r in range(3)], res


def _reductions(rank, n):
    import weft.torch as hvd

    xs = [data(r) for r in range(n)]
    x = xs[rank].clone()
    stack = torch.stack(xs)
    checks = {
        "average": (hvd.allreduce(x), stack.mean(0)),
        "sum": (hvd.allreduce(x, op=hvd.Sum), stack.sum(0)),
        "legacy average=False": (hvd.allreduce(x, average=False), stack.sum(0)),
        "min": (hvd.allreduce(x, op=hvd.Min), stack.min(0).values),
        "max": (hvd.allreduce(x, op=hvd.Max), stack.max(0).values),
        "product": (hvd.allreduce(x, op=hvd.Product), stack.prod(0)),
        "scaled": (hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0),
                   stack.sum(0) * 1.5),
        "int sum": (hvd.allreduce(x.to(torch.int64), op=hvd.Sum), stack.sum(0).to(torch.int64)),
        "fp16": (hvd.allreduce(x, compression=hvd.Compression.fp16), stack.mean(0)),
        "bf16": (hvd.allreduce(x, compression=hvd.Compression.bf16), stack.mean(0)),
    }
    assert torch.equal(x, xs[rank]), "allreduce changed its input"
    y = x.clone()
    assert hvd.allreduce_(y, op=hvd.Sum) is y
    checks["in place"] = (y, stack.sum(0))
    grouped = hvd.grouped_allreduce([x, 2 * x[0]], op=hvd.Sum)
    checks["grouped 0"] = (grouped[0], stack.sum(0))
    checks["grouped 1"] = (grouped[1], 2 * stack.sum(0)[0])
    g = [x.clone(), x[:1].clone().double()]
    hvd.grouped_allreduce_(g)
    checks["grouped_ 0"] = (g[0], stack.mean(0))
    checks["grouped_ 1"] = (g[1], stack.mean(0)[:1].double())
    # Differentiable, as Horovod's: d(sum(allreduce(w)))/dw = 1 with Average.
    w = x.clone().requires_grad_()
    hvd.allreduce(w).sum().backward()
    checks["grad"] = (w.grad, torch.ones_like(x))
    # fp16 / bf16 round the inputs and the sum to 11 / 8 significant bits: within 2^-7 relative.
    tol = {"fp16": 2 ** -7, "bf16": 2 ** -7}
    bad = [k for k, (got, want) in checks.items()
           if got.dtype != want.dtype
           or not torch.allclose(got.double(), want.double(), rtol=tol.get(k, 1e-6), atol=tol.get(k, 1e-5))]
    return bad


def _movement(rank, n):
    import weft.torch as hvd

    bad = []
    # allgather, first dimension differing by rank (rank r has r + 1 rows; 0-d too)
    parts = [data(r, (r + 1, 2)) for r in range(n)]
    got = hvd.allgather(parts[rank])
    if not torch.equal(got, torch.cat(parts)):
        bad.append("allgather uneven")
    if not torch.equal(hvd.allgather(torch.tensor(rank)), torch.arange(n)):
        bad.append("allgather 0-d")
    if hvd.allgather(torch.empty(0, 3)).shape != (0, 3):
        bad.append("allgather empty")
    # broadcast from every root, new tensor and in place
    for root in range(n):
        x = data(rank)
        if not torch.equal(hvd.broadcast(x, root), data(root)) or not torch.equal(x, data(rank)):
            bad.append(f"broadcast root {root}")
        hvd.broadcast_(x, root)
        if not torch.equal(x, data(root)):
            bad.append(f"broadcast_ root {root}")
    # alltoall: rank r sends (r + d) % 3 rows to rank d; row values say who sent them
    splits = [[(r + d) % 3 for d in range(n)] for r in range(n)]
    mine = torch.cat([torch.full((splits[rank][d], 2), float(100 * rank + d)) for d in range(n)])
    out, received = hvd.alltoall(mine, splits=splits[rank])
    want = torch.cat([torch.full((splits[s][rank], 2), float(100 * s + rank)) for s in range(n)])
    if not torch.equal(out, want) or received.tolist() != [splits[s][rank] for s in range(n)]:
        bad.append(f"alltoall splits: {out.tolist()} {received.tolist()}")
    even = torch.arange(2 * n) + 10 * rank
    got = hvd.alltoall(even)
    if not torch.equal(got, torch.tensor([10 * s + 2 * rank + i for s in range(n) for i in range(2)])):
        bad.append("alltoall even")
    # reducescatter: 2n + 1 rows, so rank 0 gets one row more (Horovod's split)
    xs = [data(r, (2 * n + 1, 3)) for r in range(n)]
    counts = [2 + (1 if r == 0 else 0) for r in range(n)]
    start = sum(counts[:rank])
    total = torch.stack(xs).sum(0)
    if not torch.allclose(hvd.reducescatter(xs[rank], op=hvd.Sum), total[start: start + counts[rank]]):
        bad.append("reducescatter sum uneven")
    if not torch.allclose(hvd.reducescatter(xs[rank]), total[start: start + counts[rank]] / n):
        bad.append("reducescatter average")
    ys = [data(r, (2 * n, 3)) for r in range(n)]
    if not torch.equal(hvd.reducescatter(ys[rank], op=hvd.Max), torch.stack(ys).max(0).values[2 * rank: 2 * rank + 2]):
        bad.append("reducescatter max even")
    # grouped: one check for the list
    ga = hvd.grouped_allgather([parts[rank], parts[rank][:, :1].double()])
    if not (torch.equal(ga[0], torch.cat(parts)) and torch.equal(ga[1], torch.cat(parts)[:, :1].double())):
        bad.append("grouped_allgather")
    gr = hvd.grouped_reducescatter([xs[rank], ys[rank]], op=hvd.Sum)
    if not (torch.allclose(gr[0], total[start: start + counts[rank]])
            and torch.allclose(gr[1], torch.stack(ys).sum(0)[2 * rank: 2 * rank + 2])):
        bad.append("grouped_reducescatter")
    return bad


def _async_objects(rank, n):
    import weft.torch as hvd

    bad = []
    xs = [data(r) for r in range(n)]
    x = xs[rank].clone()
    handles = [hvd.allreduce_async(x, op=hvd.Sum, name="a"),
               hvd.allreduce_async_(x.clone(), name="b"),
               hvd.allgather_async(x, name="c"),
               hvd.broadcast_async(x, 0, name="d"),
               hvd.broadcast_async_(x.clone(), n - 1, name="e"),
               hvd.grouped_allreduce_async([x, x], op=hvd.Max, name="f"),
               hvd.grouped_allreduce_async_([x.clone()], op=hvd.Min, name="g"),
               hvd.alltoall_async(torch.arange(n) * (rank + 1), name="h"),
               hvd.reducescatter_async(torch.ones(n, 2) * rank, op=hvd.Sum, name="i")]
    stack = torch.stack(xs)
    hvd.synchronize(handles[-1])  # out of order on purpose
    while not hvd.poll(handles[0]):
        pass
    results = [hvd.synchronize(h) for h in handles[:-1]]
    want = [stack.sum(0), stack.mean(0), torch.cat(xs), xs[0], xs[n - 1]]
    for i, (got, w) in enumerate(zip(results, want)):
        if not torch.allclose(got, w):
            bad.append(f"async {i}")
    if not all(torch.equal(t, stack.max(0).values) for t in results[5]):
        bad.append("grouped async")
    if not torch.equal(results[6][0], stack.min(0).values):
        bad.append("grouped async_")
    out, received = results[7]
    if not torch.equal(out, torch.tensor([rank * (s + 1) for s in range(n)])) or received.tolist() != [1] * n:
        bad.append("alltoall async")
    if hvd.synchronize(handles[0]) is not None:
        bad.append("synchronize of a finished handle should give None")
    # objects
    obj = {"rank": rank, "items": list(range(rank))}
    if hvd.broadcast_object(obj, root_rank=n - 1) != {"rank": n - 1, "items": list(range(n - 1))}:
        bad.append("broadcast_object")
    if hvd.broadcast_object(obj if rank == 0 else None) != {"rank": 0, "items": []}:
        bad.append("broadcast_object from rank 0, None elsewhere")
    if hvd.allgather_object(obj) != [{"rank": r, "items": list(range(r))} for r in range(n)]:
        bad.append("allgather_object")
    hvd.barrier()
    last = hvd.join()
    if not 0 <= last < n:
        bad.append(f"join returned {last}")
    return bad


@pytest.mark.parametrize("n", [2, 3, 4])
def test_reductions(n):
    assert run_hvd(_reductions, n) == [[]] * n


@pytest.mark.parametrize("n", [2, 3, 4])
def test_movement(n):
    assert run_hvd(_movement, n, launcher="openmpi") == [[]] * n


@pytest.mark.parametrize("n", [2, 3, 4])
def test_async_handles_objects_barrier_join(n):
    assert run_hvd(_async_objects, n) == [[]] * n


def test_single_process_without_launcher():
    """No launcher variables: one process, size 1, as Horovod."""
    import os
    import subprocess
    import sys

    launcher = ("RANK", "WORLD_SIZE", "OMPI_", "PMI_", "SLURM_", "WEFT_RANK", "MASTER_", "WEFT_ROOT_ADDR")
    env = {k: v for k, v in os.environ.items() if not k.startswith(launcher)}
    code = ("import torch, weft.torch as hvd; hvd.init(); "
            "print(hvd.size(), hvd.rank(), hvd.allreduce(torch.ones(2)).tolist(), "
            "hvd.allgather(torch.ones(1)).tolist()); "
            "hvd.shutdown(); assert not hvd.is_initialized(); hvd.init(); hvd.barrier(); hvd.shutdown()")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "1 0 [1.0, 1.0] [1.0]"


def _adopt(rank, n):
    """The program made the default group itself (run_ranks did): hvd.init() adopts it,
    hvd.shutdown() leaves it to the program."""
    import torch.distributed as dist

    import weft.torch as hvd

    hvd.init()
    out = (hvd.rank(), hvd.size(), hvd.local_size(), hvd.allreduce(torch.tensor([float(rank)]), op=hvd.Sum).item())
    hvd.shutdown()
    dist.all_reduce(torch.ones(1))  # still the program's
    return out + (dist.is_initialized(),)


def test_init_adopts_the_program_group():
    assert run_ranks(_adopt, 3) == [(r, 3, 3, 3.0, True) for r in range(3)]


def _sync_batch_norm(rank, n):
    """SyncBatchNorm on each rank's share of a batch == BatchNorm2d on the whole batch:
    output, input gradient, weight gradient (summed over ranks) and running statistics."""
    import weft.torch as hvd

    g = torch.Generator().manual_seed(7)
    x = torch.randn(4 * n, 3, 5, 5, generator=g) * 2 + 1
    w = torch.randn(4 * n, 3, 5, 5, generator=g)
    ref = torch.nn.BatchNorm2d(3)
    sync = hvd.SyncBatchNorm(3)
    with torch.no_grad():
        for m in (ref, sync):
            m.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
            m.bias.copy_(torch.tensor([0.0, -1.0, 0.3]))
    xr = x.clone().requires_grad_()
    (ref(xr) * w).sum().backward()
    lo, hi = 4 * rank, 4 * (rank + 1)
    xs = x[lo:hi].clone().requires_grad_()
    out = sync(xs)
    (out * w[lo:hi]).sum().backward()
    wgrad = hvd.allreduce(sync.weight.grad, op=hvd.Sum)
    checks = {
        "forward": torch.allclose(out.detach(), torch.nn.functional.batch_norm(
            x, None, None, ref.weight.detach(), ref.bias.detach(), True)[lo:hi], atol=1e-5),
        "input grad": torch.allclose(xs.grad, xr.grad[lo:hi], atol=1e-4),
        "weight grad": torch.allclose(wgrad, ref.weight.grad, atol=1e-4),
        "running mean": torch.allclose(sync.running_mean, ref.running_mean, atol=1e-6),
        "running var": torch.allclose(sync.running_var, ref.running_var, atol=1e-5),
    }
    sync.eval()
    checks["eval"] = torch.allclose(sync(x), ref.eval()(x), atol=1e-5)
    return [k for k, ok in checks.items() if not ok]


@pytest.mark.parametrize("n", [2, 3])
def test_sync_batch_norm(n):
    assert run_hvd(_sync_batch_norm, n) == [[]] * n


def _join_uneven(rank, n):
    """Rank r has r + 1 steps of data, then joins: the ranks still working reduce with the
    joined ones standing in with zeros (single and grouped allreduces, barriers)."""
    import weft.torch as hvd

    bad = []
    for step in range(rank + 1):
        want = sum(r + 1 for r in range(step, n))  # the ranks not joined yet
        got = hvd.allreduce(torch.full((2,), float(rank + 1)), op=hvd.Sum, name=f"step.{step}")
        if got.tolist() != [want] * 2:
            bad.append(f"step {step}: {got.tolist()} != {want}")
        grouped = hvd.grouped_allreduce([torch.ones(3) * (rank + 1), torch.ones(1, dtype=torch.float64)])
        if not (torch.allclose(grouped[0], torch.full((3,), want / n))
                and torch.allclose(grouped[1], torch.tensor([(n - step) / n], dtype=torch.float64))):
            bad.append(f"step {step}: grouped {grouped[0].tolist()} {grouped[1].tolist()}")
        hvd.barrier()
    last = hvd.join()
    if last != n - 1:
        bad.append(f"join returned {last}")
    if hvd.allreduce(torch.ones(1), op=hvd.Sum).item() != n:  # everyone is back
        bad.append("allreduce after join")
    return bad


@pytest.mark.parametrize("n", [2, 3])
def test_join_with_uneven_data(n):
    assert run_hvd(_join_uneven, n) == [[]] * n


def _join_optimizer(rank, n):
    """DistributedOptimizer with 1 + rank batches per rank: at the last step only rank n - 1
    is left, and its gradient is averaged with the joined ranks' zeros: grad / n."""
    import weft.torch as hvd

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1, bias=False)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0))
    x = torch.ones(2, 3)
    before = None
    for _ in range(1 + rank):
        before = model.weight.detach().clone()
        opt.zero_grad()
        model(x).sum().backward()  # gradient: 2 for every weight
        opt.step()
    hvd.join()
    return (before - model.weight.detach()).tolist()


def test_join_under_distributed_optimizer():
    n = 3
    res = run_hvd(_join_optimizer, n)
    # the step of rank r: ranks r .. n-1 still have data, each gradient 2, divided by n
    for r in range(n):
        assert res[r][0] == pytest.approx([2.0 * (n - r) / n] * 3, abs=1e-6), res


def _join_refuses_allgather(rank, n):
    import weft.torch as hvd

    try:
        if rank == 0:
            hvd.join()
        else:
            hvd.allgather(torch.ones(1))
    except RuntimeError as e:
        return "only allreduce, grouped_allreduce and barrier" in str(e)
    return False


def test_join_refuses_allgather_on_every_rank():
    assert run_hvd(_join_refuses_allgather, 2) == [True, True]
