"""``MultiLevelTilingWithIntrin``: multi-level tiling around a tensor intrinsic (auto-tensorize).

When a block's computation contains the intrinsic's description (for the CPU: the AVX-512
fp32 GEMM micro-kernels of :mod:`workbench.schedule.intrinsics.x86`), the rule splits the
matching loops by the intrinsic's extents, moves those inner loops innermost, ``blockize``s
them into an outer block annotated ``meta_schedule.auto_tensorize``, then tiles the outer block
as ``MultiLevelTiling`` does. The postprocessor :class:`~workbench.space.postprocs.
RewriteTensorize` replaces the annotated block's body by the intrinsic's implementation::

    for i, j, k:                  for i0, j0, ... (tiles):           # MultiLevelTiling
      C[i, j] += A[i, k] * B[k, j]    block C_o (auto_tensorize):    # then tensorize
                                        for i1, j1, k1 (4 x 16 x 4): C[...] += ...
"""
from __future__ import annotations

from typing import Optional

from ...errors import ScheduleError
from ...ir.expr import IntImm
from ...ir.functor import pre_order
from ...ir.stmt import Block, For
from ...schedule import BlockRV, Schedule
from ...schedule.tensor_intrin import TensorIntrin
from ..analysis import AUTO_TENSORIZE, is_trivial_binding, needs_multi_level_tiling
from .multi_level_tiling import MultiLevelTiling, State


class MultiLevelTilingWithIntrin(MultiLevelTiling):
    """``MultiLevelTiling`` whose innermost level is the tensor intrinsic ``intrin_name``
    (a name of the :class:`~workbench.schedule.tensor_intrin.TensorIntrin` registry). Blocks
    the intrinsic does not match are left to the other rules."""

    def __init__(self, intrin_name: str, structure: str = "SSRSRS", **kwargs):
        super().__init__(structure, **kwargs)
        self.intrin_name = intrin_name

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not needs_multi_level_tiling(sch.index, sch.get(block)) or not self._applies(sch, block):
            return [sch]
        return super().apply(sch, block)

    def sub_rules(self):
        return [self.tile_for_intrin, *super().sub_rules()]

    def tile_for_intrin(self, state: State) -> list[State]:
        state.block = self._tile(state.sch, state.block, self._match(state.sch, state.block))
        return [state]

    def add_write_reuse(self, state: State) -> list[State]:
        try:
            return super().add_write_reuse(state)
        except ScheduleError:  # no cache stage around this blockized block
            return [state] if self.reuse_write.req == "may" else []

    def _tile(self, sch: Schedule, block: BlockRV, plan: list[tuple[int, int]]) -> BlockRV:
        """Split the matched loops by the intrinsic's extents, move them innermost, blockize
        them; returns the outer block, annotated for RewriteTensorize."""
        outer = sch.get_loops(block)
        inner = []
        for pos, extent in plan:
            outer[pos], part = sch.split(outer[pos], factors=[None, extent])
            inner.append(part)
        sch.reorder(*outer, *inner)
        tiled = sch.blockize(inner[0])
        sch.annotate(tiled, AUTO_TENSORIZE, self.intrin_name)
        return tiled

    def _match(self, sch: Schedule, block: BlockRV) -> Optional[list[tuple[int, int]]]:
        """(loop position, intrinsic extent) for each loop of the description, matched from the
        innermost iterator outwards by iterator type (TVM's mapping); None when a type is
        missing or an extent is not a multiple of the intrinsic's."""
        desc = TensorIntrin.get(self.intrin_name).desc
        desc_block = next(n for n in pre_order(desc.body) if isinstance(n, Block)
                          and n.name != desc.root.name)
        desc_loops = [n for n in pre_order(desc.body) if isinstance(n, For)]
        node = sch.get(block)
        if not is_trivial_binding(sch.index, node) or len(desc_loops) != len(desc_block.iter_vars):
            return None
        types = [iv.iter_type for iv in node.iter_vars]
        extents = [l.extent for l in sch.index.loops_above(node)]
        plan, pos = [], len(types) - 1
        for iv, loop in reversed(list(zip(desc_block.iter_vars, desc_loops))):
            while pos >= 0 and types[pos] != iv.iter_type:
                pos -= 1
            if (pos < 0 or not isinstance(extents[pos], IntImm)
                    or extents[pos].value % loop.extent.value):
                return None
            plan.append((pos, loop.extent.value))
            pos -= 1
        return plan[::-1]

    def _applies(self, sch: Schedule, block: BlockRV) -> bool:
        """The description matches and tensorizing a throw-away copy succeeds."""
        plan = self._match(sch, block)
        if plan is None:
            return False
        trial = sch.copy()
        try:
            trial.tensorize(self._tile(trial, block, plan), self.intrin_name)
        except ScheduleError:
            return False
        return True
