"""weft.torch refuses what Horovod refuses, on every rank, without hanging.

Ranks that call different collectives at the same point (another name, shape,
dtype, op, root or kind of collective) all raise MismatchError naming rank
0's call and the differing rank's; the job goes on afterwards (the check runs
before any data moves). Bad arguments (a root out of range, process sets,
Adasum) raise ValueError / NotImplementedError. With WEFT_TORCH_CHECK=0 the
matching calls still work. The launcher environment parsing (_env.py) is
checked without processes.
"""
import pytest
import torch

from hvd_ranks import run_hvd

# Each case: (what rank `odd` calls, what the others call), as functions of hvd.
MISMATCHES = {
    "name": (lambda hvd: hvd.allreduce(torch.ones(3), name="loss.b"),
             lambda hvd: hvd.allreduce(torch.ones(3), name="loss.a"), ["'loss.a'", "'loss.b'"]),
    "shape": (lambda hvd: hvd.allreduce(torch.ones(4), name="x"),
              lambda hvd: hvd.allreduce(torch.ones(3), name="x"), ["float32[3]", "float32[4]"]),
    "dtype": (lambda hvd: hvd.allreduce(torch.ones(3, dtype=torch.float64), name="x"),
              lambda hvd: hvd.allreduce(torch.ones(3), name="x"), ["float32[3]", "float64[3]"]),
    "op": (lambda hvd: hvd.allreduce(torch.ones(3), name="x", op=hvd.Sum),
           lambda hvd: hvd.allreduce(torch.ones(3), name="x"), ["op=Average", "op=Sum"]),
    "unnamed shapes": (lambda hvd: hvd.allreduce(torch.ones(2, 2)),
                       lambda hvd: hvd.allreduce(torch.ones(4)), ["'allreduce.noname.0' float32[4]",
                                                                  "'allreduce.noname.0' float32[2, 2]"]),
    "allgather other dims": (lambda hvd: hvd.allgather(torch.ones(2, 5), name="g"),
                             lambda hvd: hvd.allgather(torch.ones(2, 4), name="g"),
                             ["float32[*, 4]", "float32[*, 5]"]),
    "broadcast root": (lambda hvd: hvd.broadcast(torch.ones(3), 1, name="b"),
                       lambda hvd: hvd.broadcast(torch.ones(3), 0, name="b"), ["root=0", "root=1"]),
    "kind": (lambda hvd: hvd.broadcast(torch.ones(3), 0, name="x"),
             lambda hvd: hvd.allreduce(torch.ones(3), name="x"), ["allreduce 'x'", "broadcast 'x'"]),
    "grouped count": (lambda hvd: hvd.grouped_allreduce([torch.ones(3)], name="gr"),
                      lambda hvd: hvd.grouped_allreduce([torch.ones(3), torch.ones(3)], name="gr"),
                      ["'gr.1'"]),
}


def _mismatches(rank, n):
    import weft.torch as hvd

    odd = n - 1
    out = {}
    for case, (odd_call, call, _) in MISMATCHES.items():
        try:
            (odd_call if rank == odd else call)(hvd)
            out[case] = None
        except hvd.MismatchError as e:
            out[case] = str(e)
        # the job goes on: the next collective works on every rank
        ok = hvd.allreduce(torch.ones(2) * (rank + 1), op=hvd.Sum, name=f"after {case}")
        if ok.tolist() != [n * (n + 1) / 2] * 2:
            out[case] = f"the allreduce after the mismatch gave {ok.tolist()}"
    return out


@pytest.mark.parametrize("n", [2, 3])
def test_mismatch_raises_on_every_rank_naming_both(n):
    res = run_hvd(_mismatches, n)
    failures = []
    for case, (_, _, words) in MISMATCHES.items():
        for r in range(n):
            msg = res[r][case]
            if msg is None:
                failures.append(f"{case}: rank {r} did not raise")
            elif not all(w in msg for w in words) or "rank 0:" not in msg or f"rank {n - 1}:" not in msg:
                failures.append(f"{case}: rank {r}'s message lacks {words}: {msg}")
    assert not failures, "\n".join(failures)


def _optimizer_mismatch(rank, n):
    import torch.nn as nn

    import weft.torch as hvd

    model = nn.Linear(4, 3 if rank == 0 else 2)  # not the same model everywhere
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    try:
        model(torch.ones(2, 4)).sum().backward()
        opt.step()
    except hvd.MismatchError as e:
        return str(e)
    return None


