#!/usr/bin/env python3
"""libweft.so and the NCCL shim through ctypes, as a Python user loads them.

    ctypes_check.py LIBWEFT SHIM

When torch is importable it is imported first (a process full of other
libraries and their thread-locals, the case that failed with "cannot
allocate memory in static TLS block"). Two ranks as Python threads run an
allreduce through ctypes (which releases the GIL during the call); the shim
answers its version. Exit 0 on success.
"""
import ctypes
import sys
import threading

try:
    import torch  # noqa: F401  (loaded first on purpose)

    print("torch", torch.__version__, "imported first")
except ImportError:
    print("torch not installed: loading after the interpreter's own libraries only")

weft_path, shim_path = sys.argv[1], sys.argv[2]
weft = ctypes.CDLL(weft_path)
weft.weft_get_last_error.restype = ctypes.c_char_p

comms = (ctypes.c_void_p * 2)()
rc = weft.weft_comm_init_all(comms, 2)
if rc != 0:
    sys.exit(f"FAIL: weft_comm_init_all: {weft.weft_get_last_error(None).decode()}")

COUNT = 1000
results = {}


def rank(r):
    buf = (ctypes.c_double * COUNT)(*[float(r + 1) * i for i in range(COUNT)])
    # WEFT_FLOAT64 = 8, WEFT_MAX = 2
    rc = weft.weft_allreduce(buf, buf, ctypes.c_size_t(COUNT), 8, 2, ctypes.c_void_p(comms[r]), None)
    results[r] = (rc, list(buf), weft.weft_get_last_error(None).decode())


threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join(timeout=120)
    if t.is_alive():
        sys.exit("FAIL: an allreduce through ctypes did not return in 120 s")
for r in range(2):
    rc, buf, err = results[r]
    if rc != 0:
        sys.exit(f"FAIL: rank {r}: allreduce returned {rc}: {err}")
    want = [2.0 * i for i in range(COUNT)]
    if buf != want:
        bad = next(i for i in range(COUNT) if buf[i] != want[i])
        sys.exit(f"FAIL: rank {r}: element {bad} is {buf[bad]}, not {want[bad]}")
for r in range(2):
    weft.weft_comm_destroy(ctypes.c_void_p(comms[r]))

shim = ctypes.CDLL(shim_path)
version = ctypes.c_int(0)
if shim.ncclGetVersion(ctypes.byref(version)) != 0 or version.value < 22800:
    sys.exit(f"FAIL: ncclGetVersion through ctypes gave {version.value}")
print(f"OK: libweft.so allreduce on 2 threads and the shim (NCCL {version.value}) through ctypes")
