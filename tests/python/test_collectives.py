"""Every torch.distributed call on backend "weft", 2 and 3 ranks as
processes, each result checked element by element against what the ranks'
inputs make it."""
import pytest
import torch
import torch.distributed as dist

from ranks import run_ranks

SIZES = [2, 3]
RED_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
              torch.uint8, torch.int32, torch.int64]


def _reductions(rank, n):
    failures = []
    for dt in RED_DTYPES:
        for op, ref in [(dist.ReduceOp.SUM, lambda xs: sum(xs)),
                        (dist.ReduceOp.PRODUCT, lambda xs: torch.stack(xs).prod(0)),
                        (dist.ReduceOp.MIN, lambda xs: torch.stack(xs).min(0).values),
                        (dist.ReduceOp.MAX, lambda xs: torch.stack(xs).max(0).values)]:
            xs = [(torch.arange(7) % 3 + r + 1).to(dt) for r in range(n)]
            t = xs[rank].clone()
            dist.all_reduce(t, op=op)
            want = ref([x.to(torch.float64) for x in xs]).to(dt)
            if not torch.equal(t, want):
                failures.append(f"all_reduce {op} {dt}: {t.tolist()} != {want.tolist()}")
    # AVG on floats, PREMUL_SUM with a number and a tensor factor
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    if not torch.allclose(t, torch.full((5,), (n + 1) / 2)):
        failures.append(f"AVG: {t.tolist()}")
    for factor in (0.5, torch.tensor([3.0])):
        t = torch.full((4,), float(rank + 1))
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
        f = 0.5 if isinstance(factor, float) else 3.0
        if not torch.allclose(t, torch.full((4,), f * n * (n + 1) / 2)):
            failures.append(f"PREMUL_SUM {factor}: {t.tolist()}")
    # bitwise on every integer dtype and bool (weft's BAND/BOR/BXOR kernels):
    # all_reduce, reduce to the last rank, reduce_scatter_tensor
    for dt in [torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool]:
        xs = [((torch.arange(3 * n) * 5 + 3 * r) % 7 > 2) if dt == torch.bool
              else ((torch.arange(3 * n) * 37 + 0b1100 + (1 << r)) % 120).to(dt) for r in range(n)]
        for op, fold in [(dist.ReduceOp.BAND, torch.bitwise_and), (dist.ReduceOp.BOR, torch.bitwise_or),
                         (dist.ReduceOp.BXOR, torch.bitwise_xor)]:
            want = xs[0]
            for x in xs[1:]:
                want = fold(want, x)
            t = xs[rank].clone()
            dist.all_reduce(t, op=op)
            if not torch.equal(t, want):
                failures.append(f"all_reduce {op} {dt}: {t.tolist()} != {want.tolist()}")
            t = xs[rank].clone()
            dist.reduce(t, n - 1, op=op)
            if not torch.equal(t, want if rank == n - 1 else xs[rank]):
                failures.append(f"reduce {op} {dt}: {t.tolist()}")
            out = torch.empty(3, dtype=dt)
            dist.reduce_scatter_tensor(out, xs[rank].clone(), op=op)
            if not torch.equal(out, want[3 * rank:3 * rank + 3]):
                failures.append(f"reduce_scatter_tensor {op} {dt}: {out.tolist()}")
    t = torch.ones(4)
    try:
        dist.all_reduce(t, op=dist.ReduceOp.BXOR)
        failures.append("BXOR of a float tensor was accepted")
    except Exception as e:  # noqa: BLE001
        if "integer" not in str(e) or not torch.equal(t, torch.ones(4)):
            failures.append(f"BXOR of a float tensor: {e}; {t.tolist()}")
    b = torch.tensor([rank == 0, False, True])
    dist.all_reduce(b)  # SUM of bool: OR
    if b.tolist() != [True, False, True]:
        failures.append(f"bool SUM: {b.tolist()}")
    b = torch.tensor([rank == 0, True])
    dist.all_reduce(b, op=dist.ReduceOp.PRODUCT)  # AND
    if b.tolist() != [False, True]:
        failures.append(f"bool PRODUCT: {b.tolist()}")
    # complex by pairs
    c = torch.tensor([1 + 2j, rank * 1j], dtype=torch.complex64)
    dist.all_reduce(c)
    want = torch.tensor([n * (1 + 2j), 1j * n * (n - 1) / 2], dtype=torch.complex64)
    if not torch.allclose(c, want):
        failures.append(f"complex SUM: {c.tolist()}")
    # reduce to every root; non-roots keep their input
    for root in range(n):
        t = torch.full((6,), float(rank))
        dist.reduce(t, root, op=dist.ReduceOp.MAX)
        want = float(n - 1) if rank == root else float(rank)
        if not torch.equal(t, torch.full((6,), want)):
            failures.append(f"reduce root {root}: {t.tolist()}")
    # non-contiguous: a transposed view reduced in place
    m = (torch.arange(12, dtype=torch.float32).view(3, 4) + rank).t()
    dist.all_reduce(m)
    want = (torch.arange(12, dtype=torch.float32).view(3, 4) * n + n * (n - 1) / 2).t()
    if not torch.equal(m, want):
        failures.append("non-contiguous all_reduce")
    # allreduce_coalesced
    ts = [torch.full((3,), float(rank)), torch.full((2, 2), 2.0 * rank)]
    dist.all_reduce_coalesced(ts)
    s = n * (n - 1) / 2
    if not (torch.equal(ts[0], torch.full((3,), s)) and torch.equal(ts[1], torch.full((2, 2), 2 * s))):
        failures.append("all_reduce_coalesced")
    return failures


