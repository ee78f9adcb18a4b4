#!/usr/bin/env python3
"""PyTorch's own distributed test suite on backend "weft".

    torch_suite.py WORLD_SIZE [unittest/pytest-style test name filters ...]

Runs torch.testing._internal.distributed.distributed_test's _DistTestBase
(the suite PyTorch runs for gloo in test_distributed_spawn.py) with every
process group on weft. The suite decides at import which tests apply to a
backend (decorators read $BACKEND then), so it is imported as for gloo: every
test that runs for gloo on this CPU machine is collected. Then the module's
BACKEND becomes "weft", which each test's init_process_group and its
backend-dependent expectations read while it runs. Ranks are forked (not
spawned), which keeps the suite within CI's time.

The tests weft does not run are in WEFT_SKIPS below, each with the missing
capability (docs/pytorch.md lists them too).
"""
import os
import sys
import tempfile
import unittest

if __name__ == "__main__":
    if len(sys.argv) < 2 or not sys.argv[1].isdigit():
        sys.exit(__doc__)
    os.environ["WORLD_SIZE"] = sys.argv.pop(1)
os.environ.setdefault("WORLD_SIZE", "2")
os.environ["BACKEND"] = "gloo"  # the suite's import-time selection: gloo's set of tests
os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="weft-torch-suite-"))
os.environ.setdefault("OMP_NUM_THREADS", "1")
# PyTorch's harness takes a set $CI for PyTorch's own CI: it then writes XML
# reports through xmlrunner (which it does not depend on) and skips its
# periodic tests. weft's CI sets CI=true; the suite must run the same there
# as on a developer's machine.
os.environ.pop("CI", None)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import weft.torch  # noqa: E402,F401  (registers "weft")

from torch.testing._internal import common_distributed  # noqa: E402
from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed import distributed_test as dt  # noqa: E402



class _WeftAsGloo(str):
    """The string "weft" (what init_process_group receives), equal to "gloo"
    as well: the suite's backend-dependent branches then expect of weft what
    they expect of gloo (its hash stays "weft"'s, for the feature sets)."""

    def __eq__(self, other):
        return str.__eq__(self, other) or other == "gloo"

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__


# WEFT_SUITE_CONTROL=gloo runs the same selection on gloo itself (the control).
CONTROL = os.environ.get("WEFT_SUITE_CONTROL") == "gloo"
dt.BACKEND = "gloo" if CONTROL else _WeftAsGloo("weft")
for feature in common_distributed.DistTestCases.backend_feature.values():
    if "gloo" in feature:
        feature.add("weft")
for collective in common_distributed.DistTestCases.skip_collective.values():
    if "gloo" in collective:
        collective.add("weft")

# test name -> the capability weft lacks (a test skipped here says so).
WEFT_SKIPS = {
    "test_send_recv_any_source": "recv from any source (weft matches sends and receives per pair of ranks)",
    "test_send_recv_any_source_autograd_profiler": "recv from any source",
    "test_send_recv_any_source_torch_profiler": "recv from any source",
    "test_sparse_all_reduce_sum": "sparse collectives",
    "test_ddp_logging_data_cpu": "torch's DDP logger names every out-of-tree backend 'custom', "
    "where the test expects the backend's own name",
    "test_monitored_barrier_gloo": "gloo's monitored_barrier protocol (rank 0 collects every "
    "rank's arrival; 'Rank N failed to pass monitoredBarrier' on rank 0, 'successfully reached' "
    "on the others); weft's is a bounded barrier whose error names the missing rank",
    "test_monitored_barrier_gloo_rank_0_timeout": "gloo's monitored_barrier protocol (see above)",
    "test_monitored_barrier_gloo_subgroup": "gloo's monitored_barrier protocol (see above)",
}


class TestWeftBackend(dt.TestDistBackend, dt.DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        # Forked: the ranks keep this module's BACKEND ("weft"); a spawned rank
        # would import the suite anew and see gloo.
        self._start_processes(torch.multiprocessing.get_context("fork").Process)


for _name, _why in ({} if CONTROL else WEFT_SKIPS).items():
    setattr(TestWeftBackend, _name, unittest.skip(f"weft: {_why}")(lambda self: None))

if __name__ == "__main__":
    run_tests()
