"""``AddRFactor``: parallelize a reduction whose spatial loops are too few, by factoring it.

A reduction such as ``C[b] = sum(A[b, i, j])`` with a small ``b`` leaves cores idle. The rule
reorders the reduce loops innermost, fuses them, splits the fused loop in two with a sampled
factor, and forks: ``rfactor`` on the outer part, ``rfactor`` on the inner part, and the
untouched original. The rfactor block computes partial sums over a new spatial axis; the
original block then sums the partials::

    for b, i, j:                       for b, ij_0, ij_1:          # rfactor(ij_1)
      C[b] += A[b, i, j]                 C_rf[b, ij_1] += A[b, ...]
                                       for b, ij_1:
                                         C[b] += C_rf[b, ij_1]
"""

from __future__ import annotations

from typing import Optional

from ...target import Target
from ...errors import ScheduleError
from ...ir.stmt import SPATIAL
from ...schedule import BlockRV, Schedule
from ..analysis import RANDOM_COMPUTE_PRODUCER, loop_iter_type, needs_rfactor
from .base import ScheduleRule, fork


class AddRFactor(ScheduleRule):
    """Fork a little-parallel reduction into its rfactor variants (TVM's ``AddRFactor``)."""

    def __init__(self, max_jobs_per_core: int = 16, max_innermost_factor: Optional[int] = 64):
        self.max_jobs_per_core = max_jobs_per_core
        self.max_innermost_factor = max_innermost_factor

    @property
    def max_parallel_extent(self) -> int:
        cores = (self.target or Target.host()).num_cores
        return cores * self.max_jobs_per_core if self.max_jobs_per_core != -1 else cores

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not needs_rfactor(sch.index, sch.get(block), self.max_parallel_extent):
            return [sch]
        original = fork(sch)
        fused, n_spatial = reorder_and_fuse_reduction_loops(sch, block)
        factors = sch.sample_perfect_tile(fused, n=2, max_innermost_factor=self.max_innermost_factor)
        results = []
        for part in sch.split(fused, factors=factors):
            branch = fork(sch)
            try:
                rf = branch.rfactor(part, n_spatial)
            except ScheduleError:
                continue  # this split cannot be factored; the other branches remain
            branch.get_loops(rf)  # TVM's rule queries the rfactor block's loops: the same trace
            branch.annotate(block, RANDOM_COMPUTE_PRODUCER, 1)
            results.append(branch)
        return results + [original]


def reorder_and_fuse_reduction_loops(sch: Schedule, block: BlockRV):
    """Move the block's reduce loops innermost and fuse them; returns (fused loop, number of
    spatial loops)."""
    loops = sch.get_loops(block)
    idx = sch.index
    kinds = [loop_iter_type(idx, sch.get(l)) for l in loops]
    spatial = [l for l, k in zip(loops, kinds) if k == SPATIAL]
    reduce = [l for l, k in zip(loops, kinds) if k != SPATIAL]
    if spatial + reduce != loops:  # only when needed: loops above may hold other statements
        sch.reorder(*spatial, *reduce)
    return (sch.fuse(*reduce) if len(reduce) > 1 else reduce[0]), len(spatial)