@pytest.mark.parametrize("n", SIZES)
def test_reductions(n):
    for r, f in enumerate(run_ranks(_reductions, n)):
        assert f == [], f"rank {r}: {f}"


def _movement(rank, n):
    failures = []
    for dt in [torch.float32, torch.int16, torch.bool, torch.complex128, torch.bfloat16]:
        src = (torch.arange(5) + 10 * rank).to(dt)
        # broadcast from every root
        for root in range(n):
            t = src.clone()
            dist.broadcast(t, root)
            if not torch.equal(t, (torch.arange(5) + 10 * root).to(dt)):
                failures.append(f"broadcast {dt} root {root}")
        # all_gather (list) and all_gather_into_tensor
        outs = [torch.empty(5, dtype=dt) for _ in range(n)]
        dist.all_gather(outs, src)
        for r in range(n):
            if not torch.equal(outs[r], (torch.arange(5) + 10 * r).to(dt)):
                failures.append(f"all_gather {dt} block {r}")
        flat = torch.empty(5 * n, dtype=dt)
        dist.all_gather_into_tensor(flat, src)
        if not torch.equal(flat, torch.cat(outs)):
            failures.append(f"all_gather_into_tensor {dt}")
        # gather / scatter to and from every root
        for root in range(n):
            g = [torch.empty(5, dtype=dt) for _ in range(n)] if rank == root else None
            dist.gather(src, g, dst=root)
            if rank == root and not all(torch.equal(g[r], outs[r]) for r in range(n)):
                failures.append(f"gather {dt} root {root}")
            got = torch.empty(5, dtype=dt)
            dist.scatter(got, [o.clone() for o in outs] if rank == root else None, src=root)
            if not torch.equal(got, outs[rank]):
                failures.append(f"scatter {dt} root {root}")
    # all_to_all (lists, uneven sizes) and all_to_all_single with uneven splits
    ins = [torch.full((r + rank + 1,), float(100 * rank + r)) for r in range(n)]
    outs = [torch.empty(rank + r + 1) for r in range(n)]
    dist.all_to_all(outs, ins)
    for r in range(n):
        if not torch.equal(outs[r], torch.full((rank + r + 1,), float(100 * r + rank))):
            failures.append(f"all_to_all from {r}")
    in_splits = [r + 1 for r in range(n)]
    out_splits = [rank + 1] * n
    inp = torch.cat([torch.full((r + 1, 2), float(10 * rank + r)) for r in range(n)])
    out = torch.empty(sum(out_splits), 2)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    want = torch.cat([torch.full((rank + 1, 2), float(10 * r + rank)) for r in range(n)])
    if not torch.equal(out, want):
        failures.append(f"all_to_all_single uneven: {out.tolist()}")
    eq_in = torch.arange(2 * n, dtype=torch.int64) + 1000 * rank
    eq_out = torch.empty(2 * n, dtype=torch.int64)
    dist.all_to_all_single(eq_out, eq_in)
    want = torch.cat([torch.arange(2 * rank, 2 * rank + 2) + 1000 * r for r in range(n)])
    if not torch.equal(eq_out, want):
        failures.append("all_to_all_single even")
    # reduce_scatter (list) and reduce_scatter_tensor
    ins = [torch.full((3,), float(rank * n + r)) for r in range(n)]
    out = torch.empty(3)
    dist.reduce_scatter(out, ins)
    if not torch.equal(out, torch.full((3,), float(sum(r * n + rank for r in range(n))))):
        failures.append(f"reduce_scatter: {out.tolist()}")
    big = torch.arange(4 * n, dtype=torch.float64) * (rank + 1)
    out = torch.empty(4, dtype=torch.float64)
    dist.reduce_scatter_tensor(out, big, op=dist.ReduceOp.AVG)
    want = torch.arange(4 * rank, 4 * rank + 4, dtype=torch.float64) * (n + 1) / 2
    if not torch.allclose(out, want):
        failures.append(f"reduce_scatter_tensor AVG: {out.tolist()}")
    dist.barrier()
    return failures


