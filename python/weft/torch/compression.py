"""Gradient compression, with Horovod's interface: Compression.none, .fp16, .bf16.

A compressor's compress(tensor) returns (wire tensor, ctx); decompress(wire
tensor, ctx) returns the tensor in its original dtype. fp16 and bf16 send
floating-point tensors of wider types in 16 bits (and reduce them in 16 bits,
so sums lose precision: fp16 keeps ~3 significant digits and overflows past
65504, bf16 keeps ~2 digits with fp32's range); other tensors go unchanged.
"""
import torch


class Compressor:
    """Compresses a tensor for the wire and restores it after the collective."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


def _cast_compressor(wire_dtype, doc):
    class _Cast(Compressor):
        __doc__ = doc

        @staticmethod
        def compress(tensor):
            dtype = tensor.dtype
            if dtype.is_floating_point and dtype != wire_dtype and torch.finfo(dtype).bits > 16:
                return tensor.to(wire_dtype), dtype
            return tensor, dtype

        @staticmethod
        def decompress(tensor, ctx):
            return tensor if ctx is None or tensor.dtype == ctx else tensor.to(ctx)

    return _Cast


FP16Compressor = _cast_compressor(torch.float16, "Sends float32/float64 tensors as float16.")
FP16Compressor.__name__ = FP16Compressor.__qualname__ = "FP16Compressor"
BF16Compressor = _cast_compressor(torch.bfloat16, "Sends float32/float64 tensors as bfloat16.")
BF16Compressor.__name__ = BF16Compressor.__qualname__ = "BF16Compressor"


class Compression:
    """The compressors, by Horovod's names."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
