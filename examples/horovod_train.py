"""A Horovod PyTorch training script, run on weft: only the import line differs.

    torchrun --nproc-per-node 2 examples/horovod_train.py
    mpirun -np 2 python examples/horovod_train.py          # single node
    weftrun -np 2 python examples/horovod_train.py

An MNIST-style problem without downloads: 28x28 synthetic images of 10
classes (a fixed template per class plus noise, fixed seed), a small CNN,
each rank training on its shard (DistributedSampler with hvd.size() /
hvd.rank()), the learning rate scaled by hvd.size(), parameters and
optimizer state broadcast from rank 0, gradients averaged by
hvd.DistributedOptimizer, and the metrics averaged over the ranks with
hvd.allreduce. With --batch-size B/N on N ranks it follows, up to float
rounding, the run of one process with --batch-size B (tests/python/
test_hvd_optimizer.py checks the loss curves).
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as tud

import weft.torch as hvd  # was: import horovod.torch as hvd


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, kernel_size=5)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=5)
        self.fc1 = nn.Linear(16 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = F.relu(self.fc1(x.flatten(1)))
        return F.log_softmax(self.fc2(x), dim=1)


def synthetic_mnist(samples=4096, seed=0):
    """Images of 10 classes: a random template per class, shifted and noisy."""
    g = torch.Generator().manual_seed(seed)
    templates = torch.rand(10, 1, 28, 28, generator=g)
    labels = torch.randint(0, 10, (samples,), generator=g)
    images = templates[labels] + 0.3 * torch.randn(samples, 1, 28, 28, generator=g)
    return tud.TensorDataset(images, labels)


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value), name=name).item()


def train(batch_size=32, lr=0.1, steps=40, epochs=1, seed=42, log=None):
    """Trains on the ranks of hvd.init(); returns (averaged loss per step, the weights)."""
    torch.manual_seed(seed + hvd.rank())  # different on purpose: broadcast_parameters aligns them
    dataset = synthetic_mnist()
    sampler = tud.distributed.DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank(),
                                                 shuffle=True, seed=seed, drop_last=True)
    loader = tud.DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True)
    model = Net()
    # Horovod: scale the learning rate by the number of ranks (the global batch grows with it).
    optimizer = torch.optim.SGD(model.parameters(), lr=lr * hvd.size(), momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=hvd.Compression.none, op=hvd.Average)
    losses, step = [], 0
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        model.train()
        for data, target in loader:
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            losses.append(metric_average(loss.item(), "avg_loss"))
            if log and hvd.rank() == 0 and step % 10 == 0:
                log(f"epoch {epoch} step {step}: loss {losses[-1]:.6f}")
            step += 1
            if step == steps:
                return losses, [p.detach().clone() for p in model.parameters()]
    return losses, [p.detach().clone() for p in model.parameters()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=32, help="per rank")
    ap.add_argument("--lr", type=float, default=0.1, help="per rank; scaled by hvd.size()")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--epochs", type=int, default=1)
    args = ap.parse_args()
    hvd.init()
    torch.set_num_threads(1)
    losses, weights = train(args.batch_size, args.lr, args.steps, args.epochs, log=print)
    checksum = sum(float(w.double().sum()) for w in weights)
    sums = hvd.allgather_object(checksum)
    if hvd.rank() == 0:
        same = all(s == sums[0] for s in sums)
        print(f"{hvd.size()} ranks, {len(losses)} steps: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
              f"weight checksum {checksum:.10f}, {'identical on every rank' if same else 'DIFFERENT across ranks'}")
        if not same:
            raise SystemExit(1)
    hvd.shutdown()


if __name__ == "__main__":
    main()