@pytest.mark.parametrize("n", SIZES)
def test_data_movement(n):
    for r, f in enumerate(run_ranks(_movement, n)):
        assert f == [], f"rank {r}: {f}"


def _p2p(rank, n):
    failures = []
    # A ring with isend/irecv posted receive-first: never deadlocks.
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    got = torch.empty(4)
    r = dist.irecv(got, prv)
    s = dist.isend(torch.full((4,), float(rank)), nxt)
    s.wait()
    r.wait()
    if not torch.equal(got, torch.full((4,), float(prv))):
        failures.append(f"ring irecv: {got.tolist()}")
    # batch_isend_irecv with every peer, several messages each
    ops, recvs = [], []
    for p in range(n):
        if p == rank:
            continue
        for k in range(3):
            buf = torch.empty(2, dtype=torch.int64)
            recvs.append((p, k, buf))
            ops.append(dist.P2POp(dist.irecv, buf, p))
            ops.append(dist.P2POp(dist.isend, torch.tensor([rank, k]), p))
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    for p, k, buf in recvs:
        if buf.tolist() != [p, k]:
            failures.append(f"batch_isend_irecv from {p} #{k}: {buf.tolist()}")
    # blocking send/recv of a non-contiguous tensor
    if rank == 0:
        dist.send(torch.arange(6.0).view(2, 3).t(), 1)
    elif rank == 1:
        t = torch.empty(2, 3).t()  # non-contiguous target, 3 x 2 as sent
        dist.recv(t, 0)
        if not torch.equal(t, torch.arange(6.0).view(2, 3).t()):
            failures.append("non-contiguous recv")
    dist.barrier()
    return failures


@pytest.mark.parametrize("n", SIZES)
def test_point_to_point(n):
    for r, f in enumerate(run_ranks(_p2p, n)):
        assert f == [], f"rank {r}: {f}"