def test_optimizer_with_different_models_raises_on_every_rank():
    for r, msg in enumerate(run_hvd(_optimizer_mismatch, 2)):
        assert msg and "'weight' float32[3, 4]" in msg and "'weight' float32[2, 4]" in msg, f"rank {r}: {msg}"


def _bad_arguments(rank, n):
    import weft.torch as hvd

    errors = {}
    calls = {
        "root out of range": (ValueError, lambda: hvd.broadcast(torch.ones(2), n)),
        "negative root": (ValueError, lambda: hvd.broadcast_(torch.ones(2), -1)),
        "broadcast_object root": (ValueError, lambda: hvd.broadcast_object(1, root_rank=n)),
        "process_set": (NotImplementedError, lambda: hvd.allreduce(torch.ones(2), process_set=object())),
        "add_process_set": (NotImplementedError, lambda: hvd.add_process_set([0])),
        "Adasum": (NotImplementedError, lambda: hvd.allreduce(torch.ones(2), op=hvd.Adasum)),
        "op and average": (ValueError, lambda: hvd.allreduce(torch.ones(2), op=hvd.Sum, average=True)),
        "unknown op": (ValueError, lambda: hvd.allreduce(torch.ones(2), op=42)),
        "alltoall splits": (ValueError, lambda: hvd.alltoall(torch.ones(3), splits=[1] * (n + 1))),
        "alltoall uneven": (ValueError, lambda: hvd.alltoall(torch.ones(n + 1))),
        "sparse": (ValueError, lambda: hvd.allreduce(torch.ones(2).to_sparse())),
        "init(comm)": (ValueError, lambda: hvd.init(comm=[0])),
        "predivide with Sum": (ValueError, lambda: hvd.DistributedOptimizer(
            torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1), op=hvd.Sum, gradient_predivide_factor=2)),
        "duplicate names": (ValueError, lambda: hvd.DistributedOptimizer(
            torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1),
            named_parameters=[("w", torch.zeros(1)), ("w", torch.zeros(1))])),
    }
    for what, (kind, call) in calls.items():
        try:
            call()
            errors[what] = "no error"
        except kind as e:
            errors[what] = None if str(e) else "empty message"
        except Exception as e:  # noqa: BLE001 - reported
            errors[what] = f"{type(e).__name__}: {e}"
    # nothing half-issued: the next collective matches on every rank
    errors["after"] = None if hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == n else "broken"
    return {k: v for k, v in errors.items() if v is not None}


def test_bad_arguments_raise():
    assert run_hvd(_bad_arguments, 2) == [{}, {}]


def _check_off(rank, n):
    import weft.torch as hvd
    from weft.torch import _check

    assert not _check.enabled()
    a = hvd.allgather(torch.full((rank + 1, 2), float(rank)))
    out, received = hvd.alltoall(torch.arange(n + rank), splits=[1] * (n - 1) + [1 + rank])
    return a.tolist(), received.tolist(), hvd.allreduce(torch.ones(1), op=hvd.Sum).item()


def test_check_off_still_runs_matching_calls():
    res = run_hvd(_check_off, 2, env={"WEFT_TORCH_CHECK": "0"})
    assert res[0][0] == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]
    assert res[0][1] == [1, 1] and res[1][1] == [1, 2] and res[0][2] == 2.0


# ---- the launcher environment, without processes -------------------------


