"""Horovod's elastic API on weft: a lost worker does not end the job.

    import weft.torch as hvd

    @hvd.elastic.run
    def train(state):
        for state.batch in range(state.batch, steps):
            ...
            if state.batch % 10 == 0:
                state.commit()

    state = hvd.elastic.TorchState(model, optimizer, batch=0)
    train(state)

When a collective fails inside ``train`` (a worker died or hung), the
survivors revoke their communicator, shrink it to themselves
(weft_comm_shrink: they agree among themselves who is left, with no outside
rendezvous), rebuild their process groups on the survivors, restore the last
commit and call ``train`` again, in the same processes. Workers that weftrun
adds (its --host-discovery-script) join at the next commit and receive the
state. docs/elastic.md.
"""
import copy
import ctypes
import functools
import os
import socket
import time

import torch
import torch.distributed as dist

import weft

from . import _backend, _basics, functions, mpi_ops
from ._ops import HorovodInternalError


class HostsUpdatedInterrupt(RuntimeError):
    """Workers were added: the ranks rebuild their groups at the next commit (Horovod's name)."""

    def __init__(self, skip_sync=False):
        super().__init__("weft.torch.elastic: the set of workers changed")
        self.skip_sync = skip_sync


def _log(msg):
    if os.environ.get("WEFT_ELASTIC_QUIET") != "1":
        print(f"[weft.elastic pid {os.getpid()}] {msg}", flush=True)


# ---- the job's store: weftrun's (WEFT_ELASTIC_STORE), else one of our own ----

_STORE_TIMEOUT_S = float(os.environ.get("WEFT_ELASTIC_TIMEOUT_S", "600"))


def _job_store():
    """weftrun's key-value store, or None when not under weftrun's elastic mode."""
    addr = os.environ.get("WEFT_ELASTIC_STORE")
    if not addr:
        return None
    host, port = addr.rsplit(":", 1)
    import datetime

    return dist.TCPStore(host, int(port), is_master=False, wait_for_workers=False,
                         timeout=datetime.timedelta(seconds=_STORE_TIMEOUT_S))


_store = None


def _the_store():
    global _store
    if _store is None:
        _store = _job_store()
    return _store


# ---- the C API, through ctypes ----

_lib = None


def _weft():
    global _lib
    if _lib is None:
        lib = weft.load_library()
        lib.weft_get_last_error.restype = ctypes.c_char_p
        lib.weft_get_last_error.argtypes = [ctypes.c_void_p]
        for name in ("weft_comm_revoke", "weft_comm_destroy"):
            getattr(lib, name).argtypes = [ctypes.c_void_p]
        lib.weft_comm_shrink.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                         ctypes.POINTER(ctypes.c_void_p)]
        lib.weft_comm_rank.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        lib.weft_comm_size.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        lib.weft_broadcast.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                       ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        _lib = lib
    return _lib


_WEFT_UINT8 = 1  # weft_datatype_t (include/weft.h)


def _group_comms():
    st = _basics.state()
    comms = []
    for group in (st.group, st.control):
        try:
            comms.append(_backend.comm_handle(group))
        except Exception:  # noqa: BLE001 - not a weft group
            pass
    return [c for c in comms if c]


# ---- recovery: shrink to the survivors ----

class _Membership:
    generation = 0     # how many times this job's groups were rebuilt
    recoveries = []    # (seconds, old size, new size) per recovery


def _rebuild(store, generation, rank, size):
    """Replaces weft.torch's groups by new ones of `size` ranks (this one `rank`)."""
    _basics.shutdown()
    if dist.is_initialized():
        dist.destroy_process_group()
    prefixed = dist.PrefixStore(f"weft/gen{generation}/", store)
    timeout = _basics._timeout()  # WEFT_TORCH_TIMEOUT_S, as init()'s groups
    kwargs = {"timeout": timeout} if timeout else {}
    dist.init_process_group(_backend.BACKEND, store=prefixed, rank=rank, world_size=size, **kwargs)
    _basics.init(_rebuilt=True)
    _basics._state.created = True  # shutdown() destroys it, as init()'s own
    _Membership.generation = generation


