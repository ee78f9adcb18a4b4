"""The pip-installed weft as a user meets it: no PYTHONPATH, no import of
weft before init_process_group("weft") (torch finds the backend through the
torch.distributed.backends entry point). Exit 77 (skip) when weft is not
installed in this interpreter."""
import importlib.metadata as md
import os
import sys

try:
    dist_info = md.distribution("weft")
except md.PackageNotFoundError:
    print("SKIP: weft is not pip-installed in", sys.executable, "(bash .ci/quickstart test installs it)")
    sys.exit(77)
eps = [e for e in md.entry_points(group="torch.distributed.backends") if e.name == "weft"]
assert eps, "the weft distribution has no torch.distributed.backends entry point"

import datetime  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

assert "weft" not in sys.modules, "weft was imported before init_process_group"
dist.init_process_group("weft", init_method="tcp://127.0.0.1:0", rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=60))
import weft  # noqa: E402  (loaded by the entry point)

site = os.path.dirname(os.path.dirname(weft.__file__))
assert "site-packages" in site, f"weft came from {weft.__file__}, not an installed package"
t = torch.arange(4.0)
dist.all_reduce(t)
assert dist.get_backend() == "weft" and t.tolist() == [0.0, 1.0, 2.0, 3.0]
dist.destroy_process_group()
print(f"OK: weft {dist_info.version} from {weft.__file__} via the entry point; libweft at {weft.library_path()}")

# The weftrun console script, installed beside this interpreter.
import subprocess  # noqa: E402

weftrun = os.path.join(os.path.dirname(sys.executable), "weftrun")
assert os.access(weftrun, os.X_OK), f"{weftrun} was not installed (pyproject.toml [project.scripts])"
env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
out = subprocess.run([weftrun, "--check-build"], capture_output=True, text=True, env=env, timeout=120)
assert out.returncode == 0 and "[X] shm" in out.stdout and "[X] PyTorch" in out.stdout, out
out = subprocess.run([weftrun, "-np", "2", sys.executable, "-c",
                      "import torch, torch.distributed as dist; dist.init_process_group('weft'); "
                      "t = torch.ones(3); dist.all_reduce(t); print('sum', t.tolist())"],
                     capture_output=True, text=True, env=env, timeout=300)
assert out.returncode == 0 and out.stdout.count("sum [2.0, 2.0, 2.0]") == 2, out
print(f"OK: {weftrun} --check-build, and a 2-rank job")
