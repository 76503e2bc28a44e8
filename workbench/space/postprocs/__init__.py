"""Postprocessors (the validator) and the default set of each target kind."""

from .base import Postproc, Rejected, enter_postproc, run_postprocs, without_postproc
from .disallow_dynamic_loop import DisallowDynamicLoop
from .rewrite_cooperative_fetch import RewriteCooperativeFetch
from .rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll
from .rewrite_reduction_block import RewriteReductionBlock
from .rewrite_tensorize import RewriteTensorize
from .rewrite_unbound_block import RewriteUnboundBlock
from .verify_gpu_code import VerifyGPUCode


def default_postprocs(kind: str = "llvm") -> list[Postproc]:
    """Fresh instances of the default postprocessors for ``"llvm"`` or ``"cuda"`` (TVM's)."""
    if kind == "llvm":
        return [
            DisallowDynamicLoop(),
            RewriteParallelVectorizeUnroll(),
            RewriteReductionBlock(),
            RewriteTensorize(),
        ]
    if kind == "cuda":
        return [
            DisallowDynamicLoop(),
            RewriteCooperativeFetch(),
            RewriteUnboundBlock(),
            RewriteParallelVectorizeUnroll(),
            RewriteReductionBlock(),
            RewriteTensorize(),
            VerifyGPUCode(),
        ]
    raise ValueError(f"no default postprocessors for target kind {kind!r} (known: llvm, cuda)")


__all__ = [
    "Postproc",
    "Rejected",
    "enter_postproc",
    "run_postprocs",
    "without_postproc",
    "DisallowDynamicLoop",
    "RewriteParallelVectorizeUnroll",
    "RewriteReductionBlock",
    "RewriteTensorize",
    "RewriteCooperativeFetch",
    "RewriteUnboundBlock",
    "VerifyGPUCode",
    "default_postprocs",
]
