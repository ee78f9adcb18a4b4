"""CUDA tensors on backend "weft" (a build with WEFT_TORCH_CUDA), 2 processes
sharing GPU 0: every collective is enqueued on the caller's current stream,
ordered with the kernels before and after it, each element checked. Skips,
saying why, where torch sees no GPU (the check runs in a child, so that this
process never initializes CUDA before the ranks start)."""
import datetime
import multiprocessing as mp
import os
import subprocess
import sys
import traceback

try:
    import pytest
except ImportError:  # perf/gpu-check.sh runs this file directly where pytest is missing
    pytest = None

from ranks import free_port


def _gpus():
    p = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.device_count())"],
                       capture_output=True, text=True, timeout=300)
    try:
        return int(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return 0


if pytest is not None:
    pytestmark = pytest.mark.skipif(_gpus() == 0,
                                    reason="no CUDA device (torch.cuda.device_count() is 0)")


def _rank(rank, n, port, q):
    try:
        import torch
        import torch.distributed as dist

        import weft.torch  # noqa: F401

        torch.cuda.set_device(0)
        dist.init_process_group("weft", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=n, timeout=datetime.timedelta(seconds=120))
        dev = torch.device("cuda", 0)
        fails = []
        count = 1 << 16
        # Ordered with the caller's kernels: written just before, read just after.
        t = torch.full((count,), float(rank + 1), device=dev)
        t.mul_(2)
        dist.all_reduce(t)
        t.add_(1)
        want = 2 * n * (n + 1) / 2 + 1
        if not torch.equal(t, torch.full_like(t, want)):
            fails.append(f"all_reduce: {t[:4].tolist()} != {want}")
        # Async, on a side stream, with a future callback.
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            u = torch.full((1000,), float(rank), device=dev)
            w = dist.all_reduce(u, op=dist.ReduceOp.MAX, async_op=True)
            fut = w.get_future().then(lambda f: f.value()[0] * 2)
        w.wait()
        torch.cuda.synchronize()
        if fut.wait().tolist()[:2] != [2.0 * (n - 1)] * 2:
            fails.append("async MAX with a future")
        b = torch.arange(10, device=dev, dtype=torch.int32) + rank
        dist.broadcast(b, src=n - 1)
        if b.tolist() != list(range(n - 1, n + 9)):
            fails.append(f"broadcast: {b.tolist()}")
        out = torch.empty(n * 5, device=dev, dtype=torch.bfloat16)
        dist.all_gather_into_tensor(out, torch.full((5,), float(rank), device=dev, dtype=torch.bfloat16))
        if out.float().view(n, 5)[:, 0].tolist() != [float(r) for r in range(n)]:
            fails.append("all_gather_into_tensor")
        rs = torch.empty(4, device=dev)
        dist.reduce_scatter_tensor(rs, torch.arange(4 * n, device=dev, dtype=torch.float32))
        if rs.tolist() != [float(n * (4 * rank + i)) for i in range(4)]:
            fails.append(f"reduce_scatter_tensor: {rs.tolist()}")
        a2a = torch.empty(n, device=dev)
        dist.all_to_all_single(a2a, torch.full((n,), float(rank), device=dev))
        if a2a.tolist() != [float(r) for r in range(n)]:
            fails.append(f"all_to_all_single: {a2a.tolist()}")
        try:
            dist.all_gather_into_tensor(torch.empty(2 * n), torch.ones(2, device=dev))
            fails.append("CPU output with a CUDA input was accepted")
        except Exception as e:  # noqa: BLE001
            if "device" not in str(e):
                fails.append(f"mixed devices: {e}")
        dist.barrier()
        dist.destroy_process_group()
        q.put((rank, fails))
    except BaseException:  # noqa: BLE001
        q.put((rank, [traceback.format_exc()]))


def test_cuda_collectives_two_ranks_one_gpu():
    n = 2
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.path.dirname(os.path.abspath(__file__)) + (
        ":" + env_path if env_path else "")
    procs = [ctx.Process(target=_rank, args=(r, n, port, q)) for r in range(n)]
    for p in procs:
        p.start()
    results = {}
    for _ in procs:
        r, fails = q.get(timeout=300)
        results[r] = fails
    for p in procs:
        p.join(60)
    for r in range(n):
        assert results.get(r) == [], f"rank {r}: {results.get(r)}"


if __name__ == "__main__":
    if _gpus() == 0:
        print("SKIPPED: no CUDA device (torch.cuda.device_count() is 0)")
        sys.exit(77)
    test_cuda_collectives_two_ranks_one_gpu()
    print("passed: CUDA collectives, 2 ranks on one GPU")
