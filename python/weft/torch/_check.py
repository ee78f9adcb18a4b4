"""The consistency check: every rank is about to run the same collective.

Horovod negotiates each tensor by name, so ranks that disagree (another
name, shape, dtype, op or root for the same call) get an error instead of
mixed data. weft matches collectives by order, as NCCL does, so weft.torch
checks instead: before each call (or each grouped batch) the ranks allgather,
on the control group, one row of two int64 per rank: a 64-bit digest of the
call's description ("allreduce 'w.grad' float32[64, 32] op=Average") and one
number the call needs from every rank anyway (allgather's first dimension).
Equal digests: the call goes ahead. Any difference: the ranks allgather
their descriptions and every rank raises MismatchError naming rank 0's and
the first differing rank's. Cost: one 16-byte-per-rank allgather per call
(docs/horovod.md has the figures). WEFT_TORCH_CHECK=0 turns the digest off;
the exchange then happens only for calls that need the numbers.
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
    raw = hashlib.blake2b(description.encode(), digest_size=8).digest()
    return int.from_bytes(raw, "little", signed=True)


def shape_text(tensor, free_first=False):
    dims = [str(d) for d in tensor.shape]
    if free_first and dims:
        dims[0] = "*"
    return f"{str(tensor.dtype).replace('torch.', '')}[{', '.join(dims)}]"


def exchange(state, description, value=0, need_values=False):
    """Checks `description` against every rank's; returns every rank's `value` (a list).

    Skipped (returns None) when the check is off and the values are not needed."""
    global _seq
    check = enabled()
    if not check and not need_values:
        return None
    _seq += 1
    mine = digest(description) if check else 0
    if state.size == 1:
        return [value]
    row = torch.tensor([mine, value], dtype=torch.int64)
    rows = torch.empty(state.size, 2, dtype=torch.int64)
    dist.all_gather_into_tensor(rows, row, group=state.control)
    digests = rows[:, 0].tolist()
    if check and any(d != digests[0] for d in digests):
        descriptions = [None] * state.size
        dist.all_gather_object(descriptions, description, group=state.control)
        other = next(r for r in range(state.size) if digests[r] != digests[0])
        raise MismatchError(
            f"weft.torch: ranks called different collectives (at the call checked #{_seq} on this rank): rank 0: "
            f"{descriptions[0]}; rank {other}: {descriptions[other]} (this is rank {state.rank}: "
            f"{description}). Every rank must issue the same collectives, with the same names, shapes, "
            "dtypes and ops, in the same order")
    return rows[:, 1].tolist()
