"""``RandomComputeLocation``: move a producer stage under a sampled loop of its consumer.

``sample_compute_location`` draws one of the loops where ``compute_at`` is valid (or the root,
or inlining), and ``compute_at`` moves the block there; the mutator ``MutateComputeLocation``
later proposes other locations. Before / after, with the decision "under ``i``"::

    for i, j: B[i, j] = A[i, j] + 1         for i:
    for i, j: C[i, j] = B[i, j] * 2           for j: B[i, j] = A[i, j] + 1
                                              for j: C[i, j] = B[i, j] * 2
"""

from __future__ import annotations

from ...schedule import BlockRV, Schedule
from ...schedule.primitives.block_scope import consumers
from ..analysis import RANDOM_COMPUTE_PRODUCER, has_been_tiled
from .base import ScheduleRule


class RandomComputeLocation(ScheduleRule):
    """Sample a compute-at location for every untiled stage of the root scope that has a
    consumer (and for an rfactor producer that ``AddRFactor`` marked)."""

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not self._applies(sch, block):
            return [sch]
        producer = None
        if RANDOM_COMPUTE_PRODUCER in sch.get(block).annotations:
            # collect the producer first: the block itself may be inlined below
            (producer,) = sch.get_producers(block)
            sch.unannotate(block, RANDOM_COMPUTE_PRODUCER)
        self.compute_at_random(sch, block)
        if producer is not None:
            self.compute_at_random(sch, producer)
        return [sch]

    @staticmethod
    def compute_at_random(sch: Schedule, block: BlockRV) -> None:
        location = sch.sample_compute_location(block)
        sch.compute_at(block, location, preserve_unit_loops=True)

    @staticmethod
    def _applies(sch: Schedule, block: BlockRV) -> bool:
        idx = sch.index
        node = sch.get(block)
        scope = idx.scope(node)
        if scope is None or idx.scope(scope) is not None:
            return False  # the root itself, or a block nested in another one
        loops = idx.loops_above(node)
        if not loops or len(idx.child_realizes(loops[0])) > 1 or has_been_tiled(node):
            return False
        return bool(consumers(idx, node))
