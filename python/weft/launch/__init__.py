"""weftrun: starts one command as N ranks, on this machine or over ssh.

    weftrun -np 4 python train.py
    weftrun -np 8 -H node1:4,node2:4 python train.py
    weftrun --check-build

Each rank gets the variables of weft's own launcher (WEFT_RANK, ...), of
torchrun (RANK, WORLD_SIZE, MASTER_ADDR, ...), so that weft.torch.init(),
torch.distributed.init_process_group("weft") and weft_comm_init_env all find
their rank. See docs/weftrun.md.
"""
