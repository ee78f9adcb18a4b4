"""Horovod's helpers: broadcast_parameters, broadcast_optimizer_state, broadcast_object, allgather_object."""
import collections
import io
import pickle

import torch

from . import _basics, mpi_ops

try:  # as Horovod, cloudpickle where present (lambdas, local classes); pickle otherwise
    import cloudpickle as _pickler
except ImportError:
    _pickler = pickle


def _dumps(obj):
    buf = io.BytesIO()
    _pickler.dump(obj, buf)
    return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)


def _loads(tensor):
    return pickle.loads(tensor.numpy().tobytes())


def broadcast_parameters(params, root_rank):
    """Overwrites every rank's parameters with root_rank's, in place.

    `params`: a dict (a model's state_dict(); sent in sorted key order) or a
    list / iterable of tensors or (name, tensor) pairs (model.named_parameters()).
    One consistency check covers the whole batch."""
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, (list, tuple)) or hasattr(params, "__iter__"):
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError(f"invalid params of type: {type(params)}")
    tensors, names = [], []
    for i, (name, p) in enumerate(items):
        if not isinstance(p, torch.Tensor):
            raise ValueError(f"weft.torch.broadcast_parameters: {name or i} is a {type(p).__name__}, not a tensor")
        tensors.append(p.data if isinstance(p, torch.nn.Parameter) else p)
        names.append(f"broadcast.{name}" if name is not None else f"broadcast_parameters.{i}")
    with torch.no_grad():
        mpi_ops.grouped_broadcast_(tensors, root_rank, names)


def _ensure_state(optimizer):
    """Gives an optimizer without state its state, as Horovod does: one step on zero gradients."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad and p not in optimizer.state:
                p.grad = torch.zeros_like(p)
    skip = getattr(optimizer, "skip_synchronize", None)
    if skip is not None:  # a DistributedOptimizer: no gradient allreduce for this step
        with skip():
            optimizer.step()
    else:
        optimizer.step()


def broadcast_optimizer_state(optimizer, root_rank, model=None):
    """Overwrites every rank's optimizer state with root_rank's: the state tensors
    (momentum buffers, Adam's moments and step) in place, and every other value
    (hyperparameters of each param group such as lr and momentum, scalar state)
    through broadcast_object.

    An optimizer without state first takes one step on zero gradients so that
    its state exists, as Horovod does (with weight decay, that step moves the
    parameters; broadcast the parameters afterwards). `model` is accepted for
    Horovod's signature and unused (sparse gradients are not supported)."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    if len(optimizer.state_dict()["state"]) == 0:
        _ensure_state(optimizer)
    state_dict = optimizer.state_dict()
    if len(state_dict["state"]) == 0:
        return
    tensors, names, values = [], [], {}
    seen = collections.defaultdict(int)
    for index, group in enumerate(state_dict["param_groups"]):
        for key, value in group.items():
            if key != "params":
                values[("group", index, key)] = value
        for pid in group["params"]:
            for key, value in state_dict["state"].get(pid, {}).items():
                seen[key] += 1
                if torch.is_tensor(value):
                    tensors.append(value)
                    names.append(f"optimizer.{key}.{seen[key]}")
                else:
                    values[("state", pid, key)] = value
    with torch.no_grad():
        # state_dict()'s tensors are the optimizer's own: broadcast in place.
        mpi_ops.grouped_broadcast_(tensors, root_rank, names)
    values = broadcast_object(values, root_rank, name="optimizer.values")
    for (kind, where, key), value in values.items():
        if kind == "group":
            optimizer.param_groups[where][key] = value
        else:
            optimizer.state[_param_by_id(optimizer, where)][key] = value


def _param_by_id(optimizer, pid):
    """The parameter state_dict() numbers `pid` (its position over all param groups)."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    return params[pid]


def broadcast_object(obj, root_rank=0, name=None, process_set=mpi_ops.global_process_set):
    """root_rank's `obj` (any picklable object) on every rank."""
    mpi_ops._check_process_set(process_set, "broadcast_object")
    # Not Horovod's type(obj).__name__: non-root ranks often pass None.
    name = name or mpi_ops._name("broadcast_object", None)
    st = _basics.state()
    mpi_ops._check_root(root_rank, st.size, "broadcast_object")
    if st.rank == root_rank:
        payload = _dumps(obj)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    mpi_ops.broadcast_(length, root_rank, name=f"{name}.sz")
    if st.rank != root_rank:
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    mpi_ops.broadcast_(payload, root_rank, name=f"{name}.t")
    return obj if st.rank == root_rank else _loads(payload)


def allgather_object(obj, name=None, process_set=mpi_ops.global_process_set):
    """Every rank's `obj` (picklable), a list in rank order."""
    mpi_ops._check_process_set(process_set, "allgather_object")
    name = name or mpi_ops._name("allgather_object", None)
    payload = _dumps(obj)
    sizes = mpi_ops.allgather(torch.tensor([payload.numel()], dtype=torch.int64), name=f"{name}.sz").tolist()
    gathered = mpi_ops.allgather(payload, name=f"{name}.t")
    out, offset = [], 0
    for n in sizes:
        out.append(_loads(gathered[offset: offset + n]))
        offset += n
    return out
