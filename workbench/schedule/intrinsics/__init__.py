"""Built-in tensor intrinsics, registered with
:class:`~workbench.schedule.tensor_intrin.TensorIntrin` when this package is imported (by
``workbench.schedule``; one module per instruction family). :func:`gemm_intrinsics` gives the
fp32 GEMM micro-kernels suited to a target (AVX-512, AVX2 + FMA, or none); :mod:`.cuda` holds the
tensor-core (wmma) ones."""

from . import cuda, x86  # noqa: F401  (registration)
from .x86 import gemm_intrinsics

__all__ = ["gemm_intrinsics"]
