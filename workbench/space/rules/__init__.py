"""Schedule rules (transformation modules) and the default rule set of each target kind."""

from .add_rfactor import AddRFactor
from .auto_bind import AutoBind
from .auto_inline import AutoInline
from .base import ScheduleRule, fork
from .cross_thread_reduction import CrossThreadReduction
from .multi_level_tiling import MultiLevelTiling, ReuseType
from .parallel_vectorize_unroll import ParallelizeVectorizeUnroll
from .random_compute_location import RandomComputeLocation
from .tensor_core import MultiLevelTilingTensorCore
from .tensorize import MultiLevelTilingWithIntrin


def default_rules(kind: str = "llvm") -> list[ScheduleRule]:
    """Fresh instances of the default rules for ``"llvm"`` (CPU) or ``"cuda"`` (TVM's)."""
    if kind == "llvm":
        return [
            AutoInline(
                into_producer=False,
                into_consumer=True,
                inline_const_tensor=True,
                disallow_if_then_else=True,
                require_injective=True,
                require_ordered=True,
                disallow_op=["exp"],
            ),
            AddRFactor(max_jobs_per_core=16, max_innermost_factor=64),
            MultiLevelTiling(
                structure="SSRSRS", max_innermost_factor=64, reuse_write=ReuseType("may", (1, 2), "global")
            ),
            ParallelizeVectorizeUnroll(
                max_jobs_per_core=16,
                max_vectorize_extent=64,
                unroll_max_steps=[0, 16, 64, 512],
                unroll_explicit=True,
            ),
            RandomComputeLocation(),
        ]
    if kind == "cuda":
        return [
            MultiLevelTilingTensorCore(),  # fp16 matrix multiplies on wmma tiles (A.3)
            MultiLevelTiling(
                structure="SSSRRSRS",
                tile_binds=["blockIdx.x", "vthread.x", "threadIdx.x"],
                max_innermost_factor=64,
                vector_load_lens=[1, 2, 3, 4, 8, 16],
                reuse_read=ReuseType("must", (4,), "shared"),
                reuse_write=ReuseType("must", (3,), "local"),
            ),
            AutoInline(
                into_producer=True,
                into_consumer=True,
                inline_const_tensor=True,
                disallow_if_then_else=False,
                require_injective=False,
                require_ordered=False,
                disallow_op=[],
            ),
            CrossThreadReduction(thread_extents=[4, 8, 16, 32, 64, 128, 256, 512]),
            ParallelizeVectorizeUnroll(
                max_jobs_per_core=-1,
                max_vectorize_extent=-1,
                unroll_max_steps=[0, 16, 32, 64, 128, 256, 512, 1024],
                unroll_explicit=True,
            ),
            AutoBind(max_threadblocks=256, thread_extents=[32, 64, 128, 256, 512, 1024]),
        ]
    raise ValueError(f"no default schedule rules for target kind {kind!r} (known: llvm, cuda)")


__all__ = [
    "ScheduleRule",
    "fork",
    "AutoInline",
    "AutoBind",
    "CrossThreadReduction",
    "MultiLevelTiling",
    "ReuseType",
    "ParallelizeVectorizeUnroll",
    "RandomComputeLocation",
    "AddRFactor",
    "MultiLevelTilingWithIntrin",
    "MultiLevelTilingTensorCore",
    "default_rules",
]
