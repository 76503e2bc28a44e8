"""``RewriteCooperativeFetch``: let the threads of a GPU block fetch a shared cache together.

MultiLevelTiling places a shared-memory cache stage (``cache_read`` + ``compute_at``) in each
thread block and only *annotates* it with a sampled vector length, because the block's thread
counts are random variables. Once they are known, the stage's fused copy loop is split over
``threadIdx.y`` (if bound), ``threadIdx.x`` and a vectorized remainder (TVM's postprocessor)::

    for ax0_ax1 in range(256):         for f0, f1 in threadIdx.x(32), f2 in vectorized(4):
      A_shared[...] = A[...]             if f0 * 128 + f1 * 4 + f2 < 256:
                                           A_shared[...] = A[...]

The thread extents are read off the trace: the last ``bind`` to ``threadIdx.x`` /
``threadIdx.y`` before the annotation (a root annotated ``warp_execution`` means 32 lanes).
"""

from __future__ import annotations

from ...ir.expr import BufferLoad, Cast
from ...ir.functor import pre_order
from ...ir.stmt import BufferStore
from ...schedule import Schedule
from ..analysis import COOPERATIVE_FETCH, WARP_EXECUTION, const_extent
from ..plugin import gpu_limit
from .base import Postproc


def _max_dtype_bytes(block) -> int:
    sizes = [1]
    for node in pre_order(block.body):
        if isinstance(node, (BufferLoad, Cast)):
            sizes.append(_bytes(node.dtype))
        elif isinstance(node, BufferStore):
            sizes.append(_bytes(node.value.dtype))
    return max(sizes)


def _bytes(dtype: str) -> int:
    bits = int("".join(c for c in dtype if c.isdigit()) or 32)
    return max(1, bits // 8)


class RewriteCooperativeFetch(Postproc):
    """Bind each cooperatively fetched cache stage to the block's threads (TVM's)."""

    def apply(self, sch: Schedule) -> bool:
        extent_x = extent_y = -1
        tasks = []
        for inst in sch.trace.insts:
            name = inst.kind.name
            if name == "bind" and inst.args["thread_axis"] in ("threadIdx.x", "threadIdx.y"):
                extent = const_extent(sch.get(inst.args["loop"]))
                if inst.args["thread_axis"] == "threadIdx.x":
                    extent_x = extent
                else:
                    extent_y = extent
            elif name == "annotate" and inst.args["ann_key"] == WARP_EXECUTION:
                extent_x = gpu_limit(self.target, "thread-warp-size")
            elif name == "annotate" and inst.args["ann_key"] == COOPERATIVE_FETCH:
                lane = sch.get(inst.args["ann_val"])
                tasks.append((inst.args["block_or_loop"], extent_x, extent_y, int(lane)))
        for block, x, y, lane in tasks:
            self._rewrite(sch, block, x, y, lane)
        return True

    @staticmethod
    def _rewrite(sch: Schedule, block, x: int, y: int, lane: int) -> None:
        sch.unannotate(block, COOPERATIVE_FETCH)
        fused = sch.get_loops(block)[-1]
        extent = const_extent(sch.get(fused))
        if extent is None or x == -1:
            return
        if extent % lane != 0 or _max_dtype_bytes(sch.get(block)) > 4:
            lane = 1
        factors = [None] + ([y] if y != -1 else []) + [x] + ([lane] if lane > 1 else [])
        parts = sch.split(fused, factors=factors)
        if lane > 1:
            sch.vectorize(parts[-1])
            parts = parts[:-1]
        sch.bind(parts[-1], "threadIdx.x")
        if y != -1:
            sch.bind(parts[-2], "threadIdx.y")
