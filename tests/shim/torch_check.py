#!/usr/bin/env python3
"""[cuda] PyTorch on weft through the NCCL shim.

torch.distributed's "nccl" backend with LD_PRELOAD=libweft-nccl.so, two
processes on one GPU: all_reduce, broadcast, all_gather, reduce_scatter,
all_to_all and send/recv give the right tensors, and one DDP training step of
a small model gives the gradients of a single-process step on the whole
batch.

    torch_check.py --shim build/libweft-nccl.so

Exit status: 0 passed, 1 failed, 77 skipped: no torch, no GPU, or a weft
built without CUDA (device buffers are then refused with ncclInvalidUsage;
WEFT_SHIM_REQUIRE_CUDA=1, as perf/gpu-check.sh sets, makes that a failure).
"""
import argparse
import copy
import os
import socket
import subprocess
import sys

SKIP = 77
WORLD = 2
# Messages of a weft that cannot take device buffers: an older shim, or a
# weft built without CUDA (nvcc absent at build time).
NO_CUDA_MARKERS = ("CUDA device memory", "no CUDA support", "built without CUDA")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parent(shim):
    if not os.path.isfile(shim):
        print(f"FAIL: {shim} does not exist (build the weft-nccl target)")
        return 1
    try:
        import torch
    except ImportError:
        print("SKIP: PyTorch is not installed here; the [cuda] shim test needs torch and a GPU")
        return SKIP
    if not torch.cuda.is_available():
        print("SKIP: no CUDA GPU here; the [cuda] shim test needs one")
        return SKIP
    env = dict(os.environ)
    env.update(LD_PRELOAD=os.path.realpath(shim), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), WORLD_SIZE=str(WORLD))
    procs = []
    for rank in range(WORLD):
        e = dict(env, RANK=str(rank), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", "--shim", shim], env=e,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    codes = []
    for rank, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=540)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            print(f"rank {rank} timed out")
        codes.append(p.returncode)
        for line in out.splitlines():
            print(f"[rank {rank}] {line}")
    if all(c == 0 for c in codes):
        print("PASSED: PyTorch ran on weft through the NCCL shim")
        return 0
    if all(c == SKIP for c in codes):
        if os.environ.get("WEFT_SHIM_REQUIRE_CUDA") == "1":
            print("FAIL: device buffers refused, but WEFT_SHIM_REQUIRE_CUDA=1")
            return 1
        print("SKIP: this weft was built without CUDA: the shim refuses device buffers")
        return SKIP
    print(f"FAILED: worker exit codes {codes}")
    return 1


def check(name, ok):
    print(f"{'ok  ' if ok else 'FAIL'} {name}")
    if not ok:
        raise SystemExit(1)


def worker(shim):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank = int(os.environ["RANK"])
    with open("/proc/self/maps") as f:
        maps = f.read()
    check("the shim is mapped in this process", os.path.basename(os.path.realpath(shim)) in maps)
    check(f"torch sees NCCL ABI 2.28 (got {torch.cuda.nccl.version()})",
          tuple(torch.cuda.nccl.version()[:2]) == (2, 28))
    torch.cuda.set_device(0)  # both ranks on the one GPU
    dev = torch.device("cuda", 0)
    dist.init_process_group("nccl", rank=rank, world_size=WORLD)

    # The first collective tells whether weft takes device buffers yet.
    t = torch.full((1024,), float(rank + 1), device=dev)
    try:
        dist.all_reduce(t)
        torch.cuda.synchronize()
    except Exception as e:  # DistBackendError carries ncclGetLastError's text
        if any(m in str(e) for m in NO_CUDA_MARKERS):
            print(f"SKIP: {e}")
            raise SystemExit(SKIP)
        raise
    check("all_reduce", torch.all(t == 3.0).item())

    b = torch.arange(64, device=dev, dtype=torch.float32) + 100 * rank
    dist.broadcast(b, src=1)
    check("broadcast", torch.equal(b, torch.arange(64, device=dev, dtype=torch.float32) + 100))

    mine = torch.full((8,), float(rank), device=dev)
    parts = [torch.empty(8, device=dev) for _ in range(WORLD)]
    dist.all_gather(parts, mine)
    check("all_gather", all(torch.all(p == i).item() for i, p in enumerate(parts)))
    whole = torch.empty(8 * WORLD, device=dev)
    dist.all_gather_into_tensor(whole, mine)
    check("all_gather_into_tensor", torch.equal(whole, torch.cat(parts)))

    inp = torch.arange(8 * WORLD, device=dev, dtype=torch.float32)
    out = torch.empty(8, device=dev)
    dist.reduce_scatter_tensor(out, inp)
    check("reduce_scatter", torch.equal(out, WORLD * inp[8 * rank:8 * (rank + 1)]))

    a2a_in = torch.tensor([10.0 * rank + j for j in range(WORLD)], device=dev)
    a2a_out = torch.empty(WORLD, device=dev)
    dist.all_to_all_single(a2a_out, a2a_in)
    check("all_to_all", torch.equal(a2a_out, torch.tensor([10.0 * j + rank for j in range(WORLD)],
                                                         device=dev)))

    peer = 1 - rank
    s = torch.full((16,), float(rank + 7), device=dev)
    r = torch.empty(16, device=dev)
    ops = [dist.P2POp(dist.isend, s, peer), dist.P2POp(dist.irecv, r, peer)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    torch.cuda.synchronize()
    check("send/recv", torch.all(r == float(peer + 7)).item())
    if rank == 0:
        dist.send(s, 1)
    else:
        dist.recv(r, 0)
        torch.cuda.synchronize()
        check("send then recv", torch.all(r == 7.0).item())

    # One DDP step: the averaged gradients equal a one-process step on the
    # whole batch (each rank holds half of it, equal halves).
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(dev)
    ref = copy.deepcopy(model)
    g = torch.Generator().manual_seed(1)
    x_all = torch.randn(2 * 8, 16, generator=g).to(dev)
    y_all = torch.randn(2 * 8, 4, generator=g).to(dev)
    ddp = DDP(model, device_ids=[0])
    loss = nn.functional.mse_loss(ddp(x_all[8 * rank:8 * (rank + 1)]), y_all[8 * rank:8 * (rank + 1)])
    loss.backward()
    nn.functional.mse_loss(ref(x_all), y_all).backward()
    torch.cuda.synchronize()
    same = all(torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-6)
               for p, q in zip(model.parameters(), ref.parameters()))
    check("DDP gradients match a single-process step", same)

    dist.destroy_process_group()
    print("WORKER OK")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shim", required=True, help="path of libweft-nccl.so")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    return worker(args.shim) if args.worker else parent(args.shim)


if __name__ == "__main__":
    sys.exit(main())
