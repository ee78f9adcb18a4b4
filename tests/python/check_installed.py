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