def _recover(error):
    """After a failed collective: revoke, shrink, rebuild. Raises when this
    rank was left out (it was too slow: the others went on without it)."""
    t0 = time.monotonic()
    lib = _weft()
    comms = _group_comms()
    if not comms:
        raise RuntimeError("weft.torch.elastic: the process group is not on weft; cannot shrink") from error
    old_size = _basics.size()
    for c in comms:  # releases peers still blocked in either group
        lib.weft_comm_revoke(ctypes.c_void_p(c))
    new = ctypes.c_void_p()
    rc = lib.weft_comm_shrink(ctypes.c_void_p(comms[0]), None, 0, ctypes.byref(new))
    if rc != 0:
        why = lib.weft_get_last_error(ctypes.c_void_p(comms[0])).decode(errors="replace")
        raise RuntimeError(f"weft.torch.elastic: this worker could not rejoin: {why}") from error
    try:
        r, n = ctypes.c_int(), ctypes.c_int()
        lib.weft_comm_rank(new, ctypes.byref(r))
        lib.weft_comm_size(new, ctypes.byref(n))
        # The rendezvous of the new groups: weftrun's store, else one that the
        # new rank 0 serves; its address and the generation go over the new comm.
        store = _the_store()
        msg = ctypes.create_string_buffer(256)
        if r.value == 0:
            if store is not None:
                gen = store.add("weft/generation", 1)
                text = f"{gen}|store"
            else:
                gen = _Membership.generation + 1
                own = dist.TCPStore(socket.gethostname(), 0, is_master=True, wait_for_workers=False)
                text = f"{gen}|{socket.gethostname()}:{own.port}"
                _Membership.own_store = own  # lives as long as the groups
            msg.value = text.encode()
        rc = lib.weft_broadcast(msg, msg, 256, _WEFT_UINT8, 0, new, None)
        if rc != 0:
            why = lib.weft_get_last_error(new).decode(errors="replace")
            raise RuntimeError(f"weft.torch.elastic: after the shrink: {why}") from error
        gen_text, where = msg.value.decode().split("|", 1)
        if where != "store":
            host, port = where.rsplit(":", 1)
            if r.value != 0:
                store = dist.TCPStore(host, int(port), is_master=False, wait_for_workers=False)
            else:
                store = _Membership.own_store
        rank, size = r.value, n.value
    finally:
        lib.weft_comm_destroy(new)
    _rebuild(store, int(gen_text), rank, size)
    took = time.monotonic() - t0
    _Membership.recoveries.append((took, old_size, size))
    _log(f"recovered: {old_size} -> {size} ranks in {took:.2f} s (generation {gen_text}); now rank {rank} "
         f"(the failure: {str(error).splitlines()[0][:200]})")


# ---- growing: weftrun's joiners ----

def _joiner_init():
    """A worker weftrun added (WEFT_ELASTIC_JOIN=1): registers, waits to be let in at a commit."""
    store = _the_store()
    if store is None:
        raise RuntimeError("weft.torch.elastic: WEFT_ELASTIC_JOIN is set but WEFT_ELASTIC_STORE is not "
                           "(joiners are started by weftrun's elastic mode)")
    ticket = store.add("weft/joiners", 1) - 1
    store.set(f"weft/joiner/{ticket}/host", socket.gethostname())
    _log(f"joining as ticket {ticket}; waiting for the next commit")
    store.wait([f"weft/joiner/{ticket}/assign"])
    gen, rank, size = (int(x) for x in store.get(f"weft/joiner/{ticket}/assign").decode().split(":"))
    _rebuild(store, gen, rank, size)
    _log(f"joined as rank {rank} of {size} (generation {gen})")


def _pending_joiners():
    """Agreed by every rank (rank 0 reads the store; a broadcast tells the rest)."""
    store = _the_store()
    st = _basics.state()
    want = torch.zeros(2, dtype=torch.int64)
    if store is not None and st.rank == 0:
        registered = store.add("weft/joiners", 0)
        handled = store.add("weft/joiners_handled", 0)
        want[0], want[1] = handled, registered
    if st.size > 1:
        mpi_ops.broadcast_(want, 0, name="weft.elastic.joiners")
    return int(want[0]), int(want[1])


def _grow(handled, registered):
    store = _the_store()
    st = _basics.state()
    max_np = int(os.environ.get("WEFT_ELASTIC_MAX_NP", "0") or 0)
    room = registered - handled if max_np <= 0 else min(registered - handled, max(0, max_np - st.size))
    size = st.size + room
    info = torch.zeros(1, dtype=torch.int64)
    if st.rank == 0:
        gen = store.add("weft/generation", 1)
        for i in range(room):
            store.set(f"weft/joiner/{handled + i}/assign", f"{gen}:{st.size + i}:{size}")
        store.add("weft/joiners_handled", room)
        info[0] = gen
    if st.size > 1:
        mpi_ops.broadcast_(info, 0, name="weft.elastic.grow")
    old = st.size
    _rebuild(store, int(info[0]), st.rank, size)
    _log(f"grew: {old} -> {size} ranks (generation {int(info[0])})")


