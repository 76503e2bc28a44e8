"""``RewriteReductionBlock``: move each reduction's ``init`` out of its reduction loops.

A tiled reduction keeps its ``init`` inside the loop nest, executed under "first iteration of
every reduce loop" conditions; ``decompose_reduction`` at the outermost loop that is not
spatial gives the initialization its own loop nest instead (TVM semantics)::

    for i, j:                                  for i, j:
      for k:                                     for j1: C_init[i, j1] = 0
        for j1:                                  for k:
          if k == 0: C[i, j1] = 0                  for j1: C[i, j1] += A[i, k] * B[k, j1]
          C[i, j1] += A[i, k] * B[k, j1]

The initialization becomes block ``C_init`` and the update is renamed ``C_update`` (TVM's names).
"""

from __future__ import annotations

from ...ir.functor import uses_var
from ...ir.stmt import REDUCE, SPATIAL
from ...schedule import Schedule
from ..analysis import AUTO_TENSORIZE, AUTO_TENSORIZE_INIT, loop_iter_type
from .base import Postproc


class RewriteReductionBlock(Postproc):
    """``decompose_reduction`` every block with an ``init``, except cross-thread reductions
    (whose reduce iterators are bound to GPU threads). A block annotated
    ``meta_schedule.auto_tensorize_init`` passes that intrinsic on to its init block (TVM's)."""

    def apply(self, sch: Schedule) -> bool:
        while True:
            target = self._next(sch)
            if target is None:
                return True
            name, point = target
            block = sch.get_block(name)
            loops = sch.get_loops(block)
            init_intrin = sch.get(block).annotations.get(AUTO_TENSORIZE_INIT)
            # the block is renamed <name>_update: ``block`` follows it, its old name does not
            init = sch.decompose_reduction(block, loops[point])
            if AUTO_TENSORIZE in sch.get(init).annotations:
                # the initialization is not the intrinsic: only the update is tensorized
                sch.unannotate(init, AUTO_TENSORIZE)
            if init_intrin is not None:
                # ... unless it has an intrinsic of its own (wmma fill)
                sch.unannotate(init, AUTO_TENSORIZE_INIT)
                sch.unannotate(block, AUTO_TENSORIZE_INIT)
                sch.annotate(init, AUTO_TENSORIZE, init_intrin)

    @staticmethod
    def _next(sch: Schedule):
        """(block name, index of its decompose loop) of the first block still to rewrite."""
        idx = sch.index
        for name, realize in idx.realizes.items():
            block = realize.block
            if block.init is None:
                continue
            loops = idx.loops_above(block)
            bound = [
                l.loop_var
                for l in loops
                if l.thread_tag and l.thread_tag.split(".")[0] in ("threadIdx", "blockIdx")
            ]
            if any(
                iv.iter_type == REDUCE and any(uses_var(v, t) for t in bound)
                for iv, v in zip(block.iter_vars, realize.iter_values)
            ):
                continue
            for k, loop in enumerate(loops):
                if loop_iter_type(idx, loop) != SPATIAL:
                    return name, k
        return None
