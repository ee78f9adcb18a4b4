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


class Joined:
    """exchange()'s answer while some ranks sit in join(): every rank's (joined, spec)."""

    def __init__(self, entries):
        self.entries = entries

    def active_spec(self):
        return next(spec for joined, spec in self.entries if not joined)

    def joined_ranks(self):
        return [r for r, (joined, _) in enumerate(self.entries) if joined]


ALL_JOINED = "all joined"
_NEUTRAL = -(1 << 63)  # contributes nothing to a MAX


def exchange(state, description, spec=None, joining=False):
    """Raises MismatchError on every rank unless every rank passes the same description.

    Ranks in join() pass joining=True: their row is neutral ([-1, min, 1]) and
    the others' calls go ahead; then every rank learns every rank's `spec` (what
    a joined rank must mirror, None for calls that cannot run beside joined
    ranks, which then raise everywhere) and gets a Joined back. When every rank
    is joining, returns ALL_JOINED."""
    global _seq
    if not enabled():
        return None
    _seq += 1
    if state.size == 1:
        return None
    mine = digest(description)
    row = torch.tensor([-1, _NEUTRAL, 1] if joining else [mine, -mine, 0], dtype=torch.int64)
    dist.all_reduce(row, op=dist.ReduceOp.MAX, group=state.control)
    top, neg_bottom, any_joined = row.tolist()
    if top == -1:
        return ALL_JOINED
    if top != -neg_bottom:
        _raise_mismatch(state, description)
    if not any_joined:
        return None
    entries = [None] * state.size
    dist.all_gather_object(entries, (joining, spec), group=state.control)
    joined = Joined(entries)
    if joined.active_spec() is None:
        call = description if not joining else "the others' call"
        raise RuntimeError(
            f"weft.torch: rank(s) {joined.joined_ranks()} have called join(), and only allreduce, "
            f"grouped_allreduce and barrier can run beside joined ranks (as in Horovod); this is rank "
            f"{state.rank} at {call}")
    return joined


def _raise_mismatch(state, description):
    descriptions = [None] * state.size
    dist.all_gather_object(descriptions, description, group=state.control)
    first = next(d for d in descriptions if d != "join")
    other = next(r for r in range(state.size) if descriptions[r] not in (first, "join"))
    ref = descriptions.index(first)
    raise MismatchError(
        f"weft.torch: ranks called different collectives (at the call checked #{_seq} on this rank): rank {ref}: "
        f"{descriptions[ref]}; rank {other}: {descriptions[other]} (this is rank {state.rank}: "
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
