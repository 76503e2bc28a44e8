"""``MultiLevelTilingWithIntrin``: multi-level tiling around a tensor intrinsic (auto-tensorize).

When a block's computation contains the intrinsic's description (for the CPU: the fp32 GEMM
micro-kernels of :mod:`workbench.schedule.intrinsics.x86`), the rule splits the
matching loops by the intrinsic's extents, moves those inner loops innermost, ``blockize``s
them into an outer block annotated ``meta_schedule.auto_tensorize``, then tiles the outer block
as ``MultiLevelTiling`` does. The postprocessor :class:`~workbench.space.postprocs.
RewriteTensorize` replaces the annotated block's body by the intrinsic's implementation::

    for i, j, k:                  for i0, j0, ... (tiles):           # MultiLevelTiling
      C[i, j] += A[i, k] * B[k, j]    block C_o (auto_tensorize):    # then tensorize
                                        for i1, j1, k1 (4 x 16 x 4): C[...] += ...

Without an intrinsic name the rule asks the target: it takes the first of
:func:`~workbench.schedule.intrinsics.gemm_intrinsics` (the target's GEMM micro-kernels, the
largest register tile first: AVX-512 ones on AVX-512 CPUs, AVX2 ones on AVX2 + FMA CPUs, none
elsewhere) that tensorizes the block. The name it chose is recorded in the annotation, so a
trace replays with the same intrinsic whatever the target.
"""

from __future__ import annotations

from typing import Optional

from ...target import Target
from ...errors import ScheduleError
from ...ir.expr import IntImm
from ...ir.functor import pre_order
from ...ir.stmt import Block, For
from ...schedule import BlockRV, Schedule
from ...schedule.intrinsics import gemm_intrinsics
from ...schedule.tensor_intrin import TensorIntrin
from ..analysis import AUTO_TENSORIZE, is_trivial_binding, needs_multi_level_tiling
from .multi_level_tiling import MultiLevelTiling, State


class MultiLevelTilingWithIntrin(MultiLevelTiling):
    """``MultiLevelTiling`` whose innermost level is the tensor intrinsic ``intrin_name``
    (a name of the :class:`~workbench.schedule.tensor_intrin.TensorIntrin` registry), or when
    None the first of the target's GEMM micro-kernels that fits the block. Blocks no intrinsic
    matches are left to the other rules."""

    def __init__(self, intrin_name: Optional[str] = None, structure: str = "SSRSRS", **kwargs):
        super().__init__(structure, **kwargs)
        self.intrin_name = intrin_name
        self._chosen: Optional[str] = None  # the intrinsic of the block being tiled

    def candidates(self) -> list[str]:
        """The intrinsics tried, in order: ``intrin_name``, else the target's GEMM kernels."""
        if self.intrin_name is not None:
            return [self.intrin_name]
        return gemm_intrinsics(self.target or Target.host())

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not needs_multi_level_tiling(sch.index, sch.get(block)):
            return [sch]
        self._chosen = next((name for name in self.candidates() if self._applies(sch, block, name)), None)
        if self._chosen is None:
            return [sch]
        try:
            return super().apply(sch, block)
        finally:
            self._chosen = None

    def sub_rules(self):
        return [self.tile_for_intrin, *super().sub_rules()]

    def tile_for_intrin(self, state: State) -> list[State]:
        plan = self._match(state.sch, state.block, self._chosen)
        state.block = self._tile(state.sch, state.block, plan, self._chosen)
        return [state]

    def add_write_reuse(self, state: State) -> list[State]:
        try:
            return super().add_write_reuse(state)
        except ScheduleError:  # no cache stage around this blockized block
            return [state] if self.reuse_write.req == "may" else []

    def _tile(self, sch: Schedule, block: BlockRV, plan: list[tuple[int, int]], intrin: str) -> BlockRV:
        """Split the matched loops by the intrinsic's extents, move them innermost, blockize
        them; returns the outer block, annotated for RewriteTensorize."""
        outer = sch.get_loops(block)
        inner = []
        for pos, extent in plan:
            outer[pos], part = sch.split(outer[pos], factors=[None, extent])
            inner.append(part)
        sch.reorder(*outer, *inner)
        tiled = sch.blockize(inner[0])
        sch.annotate(tiled, AUTO_TENSORIZE, intrin)
        return tiled

    def _match(self, sch: Schedule, block: BlockRV, intrin: str) -> Optional[list[tuple[int, int]]]:
        """(loop position, intrinsic extent) for each loop of the description, matched from the
        innermost iterator outwards by iterator type (TVM's mapping); None when a type is
        missing or an extent is not a multiple of the intrinsic's."""
        desc = TensorIntrin.get(intrin).desc
        desc_block = next(
            n for n in pre_order(desc.body) if isinstance(n, Block) and n.name != desc.root.name
        )
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
            if pos < 0 or not isinstance(extents[pos], IntImm) or extents[pos].value % loop.extent.value:
                return None
            plan.append((pos, loop.extent.value))
            pos -= 1
        return plan[::-1]

    def _applies(self, sch: Schedule, block: BlockRV, intrin: str) -> bool:
        """The description of ``intrin`` matches and tensorizing a throw-away copy succeeds."""
        plan = self._match(sch, block, intrin)
        if plan is None:
            return False
        trial = sch.copy()
        try:
            trial.tensorize(self._tile(trial, block, plan, intrin), intrin)
        except ScheduleError:
            return False
        return True
