"""``ParallelizeVectorizeUnroll``: leave the CPU-parallelism decisions to a postprocessor.

How many outer loops to fuse into one parallel loop, or inner loops into one vector loop,
depends on extents that are random variables, so the rule only *annotates* the root block with
the limits (and a sampled unroll depth); :class:`~workbench.space.postprocs.
RewriteParallelVectorizeUnroll` turns them into loop kinds once the decisions are known.

After the rule on the root block::

    block root:  annotations = {"meta_schedule.parallel": 32, "meta_schedule.vectorize": 64,
                                "meta_schedule.unroll_explicit": v0}   # v0 in [0, 16, 64, 512]
"""

from __future__ import annotations

from typing import Optional, Sequence

from ...target import Target
from ...schedule import BlockRV, Schedule
from ..analysis import PARALLEL, UNROLL_EXPLICIT, UNROLL_IMPLICIT, VECTORIZE, is_spatial_func
from .base import ScheduleRule


class ParallelizeVectorizeUnroll(ScheduleRule):
    """Annotate the root block with parallel / vectorize limits and a sampled unroll step.

    ``max_jobs_per_core``: parallel jobs per core (-1: no parallelism); ``max_vectorize_extent``
    (-1: no vectorization); ``unroll_max_steps``: the candidates of ``sample_categorical`` (empty:
    no unrolling; functions without reductions are not unrolled); ``unroll_explicit``: unroll
    in the IR rather than leaving it to LLVM.
    """

    def __init__(
        self,
        max_jobs_per_core: int = 16,
        max_vectorize_extent: int = 64,
        unroll_max_steps: Sequence[int] = (0, 16, 64, 512),
        unroll_explicit: bool = True,
    ):
        self.max_jobs_per_core = max_jobs_per_core
        self.max_vectorize_extent = max_vectorize_extent
        self.unroll_max_steps = list(unroll_max_steps)
        self.unroll_explicit = unroll_explicit

    @property
    def max_parallel_extent(self) -> Optional[int]:
        if self.max_jobs_per_core == -1:
            return None
        return (self.target or Target.host()).num_cores * self.max_jobs_per_core

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if sch.index.scope(sch.get(block)) is not None:
            return [sch]  # only the root block carries the annotations
        if self.max_parallel_extent is not None:
            sch.annotate(block, PARALLEL, self.max_parallel_extent)
        if self.max_vectorize_extent != -1:
            sch.annotate(block, VECTORIZE, self.max_vectorize_extent)
        if self.unroll_max_steps and not is_spatial_func(sch.func):
            n = len(self.unroll_max_steps)
            step = sch.sample_categorical(self.unroll_max_steps, [1.0 / n] * n)
            sch.annotate(block, UNROLL_EXPLICIT if self.unroll_explicit else UNROLL_IMPLICIT, step)
        return [sch]
