"""weft as a torch.distributed backend: ``dist.init_process_group("weft")``.

``import weft.torch`` registers the backend (weft/torch/__init__.py calls
:func:`register`); torch also finds it without any import through the
``torch.distributed.backends`` entry point ``weft.torch:register``. See
docs/pytorch.md.
"""
import torch
import torch.distributed as dist

try:
    from weft import _C
except ImportError as e:  # built without torch, or against another torch
    raise ImportError(
        "weft's torch backend (weft._C) did not load: " + str(e) + ". It is built against the "
        "torch installed when weft was built: install torch>=2.15, then reinstall weft "
        "(pip install --force-reinstall .)"
    ) from e

BACKEND = "weft"


def _create(dist_opts, backend_options=None):
    timeout = dist_opts.timeout
    timeout_s = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
    return _C.create_backend(
        dist_opts.store,
        dist_opts.group_rank,
        dist_opts.group_size,
        timeout_s,
        dist_opts.group_id,
    )


def register():
    """Registers backend "weft" with torch.distributed (idempotent)."""
    if BACKEND.upper() in dist.Backend._plugins:
        return
    devices = ["cpu", "cuda"] if _C.cuda_supported() else ["cpu"]
    dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=devices)


def comm_handle(group=None):
    """The weft_comm_t (an int) under a process group's weft backend."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return _C.comm_handle(pg._get_backend(torch.device("cpu")))

