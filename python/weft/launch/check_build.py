"""weftrun --check-build: what this weft has (as horovodrun --check-build)."""
import ctypes


def _libweft():
    import weft

    try:
        return weft.load_library()
    except (ImportError, OSError):
        return None


def build_info():
    """weft_get_build_info() as a dict, or None if libweft is not found."""
    lib = _libweft()
    if lib is None or not hasattr(lib, "weft_get_build_info"):
        return None
    lib.weft_get_build_info.restype = ctypes.c_char_p
    fields = lib.weft_get_build_info().decode().split()
    return dict(f.split("=", 1) for f in fields if "=" in f)


def _torch():
    """(torch version or None, why not, whether weft's backend loads)."""
    try:
        import torch
    except ImportError as e:
        return None, str(e), False
    try:
        import weft.torch  # noqa: F401

        return torch.__version__, "", True
    except ImportError as e:
        return torch.__version__, str(e), False


def _devices():
    """How many CUDA devices this process sees now (torch's count)."""
    try:
        import torch

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken CUDA install is "none" here
        n = 0
    return f"{n} device{'s' if n != 1 else ''} here" if n else "no device usable here"


def report():
    """The --check-build text; second value: whether weft is usable."""
    import weft

    info = build_info()
    lines = [f"weft v{weft.__version__}:", ""]
    if info is None:
        lines += ["    libweft.so not found (reinstall weft: pip install .)"]
        return "\n".join(lines), False
    version, why, backend = _torch()
    lines += ["Available Frameworks:",
              f"    [{'X' if backend else ' '}] PyTorch"
              + (f" (torch {version}, backend \"weft\")" if backend else f" ({why or 'no torch'})"),
              "", "Available Transports:"]
    have = set(info.get("transports", "").split(","))
    for t in ("self", "shm", "tcp", "ucx", "ibverbs", "cuda_ipc"):
        lines.append(f"    [{'X' if t in have else ' '}] {t}")
    lines += ["", "Available Tensor Operations:",
              f"    [{'X' if info.get('cuda') == 'yes' else ' '}] CUDA (device memory)"
              + (f": {_devices()}" if info.get("cuda") == "yes" else ""),
              "    [X] CPU (host memory)"]
    try:
        lines.append(f"    [{'X' if bool(weft.nccl_shim_path()) else ' '}] NCCL shim (libnccl.so.2)")
    except FileNotFoundError:
        lines.append("    [ ] NCCL shim (libnccl.so.2)")
    return "\n".join(lines), True