# ---- states ----

class State:
    """What a training function keeps across a failure: commit() saves it,
    restore() goes back to the last save, sync() sends rank 0's to every rank."""

    def __init__(self, **kwargs):
        self._reset_callbacks = []
        for name, value in kwargs.items():
            setattr(self, name, value)

    def register_reset_callbacks(self, callbacks):
        """Functions called (in order) after the workers changed and the state was synchronized."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for cb in self._reset_callbacks:
            cb()

    def commit(self):
        """Saves the state (what a failure goes back to), then lets waiting workers in."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        handled, registered = _pending_joiners()
        if registered > handled:
            raise HostsUpdatedInterrupt(skip_sync=False)

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self):
        raise NotImplementedError


class ObjectState(State):
    """Plain Python attributes (kwargs): saved by deep copy, synchronized by broadcast_object."""

    def __init__(self, bcast_object=None, get_rank=None, **kwargs):
        self._bcast_object = bcast_object or functions.broadcast_object
        self._saved_state = dict(kwargs)
        self._keys = list(kwargs)
        super().__init__(**kwargs)

    def save(self):
        self._saved_state = {k: copy.deepcopy(getattr(self, k)) for k in self._keys}

    def restore(self):
        for k, v in self._saved_state.items():
            setattr(self, k, copy.deepcopy(v))

    def sync(self):
        if self._keys and _basics.size() > 1:
            values = self._bcast_object({k: getattr(self, k) for k in self._keys}, root_rank=0,
                                        name="weft.elastic.state")
            for k, v in values.items():
                setattr(self, k, v)
            self.save()


class TorchState(ObjectState):
    """A model and an optimizer (their state_dicts), plus any attributes (kwargs)."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        self.model = model
        self.optimizer = optimizer
        self._saved_model = None
        self._saved_optimizer = None
        super().__init__(**kwargs)
        self._save_torch()

    def _save_torch(self):
        if self.model is not None:
            self._saved_model = copy.deepcopy(self.model.state_dict())
        if self.optimizer is not None:
            self._saved_optimizer = copy.deepcopy(self.optimizer.state_dict())

    def save(self):
        self._save_torch()
        super().save()

    def restore(self):
        if self.optimizer is not None and hasattr(self.optimizer, "_hvd_reset"):
            self.optimizer._hvd_inflight = []  # handles of the failed groups: dropped, not waited for
            self.optimizer._hvd_reset()
        if self.model is not None and self._saved_model is not None:
            self.model.load_state_dict(self._saved_model)
        if self.optimizer is not None and self._saved_optimizer is not None:
            self.optimizer.load_state_dict(self._saved_optimizer)
        super().restore()

    def sync(self):
        if _basics.size() > 1:
            if self.model is not None:
                functions.broadcast_parameters(self.model.state_dict(), root_rank=0)
            if self.optimizer is not None:
                functions.broadcast_optimizer_state(self.optimizer, root_rank=0)
        super().sync()
        self._save_torch()


# ---- the wrapper ----

def _is_failure(e):
    return isinstance(e, (HorovodInternalError, dist.DistError))


def run(func):
    """Runs func(state, ...) until it returns, recovering from failed workers
    (shrink, restore the last commit) and letting new ones in at commits."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not _basics.is_initialized():
            _basics.init()  # a joiner (WEFT_ELASTIC_JOIN=1) is let in there
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                skip_sync = False
                return func(state, *args, **kwargs)
            except HostsUpdatedInterrupt as e:
                handled, registered = _pending_joiners()
                _grow(handled, registered)
                skip_sync = e.skip_sync
            except Exception as e:  # noqa: BLE001 - only the failures of a collective are recovered
                if not _is_failure(e):
                    raise
                _log(f"a collective failed: {str(e).splitlines()[0][:200]}")
                state.restore()
                _recover(e)
            state.on_reset()

    return wrapper


def recoveries():
    """(seconds, old size, new size) of each recovery of this process so far."""
    return list(_Membership.recoveries)
