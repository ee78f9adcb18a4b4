#!/usr/bin/env python3
"""PyTorch loads with the shim in place of NCCL (CPU-only machines too).

    torch_import.py --shim build/libweft-nccl.so --version 23007

1. Every NCCL symbol libtorch_cuda.so imports is exported by the shim (the
   import fails with "undefined symbol" otherwise).
2. With LD_PRELOAD of the shim, `import torch` succeeds and
   torch.cuda.nccl.version() and unique_id() answer: the version the shim
   implements (--version, NCCL_VERSION_CODE of the nccl.h it was built
   against), and NCCL_DEBUG=VERSION prints weft's banner, so the shim, not
   the NCCL that torch ships, answered.
Exit status: 0 passed, 1 failed, 77 skipped (no torch in this interpreter).
"""
import argparse
import ctypes
import os
import shutil
import subprocess
import sys

SKIP = 77


def torch_nccl_imports():
    import importlib.util
    spec = importlib.util.find_spec("torch")
    lib = os.path.join(os.path.dirname(spec.origin), "lib", "libtorch_cuda.so")
    if not os.path.exists(lib) or not shutil.which("nm"):
        return lib, None
    out = subprocess.run(["nm", "-D", "--undefined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    names = sorted({l.split()[-1].split("@")[0] for l in out.splitlines()
                    if l.split() and l.split()[-1].startswith("nccl")})
    return lib, names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--version", type=int, required=True)
    a = ap.parse_args()
    try:
        import importlib.util
        if importlib.util.find_spec("torch") is None:
            raise ImportError
    except ImportError:
        print("SKIP: torch is not installed in", sys.executable)
        return SKIP
    lib, names = torch_nccl_imports()
    failed = []
    if names is None:
        print(f"note: {lib} or nm missing; the symbol list is not checked")
    else:
        shim = ctypes.CDLL(a.shim, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        missing = [n for n in names if not hasattr(shim, n)]
        print(f"libtorch_cuda.so imports {len(names)} NCCL symbols; missing from the shim: {missing}")
        if missing:
            failed.append(f"the shim lacks {missing}: it was built against NCCL {a.version} "
                          "headers, older than the NCCL torch uses; build it against the "
                          "nvidia-nccl wheel's (cmake -DWEFT_NCCL_INCLUDE_DIR=.../nvidia/nccl/include, "
                          "or -DPython3_EXECUTABLE=<this python>)")
        if len(names) < 20:
            failed.append(f"only {len(names)} NCCL imports found in {lib}: the list looks wrong")
    code = ("import torch, torch.cuda.nccl as n\n"
            "print('version', n.version())\n"
            "print('unique_id', len(n.unique_id()))\n")
    env = dict(os.environ, LD_PRELOAD=os.path.abspath(a.shim), NCCL_DEBUG="VERSION")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=240)
    out = p.stdout + p.stderr
    print(out.strip())
    want = (a.version // 10000, a.version // 100 % 100, a.version % 100)
    if p.returncode != 0:
        failed.append(f"import torch with the shim preloaded exited {p.returncode}")
    if f"version {want}" not in out:
        failed.append(f"torch.cuda.nccl.version() is not {want}")
    if "unique_id 128" not in out:
        failed.append("torch.cuda.nccl.unique_id() did not give 128 bytes")
    banner = f"(NCCL ABI {want[0]}.{want[1]})"
    if "weft" not in out or banner not in out:
        failed.append(f"no weft banner '{banner}': the shim did not answer")
    for f in failed:
        print("FAIL:", f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
