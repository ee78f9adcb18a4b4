"""weft: a collective communication library (C API, NCCL shim, torch backend).

``import weft.torch`` (or just ``torch.distributed.init_process_group("weft")``,
through the ``torch.distributed.backends`` entry point) makes "weft" a
torch.distributed backend; ``import weft.torch as hvd`` is also Horovod's
PyTorch API (docs/horovod.md). This module itself needs no torch: it says where
the native libraries are, for ctypes or an LD_PRELOAD of the NCCL shim.
"""
import os as _os

__version__ = "0.1.0"

_HERE = _os.path.dirname(_os.path.abspath(__file__))


def _find(names):
    for name in names:
        path = _os.path.join(_HERE, "lib", name)
        if _os.path.exists(path):
            return path
    raise FileNotFoundError(
        f"weft: none of {names} under {_os.path.join(_HERE, 'lib')}; reinstall weft (pip install .)"
    )


def library_path():
    """The path of libweft.so (the C API, include/weft.h)."""
    return _find(["libweft.so.0", "libweft.so"])


def nccl_shim_path():
    """The path of weft's drop-in libnccl.so.2 (LD_PRELOAD it, docs/nccl-shim.md)."""
    return _find(["libweft-nccl.so", "libnccl.so.2"])


def load_library():
    """libweft as a ctypes.CDLL: the installed one, else (a build tree) the one
    weft's torch extension loaded, found by its soname."""
    import ctypes

    try:
        return ctypes.CDLL(library_path())
    except (FileNotFoundError, OSError):
        import importlib.util

        if importlib.util.find_spec("weft._C") is not None:
            import weft._C  # noqa: F401  (loads libweft.so.0)
        return ctypes.CDLL("libweft.so.0")