def test_env_launchers():
    from weft.torch import _env

    none = _env.detect({})
    assert (none.launcher, none.rank, none.size, none.local_size) == ("none", 0, 1, 1)
    tr = _env.detect({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1"})
    assert (tr.launcher, tr.rank, tr.local_rank, tr.cross_rank, tr.cross_size) == ("torchrun", 5, 1, 1, 2)
    both = _env.detect({"WEFT_RANK": "2", "WEFT_NRANKS": "4", "RANK": "0", "WORLD_SIZE": "9"})
    assert (both.launcher, both.rank, both.size) == ("weftrun", 2, 4)  # weftrun wins
    ompi = _env.detect({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
                        "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    assert (ompi.launcher, ompi.local_rank, ompi.local_size, ompi.cross_rank) == ("openmpi", 1, 2, None)
    pmi = _env.detect({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"})
    assert (pmi.launcher, pmi.rank, pmi.local_size) == ("mpich", 1, 2)
    slurm = _env.detect({"SLURM_PROCID": "4", "SLURM_NTASKS": "5", "SLURM_LOCALID": "0", "SLURM_NODEID": "2",
                         "SLURM_NNODES": "3", "SLURM_TASKS_PER_NODE": "2(x2),1", "SLURM_JOB_ID": "77",
                         "SLURM_STEP_ID": "0"})
    assert (slurm.launcher, slurm.local_size, slurm.cross_rank, slurm.cross_size) == ("slurm", 1, 2, 3)
    # An sbatch script (no srun step): one process, and a warning that says why.
    with pytest.warns(UserWarning, match="SLURM_NTASKS=4 but this process was not started by srun"):
        batch = _env.detect({"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "78"})
    assert (batch.launcher, batch.rank, batch.size) == ("none", 0, 1)
    assert _env.slurm_tasks_on_node("3,2(x2)", 2) == 2
    with pytest.raises(ValueError, match="WEFT_RANK is set but WEFT_NRANKS is not"):
        _env.detect({"WEFT_RANK": "1"})
    with pytest.raises(ValueError, match="not in"):
        _env.detect({"RANK": "4", "WORLD_SIZE": "4"})


def test_env_rendezvous():
    from weft.torch import _env

    launch = _env.detect({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4",
                          "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    assert _env.rendezvous(launch, {"MASTER_ADDR": "n1", "MASTER_PORT": "1234"}) == ("n1", 1234)
    assert _env.rendezvous(launch, {"WEFT_ROOT_ADDR": "[fe80::1]:99"}) == ("fe80::1", 99)
    with pytest.raises(ValueError, match="MASTER_ADDR and MASTER_PORT.*WEFT_ROOT_ADDR"):
        _env.rendezvous(launch, {})  # two nodes, no address
    one_node = _env.detect({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
                            "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
                            "OMPI_MCA_ess_base_jobid": "1234"})
    host, port = _env.rendezvous(one_node, {})
    assert host == "127.0.0.1" and 29600 <= port < 49600
    assert _env.rendezvous(one_node, {}) == (host, port)  # every rank derives the same port
    with pytest.raises(ValueError, match="not a port"):
        _env.rendezvous(launch, {"MASTER_ADDR": "n1", "MASTER_PORT": "x"})


def test_env_rendezvous_multi_node_srun():
    """srun across nodes: rank 0 is on the step's first node, the port comes
    from the job and step ids; rank 0 refuses to serve when it is elsewhere."""
    from weft.torch import _env

    assert _env.slurm_first_host("gpu[07-09,12],cpu1") == "gpu07"
    assert _env.slurm_first_host("rack[2-3]-n[01-04]") == "rack2-n01"
    assert _env.slurm_first_host("node5,node1") == "node5"

    def srun(rank, node, extra=()):
        env = {"SLURM_PROCID": str(rank), "SLURM_STEP_NUM_TASKS": "4", "SLURM_LOCALID": str(rank % 2),
               "SLURM_NODEID": str(node), "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
               "SLURM_JOB_ID": "41", "SLURM_STEP_ID": "3", "SLURM_STEP_NODELIST": "n[08-09]",
               "SLURMD_NODENAME": f"n0{8 + node}"}
        env.update(extra)
        return env

    places = {_env.rendezvous(_env.detect(e), e) for e in (srun(r, r // 2) for r in range(4))}
    assert len(places) == 1, places  # every rank looks in one place
    host, port = places.pop()
    assert host == "n08" and 29600 <= port < 49600
    other_step = srun(1, 0, {"SLURM_STEP_ID": "4"})
    assert _env.rendezvous(_env.detect(other_step), other_step)[1] != port
    moved = srun(0, 1)  # rank 0 on the second node: it says so instead of waiting
    with pytest.raises(ValueError, match="rank 0 runs on n09, not on n08"):
        _env.rendezvous(_env.detect(moved), moved)
    by_hand = srun(1, 0, {"SLURM_DISTRIBUTION": "arbitrary"})  # placement given by hand: no guess
    with pytest.raises(ValueError, match="MASTER_ADDR and MASTER_PORT"):
        _env.rendezvous(_env.detect(by_hand), by_hand)
