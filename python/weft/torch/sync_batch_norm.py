"""hvd.SyncBatchNorm: batch normalization over the batches of all ranks.

In training, the mean and variance of each channel come from every rank's
batch together: two differentiable Sum allreduces (the sums and counts, then
the squared deviations from the global mean), so backward reduces their
gradients the same way. In eval mode, or on one rank, it is BatchNorm.
Every rank must run forward (and backward) through the same layers in the
same order, as for any collective.
"""
import torch
from torch.nn.modules.batchnorm import _BatchNorm

from . import _basics, mpi_ops


class SyncBatchNorm(_BatchNorm):
    """Horovod's SyncBatchNorm: drop-in for BatchNorm1d/2d/3d."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def _factor(self):
        if not (self.training and self.track_running_stats):
            return 0.0
        self.num_batches_tracked.add_(1)
        if self.momentum is None:
            return 1.0 / float(self.num_batches_tracked)
        return self.momentum

    def forward(self, input):
        self._check_input_dim(input)
        if not self.training or _basics.size() == 1:
            return super().forward(input)
        factor = self._factor()
        channels = input.shape[1]
        dims = [0] + list(range(2, input.dim()))
        shape = [1, channels] + [1] * (input.dim() - 2)
        count = torch.tensor([input.numel() // channels], dtype=input.dtype, device=input.device)
        totals = mpi_ops.allreduce(torch.cat([input.sum(dims), count]), op=mpi_ops.Sum)
        n = totals[-1]
        mean = totals[:channels] / n
        centered = input - mean.reshape(shape)
        var = mpi_ops.allreduce((centered * centered).sum(dims), op=mpi_ops.Sum) / n
        if self.track_running_stats:
            with torch.no_grad():
                unbiased = var * (n / (n - 1)) if n.item() > 1 else var
                self.running_mean.mul_(1 - factor).add_(mean.detach(), alpha=factor)
                self.running_var.mul_(1 - factor).add_(unbiased.detach(), alpha=factor)
        out = centered / torch.sqrt(var + self.eps).reshape(shape)
        if self.affine:
            out = out * self.weight.reshape(shape) + self.bias.reshape(shape)
        return out
