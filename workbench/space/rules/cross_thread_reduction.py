"""``CrossThreadReduction``: reduce with the threads of a GPU block (softmax, norms).

A reduction with little spatial parallelism (``max`` / ``sum`` over a row of softmax) leaves
most GPU threads idle if each thread reduces a whole row. The rule fuses the reduce loops,
splits them by a sampled thread count and binds the inner part to ``threadIdx.x``: the threads
of a block each reduce a slice and combine (the backend's warp shuffles / shared-memory tree).
When the block has one consumer (softmax's normalization), it is computed at the consumer's
loop, its result kept in shared memory, and the consumer's innermost loop bound to the same
``threadIdx.x`` (TVM's rule)::

    for i:                               for i:                               # consumer's loop
      for k: S[i] += exp(A[i, k])          for k_0, k_1 in threadIdx.x(t):   # t sampled
    for i, j:                                S_shared[i] += exp(A[i, k_0 * t + k_1])
      N[i, j] = exp(A[i, j]) / S[i]        for j_0, j_1 in threadIdx.x(t):
                                             N[i, ...] = exp(A[i, ...]) / S_shared[i]

The rule forks: the cross-thread variant and the untouched block.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

from ...ir.stmt import SPATIAL, Block, For
from ...schedule import BlockRV, LoopRV, Schedule
from ..analysis import loop_iter_type, needs_multi_level_tiling, needs_rfactor
from ..plugin import gpu_limit
from .add_rfactor import reorder_and_fuse_reduction_loops
from .base import ScheduleRule, fork


class CrossThreadReduction(ScheduleRule):
    """Fork a reduction into a cross-thread reduction over ``threadIdx.x`` (TVM's)."""

    def __init__(self, thread_extents: Sequence[int] = (4, 8, 16, 32, 64, 128, 256, 512)):
        if any(not isinstance(e, int) or e <= 0 for e in thread_extents):
            raise ValueError(
                f"CrossThreadReduction: thread extents must be positive integers, got {list(thread_extents)}"
            )
        self.thread_extents = list(thread_extents)

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        max_threads = gpu_limit(self.target, "max-threads-per-block")
        warp = gpu_limit(self.target, "thread-warp-size")
        if not needs_rfactor(sch.index, sch.get(block), max_threads, warp):
            return [sch]
        new = fork(sch)
        target = self._compute_target(new, block)
        n = len(self.thread_extents)
        extent = new.sample_categorical(self.thread_extents, [1.0 / n] * n)
        if target is not None:
            loop, consumer, innermost = target
            if not _in_thread_scope(new, consumer):
                outer, inner = new.split(innermost, factors=[None, extent])
                new.bind(inner, "threadIdx.x")
                if innermost == loop:
                    loop = outer
            else:
                extent = _thread_x_extent(new)
            new.compute_at(block, loop, preserve_unit_loops=True)
            new.set_scope(block, 0, "shared")
        fused, _ = reorder_and_fuse_reduction_loops(new, block)
        _, inner = new.split(fused, factors=[None, extent])
        new.bind(inner, "threadIdx.x")
        return [new, sch]

    @staticmethod
    def _compute_target(sch: Schedule, block: BlockRV) -> Optional[tuple[LoopRV, BlockRV, LoopRV]]:
        """(consumer loop to compute at, the first consumer, its innermost loop), or None when
        the block stays where it is (no consumer, a consumer that will be tiled, or several
        consumers under no common loop). Several consumers under a common loop (softmax's
        max, read by the sum and the normalization once the sum sits in the row loop): the
        block goes to the first consumer, no deeper than that loop (TVM's
        GetComputeTargetLoopAndBlock)."""
        node = sch.get(block)
        if len(node.writes) != 1:
            return None
        found = sch.get_consumers(block)
        if not found or needs_multi_level_tiling(sch.index, sch.get(found[0])):
            return None
        idx = sch.index
        lca = _lowest_common_ancestor(idx, [sch.get(b) for b in found])
        if len(found) > 1 and isinstance(lca, Block):
            return None
        consumer = found[0]
        target_loops = sch.get_loops(consumer)  # before the block's loops, as TVM's trace
        loops = sch.get_loops(block)
        n = min(len(loops), len(target_loops))
        pos = n - 1
        for i in range(n):
            if loop_iter_type(idx, sch.get(loops[i])) != SPATIAL:
                pos = i - 1
                break
            if sch.get(target_loops[i]) is lca:
                pos = i
                break
        if pos < 0:
            return None
        return target_loops[pos], consumer, target_loops[-1]


def _lowest_common_ancestor(idx, blocks: list[Block]) -> Union[Block, For]:
    """The innermost loop or block enclosing all ``blocks`` (a block encloses itself)."""

    def chain(b: Block) -> list:
        up = [a for a in idx.ancestors(idx.realizes[b.name]) if isinstance(a, (Block, For))]
        return [b, *up][::-1]  # root first

    chains = [chain(b) for b in blocks]
    lca = chains[0][0]
    for level in zip(*chains):
        if any(x is not level[0] for x in level):
            break
        lca = level[0]
    return lca


def _in_thread_scope(sch: Schedule, block: BlockRV) -> bool:
    return any((sch.get(l).thread_tag or "").startswith("threadIdx") for l in sch.get_loops(block))


def _thread_x_extent(sch: Schedule):
    """The factor (an ExprRV or an int) of the split whose loop was bound to threadIdx.x."""
    for inst in sch.trace.insts:
        if inst.kind.name == "bind" and inst.args.get("thread_axis") == "threadIdx.x":
            loop = inst.args["loop"]
            for split in sch.trace.insts:
                if split.kind.name == "split" and loop in split.outputs:
                    factor = split.args["factors"][split.outputs.index(loop)]
                    if factor is not None:
                        return factor
    raise ValueError(
        "CrossThreadReduction: the consumer is bound to threadIdx.x, but no split "
        "in the trace gives that loop's extent"
    )
