"""The consistency check: every rank is about to run the same collective.

Horovod negotiates each tensor by name, so ranks that disagree (another
name, shape, dtype, op or root for the same call) get an error instead of
mixed data. weft matches collectives by order, as NCCL does, so weft.torch
checks instead: before each call (or each grouped batch) the ranks
allreduce (MAX), on the control group, two int64 per rank: a 63-bit digest d
of the call's description ("allreduce 'w.grad' float32[64, 32] op=Average")
and -d. max(d) == -max(-d) means every rank has the same digest: the call
goes ahead. Otherwise the ranks allgather their descriptions and every rank
raises MismatchError naming rank 0's and the first differing rank's. Cost:
one 16-byte allreduce per call (an allreduce: weft's allgather of 16 bytes
costs about twice as much; figures in docs/horovod.md). WEFT_TORCH_CHECK=0
turns it off. gather_ints() is the exchange of one number per rank that
allgather needs (its first dimensions), a MAX allreduce of a one-hot row.
"""
import hashlib
import os

import torch
import torch.distributed as dist


class MismatchError(RuntimeError):
    """Ranks called different collectives (name, shape, dtype, op or root) at the same point."""


def enabled():
    return os.environ.get("WEFT_TORCH_CHECK", "1").strip().lower() not in ("0", "false", "off", "no")


_seq = 0  # checked calls so far on this rank, for the message


def digest(description):
    """A 63-bit digest: non-negative, so that -digest fits in int64 too."""
    raw = hashlib.blake2b(description.encode(), digest_size=8).digest()
    return int.from_bytes(raw, "little") >> 1


def shape_text(tensor, free_first=False):
    dims = [str(d) for d in tensor.shape]
    if free_first and dims:
        dims[0] = "*"
    return f"{str(tensor.dtype).replace('torch.', '')}[{', '.join(dims)}]"


def exchange(state, description):
    """Raises MismatchError on every rank unless every rank passes the same description."""
    global _seq
    if not enabled():
        return
    _seq += 1
    if state.size == 1:
        return
    mine = digest(description)
    row = torch.tensor([mine, -mine], dtype=torch.int64)
    dist.all_reduce(row, op=dist.ReduceOp.MAX, group=state.control)
    if row[0].item() == -row[1].item():
        return
    descriptions = [None] * state.size
    dist.all_gather_object(descriptions, description, group=state.control)
    other = next(r for r in range(state.size) if descriptions[r] != descriptions[0])
    raise MismatchError(
        f"weft.torch: ranks called different collectives (at the call checked #{_seq} on this rank): rank 0: "
        f"{descriptions[0]}; rank {other}: {descriptions[other]} (this is rank {state.rank}: "
        f"{description}). Every rank must issue the same collectives, with the same names, shapes, "
        "dtypes and ops, in the same order")


def gather_ints(state, values):
    """Every rank's non-negative `values` (a list, the same length everywhere): a list per rank."""
    if state.size == 1:
        return [list(values)]
    k = len(values)
    row = torch.zeros(state.size * k, dtype=torch.int64)
    row[state.rank * k:(state.rank + 1) * k] = torch.tensor(values, dtype=torch.int64)
    dist.all_reduce(row, op=dist.ReduceOp.MAX, group=state.control)
    flat = row.tolist()
    return [flat[r * k:(r + 1) * k] for r in range(state.size)]