def _async_and_futures(rank, n):
    failures = []
    works = [dist.all_reduce(torch.full((100,), float(i + rank)), async_op=True) for i in range(20)]
    t = torch.ones(3)
    w = dist.all_reduce(t, async_op=True)
    fut = w.get_future().then(lambda f: f.value()[0] * 2)
    if not torch.equal(fut.wait(), torch.full((3,), 2.0 * n)):
        failures.append("get_future().then")
    if not w.is_completed() or not w.is_success():
        failures.append("is_completed / is_success after the future")
    for wk in works:
        wk.wait()
    # wait(timeout) on finished work returns
    w2 = dist.all_reduce(torch.ones(1), async_op=True)
    import datetime

    w2.wait(timeout=datetime.timedelta(seconds=30))
    # subgroups: members and non-members
    sub = dist.new_group([0, n - 1])
    if rank in (0, n - 1):
        x = torch.tensor([float(rank)])
        dist.all_reduce(x, group=sub)
        if x.item() != float(n - 1):
            failures.append(f"subgroup all_reduce: {x.item()}")
    # coalescing manager
    with dist._coalescing_manager(async_ops=True) as cm:
        a, b = torch.ones(2), torch.full((3,), 2.0)
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    if not (torch.equal(a, torch.full((2,), float(n))) and torch.equal(b, torch.full((3,), 2.0 * n))):
        failures.append(f"coalescing manager: {a.tolist()} {b.tolist()}")
    return failures


@pytest.mark.parametrize("n", SIZES)
def test_async_futures_groups(n):
    for r, f in enumerate(run_ranks(_async_and_futures, n)):
        assert f == [], f"rank {r}: {f}"


def _threads_and_groups(rank, n):
    """Three process groups driven at once by three threads of each rank
    (weft communicators are independent: none waits for another's thread)."""
    import threading

    groups = [dist.new_group(list(range(n))) for _ in range(3)]
    failures, lock = [], threading.Lock()

    def drive(k):
        g = groups[k]
        for i in range(40):
            t = torch.full((257,), float(rank + k + i))
            dist.all_reduce(t, group=g)
            want = float(sum(r + k + i for r in range(n)))
            if not torch.equal(t, torch.full((257,), want)):
                with lock:
                    failures.append(f"group {k} call {i}: {t[0].item()} != {want}")
                return
            if i % 10 == 0:
                out = torch.empty(n * 3)
                dist.all_gather_into_tensor(out, torch.full((3,), float(rank * 10 + k)), group=g)
                if out.view(n, 3)[:, 0].tolist() != [float(r * 10 + k) for r in range(n)]:
                    with lock:
                        failures.append(f"group {k} all_gather {i}")

    threads = [threading.Thread(target=drive, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if any(t.is_alive() for t in threads):
        failures.append("a thread did not finish within 120 s")
    return failures


@pytest.mark.parametrize("n", SIZES)
def test_several_threads_drive_several_groups(n):
    for r, f in enumerate(run_ranks(_threads_and_groups, n)):
        assert f == [], f"rank {r}: {f}"


def _bad_input(rank, n):
    failures = []
    out = [torch.full((3,), -1.0) for _ in range(n + 1)]  # one too many
    try:
        dist.all_gather(out, torch.ones(3))
        failures.append("all_gather with n+1 outputs was accepted")
    except Exception as e:  # noqa: BLE001
        if "output tensors" not in str(e):
            failures.append(f"all_gather error does not say what is wrong: {e}")
    if any(not torch.equal(o, torch.full((3,), -1.0)) for o in out):
        failures.append("a refused all_gather wrote an output")
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.int16))
        failures.append("int16 all_reduce was accepted")
    except Exception as e:  # noqa: BLE001
        if "int16" not in str(e).lower() and "short" not in str(e).lower():
            failures.append(f"int16 error does not name the dtype: {e}")
    # the group still works
    t = torch.ones(1)
    dist.all_reduce(t)
    if t.item() != n:
        failures.append("all_reduce after refusals")
    return failures


def test_bad_input_raises_and_writes_nothing():
    for r, f in enumerate(run_ranks(_bad_input, 2)):
        assert f == [], f"rank {r}: {f}"
