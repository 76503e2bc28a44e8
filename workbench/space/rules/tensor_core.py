"""``MultiLevelTilingTensorCore``: the Use-Tensor-Core module (seed 000 A.3 / A.4).

A matrix multiply with fp16 inputs and an fp32 result (``C[i, j] += A[i, k] * B[k, j]``, or a
dense layer's ``B[j, k]``) is tiled around NVIDIA's wmma 16x16x16 operation, the way the A.3
trace does it:

1. ``reindex`` the output and both inputs (B becomes ``[j, k]``: the ``_trans`` intrinsics),
   split i, j, k by 16 and ``blockize`` the 16x16x16 tile; the tile block is annotated with
   the mma (``auto_tensorize``) and the fill (``auto_tensorize_init``) intrinsics;
2. tile the tile blocks' loops as ``MultiLevelTiling`` does (structure ``"SSSRRSRS"``, the
   first three levels bound to ``blockIdx.x``, ``blockIdx.y`` and ``threadIdx.y``: one warp
   per ``threadIdx.y``, the root annotated ``warp_execution``);
3. stage the data: the accumulator in ``wmma.accumulator`` per warp (``write_at`` at level 3,
   the output's reindex inlined into its copy-back), A and B through ``shared.dyn`` at the
   first reduction level and into ``wmma.matrix_a`` / ``wmma.matrix_b`` at the second
   (``read_at``), each shared copy with a sampled ``vector_bytes``; the inputs' reindex blocks
   are inlined into the copies.

The postprocessors ``RewriteReductionBlock`` and ``RewriteTensorize`` then tensorize the fill
and the mma; the fragment loads / stores and the shared copies are lowered by the backend
(:func:`workbench.codegen.auto_copy.lower_auto_copy`). Blocks that are not such a matrix
multiply (other dtypes, extents not multiples of 16, more iterators) are left to the other
rules.
"""

from __future__ import annotations

from typing import Optional

from ...ir.expr import BufferLoad, Cast, IntImm
from ...ir.functor import pre_order
from ...ir.stmt import REDUCE, SPATIAL, BufferStore
from ...schedule import BlockRV, Schedule
from ...schedule.intrinsics.cuda import FILL, SYNC_TRANS
from ..analysis import (
    AUTO_TENSORIZE,
    AUTO_TENSORIZE_INIT,
    TILING_STRUCTURE,
    WARP_EXECUTION,
    is_trivial_binding,
)
from .multi_level_tiling import MultiLevelTiling, State

#: the vector widths (bytes) a shared-memory copy may use per thread and step
VECTOR_BYTES = (4, 8, 16)


class MultiLevelTilingTensorCore(MultiLevelTiling):
    """Multi-level tiling around wmma tiles with the A.3 staging (see the module docstring)."""

    def __init__(
        self,
        structure: str = "SSSRRSRS",
        tile_binds=("blockIdx.x", "blockIdx.y", "threadIdx.y"),
        max_innermost_factor: Optional[int] = 4,
        **kwargs,
    ):
        super().__init__(
            structure, tile_binds=list(tile_binds), max_innermost_factor=max_innermost_factor, **kwargs
        )
        self._reindexed: dict[str, str] = {}

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not is_wmma_matmul(sch, block):
            return [sch]
        sch.annotate(block, TILING_STRUCTURE, self.structure)
        state = State(sch, block)
        for step in (self.tile_for_tensor_core, self.tile_loop_nest, self.stage):
            (state,) = step(state)
        return [state.sch]

    def tile_for_tensor_core(self, state: State) -> list[State]:
        sch, block = state.sch, state.block
        self._reindexed = {
            "write": sch.get(sch.reindex(block, ("write", 0))).name,
            "a": sch.get(sch.reindex(block, ("read", 0))).name,
            "b": sch.get(sch.reindex(block, ("read", 1))).name,
        }
        i, j, k = sch.get_loops(block)
        k0, k1 = sch.split(k, factors=[None, 16])
        j0, j1 = sch.split(j, factors=[None, 16])
        i0, i1 = sch.split(i, factors=[None, 16])
        sch.reorder(i0, j0, k0, i1, j1, k1)
        tile = sch.blockize(i1)
        sch.annotate(tile, AUTO_TENSORIZE, SYNC_TRANS)
        sch.annotate(tile, AUTO_TENSORIZE_INIT, FILL)
        sch.annotate(sch.get_block("root"), WARP_EXECUTION, 1)
        state.block = tile
        return [state]

    def stage(self, state: State) -> list[State]:
        sch, tile, tiles = state.sch, state.block, state.tiles
        r_levels = self.r_indices
        acc = sch.write_at(tiles[self.s_indices[2]][-1], tile, 0, "wmma.accumulator")
        sch.reverse_compute_inline(sch.get_block(self._reindexed["write"]))
        self._sample_vector_bytes(sch, acc)
        for operand in (0, 1):
            copy = sch.read_at(tiles[r_levels[0]][-1], tile, operand, "shared.dyn")
            self._sample_vector_bytes(sch, copy)
        sch.read_at(tiles[r_levels[1]][-1], tile, 0, "wmma.matrix_a")
        sch.read_at(tiles[r_levels[1]][-1], tile, 1, "wmma.matrix_b")
        sch.compute_inline(sch.get_block(self._reindexed["a"]))
        sch.compute_inline(sch.get_block(self._reindexed["b"]))
        return [state]

    @staticmethod
    def _sample_vector_bytes(sch: Schedule, block: BlockRV) -> None:
        n = len(VECTOR_BYTES)
        v = sch.sample_categorical(list(VECTOR_BYTES), [1.0 / n] * n)
        sch.annotate(block, "vector_bytes", v)


def is_wmma_matmul(sch: Schedule, block: BlockRV) -> bool:
    """``C[i, j] += cast(A[i, k]) * cast(B[k, j] or B[j, k])`` with fp16 A, B and fp32 C, a
    trivial binding and i, j, k multiples of 16."""
    node = sch.get(block)
    idx = sch.index
    if (
        node.init is None
        or len(node.reads) != 2
        or len(node.writes) != 1
        or [iv.iter_type for iv in node.iter_vars] != [SPATIAL, SPATIAL, REDUCE]
        or not is_trivial_binding(idx, node)
    ):
        return False
    if node.writes[0].buffer.dtype != "float32" or any(r.buffer.dtype != "float16" for r in node.reads):
        return False
    if any(not isinstance(iv.dom.extent, IntImm) or iv.dom.extent.value % 16 for iv in node.iter_vars):
        return False
    store = node.body
    if not isinstance(store, BufferStore):
        return False
    casts = [n for n in pre_order(store.value) if isinstance(n, Cast)]
    loads = [n for n in pre_order(store.value) if isinstance(n, BufferLoad)]
    return len(casts) == 2 and len(loads) == 3 and all(len(ld.indices) == 2 for ld in loads)
