"""weft.torch's per-tensor timeline (WEFT_TIMELINE): every parameter of a
DistributedOptimizer gets a track with its QUEUE, NEGOTIATE and ALLREDUCE
spans, in order, beside the collectives of the communicators (the data
group and weft.torch's check group share the rank's file, each on its own
track), and the file is valid JSON. Off, nothing is written."""
import json

import torch

from hvd_ranks import run_hvd


def _train(rank, n):
    import weft.torch as hvd

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
    hvd.allreduce(torch.ones(3), name="metric")
    return [name for name, _ in model.named_parameters()]


def test_each_gradient_gets_its_phases(tmp_path):
    pattern = str(tmp_path / "tl%r.json")
    names = run_hvd(_train, 2, env={"WEFT_TIMELINE": pattern})[0]
    for rank in range(2):
        with open(pattern.replace("%r", str(rank))) as fh:
            d = json.load(fh)  # valid JSON
        ev = d["traceEvents"]
        tracks = {e["tid"]: e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
        comms = [t for t in tracks.values() if t.startswith("comm ")]
        assert len(comms) == 2, f"rank {rank}: the two groups' tracks: {comms}"
        by_track = {}
        for e in ev:
            if e.get("ph") == "X":
                by_track.setdefault(tracks.get(e["tid"], "?"), []).append(e)
        for name in names + ["metric"]:
            spans = by_track.get("tensor " + name)
            assert spans, f"rank {rank}: no track for {name}"
            phases = [s["name"] for s in spans]
            want = 3 if name != "metric" else 1
            assert phases.count("ALLREDUCE") == want and phases.count("NEGOTIATE") == want, phases
            if name != "metric":
                assert phases.count("QUEUE") == 3, phases
                # Within a step: QUEUE ends where the bucket's NEGOTIATE starts
                # (its check), which ends where the ALLREDUCE starts.
                q = sorted((s for s in spans if s["name"] == "QUEUE"), key=lambda s: s["ts"])
                a = sorted((s for s in spans if s["name"] == "ALLREDUCE"), key=lambda s: s["ts"])
                for qs, as_ in zip(q, a):
                    assert qs["ts"] + qs["dur"] <= as_["ts"] + 1e-3
        assert any(e["name"].startswith("allreduce #") for e in ev if e.get("ph") == "X")


def _train_untraced(rank, n):
    from weft.torch import _timeline

    _train(rank, n)
    return _timeline.enabled(), _timeline._lib is None


def test_nothing_without_the_timeline():
    # Off: no span is formatted and libweft is not even opened through ctypes.
    assert run_hvd(_train_untraced, 2) == [(False, True), (False, True)]
