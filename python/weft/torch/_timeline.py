"""Per-tensor phases on weft's timeline (WEFT_TIMELINE, weftrun --timeline-filename).

Horovod's timeline showed, per tensor, how long it waited and how long its
reduction took; weft's shows the collectives themselves (fused ops included)
and, through the C API's weft_timeline_span, these per-tensor spans on a
track per tensor ("tensor <name>") in the same file:

  QUEUE      a DistributedOptimizer gradient: from its hook (gradient ready)
             to the start of its bucket's allreduce
  NEGOTIATE  the name check (weft.torch's consistency check across ranks)
  ALLREDUCE  (ALLGATHER, BROADCAST, ...) from the start of the call to the
             moment synchronize() saw it done (a handle waited for later
             shows up longer than the collective: see the comm's track)

Times are CLOCK_MONOTONIC (time.monotonic_ns), the clock weft's own events
use. Nothing is recorded, and nothing costs, with the timeline off.
"""
import ctypes
import os
import time

now = time.monotonic_ns
_lib = None
_on = None


def enabled():
    global _on
    if _on is None:
        _on = bool(os.environ.get("WEFT_TIMELINE"))
    return _on


def _libweft():
    global _lib
    if _lib is None:
        import weft

        lib = weft.load_library()
        fn = lib.weft_timeline_span
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64,
                       ctypes.c_uint64, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                       ctypes.POINTER(ctypes.c_char_p)]
        _lib = lib
    return _lib


def span(comm, track, name, begin_ns, end_ns, **args):
    """One span on `track` of the timeline of weft communicator `comm` (an int)."""
    if not enabled() or not comm:
        return
    keys = (ctypes.c_char_p * len(args))(*[k.encode() for k in args])
    values = (ctypes.c_char_p * len(args))(*[str(v).encode() for v in args.values()])
    _libweft().weft_timeline_span(comm, track.encode(), name.encode(), int(begin_ns),
                                  max(int(begin_ns), int(end_ns)), len(args), keys, values)


def tensor_spans(comm, names, phase, begin_ns, end_ns, **args):
    """The same span on the track of each tensor in `names`."""
    if not enabled():
        return
    for n in names:
        span(comm, "tensor " + n, phase, begin_ns, end_ns, tensors=len(names), **args)
