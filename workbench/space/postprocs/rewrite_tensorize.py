"""``RewriteTensorize``: tensorize the blocks ``MultiLevelTilingWithIntrin`` marked.

Each block annotated ``meta_schedule.auto_tensorize`` gets the intrinsic's implementation in
place of its body (``tensorize``); a block that no longer matches (decisions changed its loops)
rejects the candidate. The intrinsic is the one the annotation names: the rule chose it for the
target (:func:`~workbench.schedule.intrinsics.gemm_intrinsics`), and a replayed trace keeps it.
"""

from __future__ import annotations

from ...schedule import Schedule
from ..analysis import AUTO_TENSORIZE, TILING_STRUCTURE
from .base import Postproc


class RewriteTensorize(Postproc):
    """``tensorize`` every block annotated for auto-tensorization, then drop the annotation."""

    def apply(self, sch: Schedule) -> bool:
        marked = [
            (name, r.block.annotations[AUTO_TENSORIZE])
            for name, r in sch.index.realizes.items()
            if AUTO_TENSORIZE in r.block.annotations
        ]
        for name, intrin in marked:
            block = sch.get_block(name)
            sch.unannotate(block, AUTO_TENSORIZE)
            for inner in sch.get_child_blocks(block):
                # the tiled block's mark is not part of the intrinsic's description
                if TILING_STRUCTURE in sch.get(inner).annotations:
                    sch.unannotate(inner, TILING_STRUCTURE)
            sch.tensorize(block, intrin)
        return True
