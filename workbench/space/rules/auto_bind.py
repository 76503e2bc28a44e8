"""``AutoBind``: give every block that no other rule bound to GPU threads a thread binding.

A GPU kernel must run each block under ``blockIdx`` and ``threadIdx`` loops. Blocks that
MultiLevelTiling did not tile (elementwise stages, padding, softmax's exp) get their outer
spatial loops fused and split into ``[blockIdx.x, threadIdx.x]``, the thread count sampled from
``thread_extents`` (TVM's ``BindBlockThreadIdx``)::

    for i, j:                           for ij_0 in blockIdx.x(ceil(i*j / t)):
      B[i, j] = A[i, j] + 1               for ij_1 in threadIdx.x(t):      # t in thread_extents
                                            B[...] = A[...] + 1

:class:`~workbench.space.postprocs.RewriteUnboundBlock` binds what is still unbound after the
rules (blocks created later, or a space without this rule) with the same function and a fixed
thread count.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from ...ir.stmt import SPATIAL, For, ForKind, SeqStmt
from ...schedule import BlockRV, LoopRV, Schedule
from ..analysis import const_extent, has_been_tiled, loop_iter_type
from ..plugin import gpu_limit
from .base import ScheduleRule

#: factor sampler: the largest extent allowed -> a thread count (an int or a sampled ExprRV)
FactorSampler = Callable[[int], object]


def factor_sampler(sch: Schedule, thread_extents: Sequence[int]) -> FactorSampler:
    """Sample one of ``thread_extents`` no larger than the limit (TVM's MakeFactorSampler)."""

    def sample(max_extent: int):
        extents = [e for e in thread_extents if e <= max_extent]
        if not extents:
            return max_extent
        if len(extents) == 1:
            return extents[0]
        return sch.sample_categorical(extents, [1.0 / len(extents)] * len(extents))

    return sample


def _thread_kind(loop: For) -> str:
    tag = loop.thread_tag or ""
    return tag.split(".")[0] if loop.kind == ForKind.THREAD_BINDING else ""


def bind_block_thread_idx(
    sch: Schedule,
    block: BlockRV,
    max_threadblocks: int,
    max_threads_per_block: int,
    get_factor: Optional[FactorSampler] = None,
) -> None:
    """Bind the loops of ``block`` to ``blockIdx.x`` / ``threadIdx.x`` unless they are bound
    already (TVM's BindBlockThreadIdx): the leading spatial loops (up to the first loop with
    several statements or a non-serial kind) are fused, then split by the sampled factor."""
    idx = sch.index
    node = sch.get(block)
    if idx.scope(node) is None or has_been_tiled(node):
        return
    loops = idx.loops_above(node)
    n = len(loops)
    i_block = i_thread = i_multi = -1
    i_spatial = -1
    for i, loop in enumerate(loops):
        kind = _thread_kind(loop)
        if kind == "blockIdx" and i_block == -1:
            i_block = i
        if kind == "threadIdx" and i_thread == -1:
            i_thread = i
        if loop.kind != ForKind.SERIAL and i_multi == -1:
            i_multi = i
        if isinstance(loop.body, SeqStmt) and i_multi == -1:
            i_multi = i + 1
        if loop_iter_type(idx, loop) == SPATIAL and i_spatial == i - 1:
            i_spatial += 1
    if i_multi == -1:
        i_multi = n
    if i_block != -1 and i_thread != -1:
        return
    if i_block != -1:
        raise ValueError(f"block {node.name!r}: blockIdx is bound but threadIdx is not")
    loop_rvs = sch.get_loops(block)
    if i_spatial == -1:
        unit = sch.add_unit_loop(loop_rvs[0] if loop_rvs else block)
        loop_rvs = [unit, *loop_rvs]
        i_spatial = 0
        i_thread += i_thread != -1
        i_multi += 1
    # A single loop is "fused" too, and the loops queried again before binding blockIdx: TVM's
    # steps, so that the traces (and what the mutators and features see) are TVM's.
    if i_thread != -1:
        num = min(i_multi, i_thread, i_spatial + 1)
        fused = sch.fuse(*sch.get_loops(block)[:num])
        sch.bind(fused, "blockIdx.x")
        return
    num = min(i_multi, i_spatial + 1)
    fused = sch.fuse(*loop_rvs[:num])
    bind_spatial_loop(sch, fused, max_threadblocks, max_threads_per_block, get_factor)


def bind_spatial_loop(
    sch: Schedule,
    loop: LoopRV,
    max_threadblocks: int,
    max_threads_per_block: int,
    get_factor: Optional[FactorSampler] = None,
) -> list[LoopRV]:
    """Split ``loop`` into ``[blockIdx.x, threadIdx.x]`` (or, past ``max_threadblocks *
    max_threads_per_block`` iterations, ``[blockIdx.x, threadIdx.x, serial]``)."""
    extent = const_extent(sch.get(loop))
    extent = extent if extent is not None else 2**62
    if extent <= max_threadblocks * max_threads_per_block:
        get_factor = get_factor or factor_sampler(sch, [32, 64, 128, 256, 512, 1024])
        factor = get_factor(min(extent, max_threads_per_block))
        outer, inner = sch.split(loop, factors=[None, factor])
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
        return [outer, inner]
    serial, blocks, threads = sch.split(loop, factors=[None, max_threadblocks, max_threads_per_block])
    sch.reorder(blocks, threads, serial)
    sch.bind(blocks, "blockIdx.x")
    sch.bind(threads, "threadIdx.x")
    return [blocks, threads, serial]


class AutoBind(ScheduleRule):
    """Bind each unbound block's spatial loops to ``blockIdx.x`` x ``threadIdx.x`` (TVM's)."""

    def __init__(
        self,
        max_threadblocks: int = 256,
        thread_extents: Sequence[int] = (32, 64, 128, 256, 512, 1024),
        max_threads_per_block: int = -1,
    ):
        self.max_threadblocks = max_threadblocks
        self.thread_extents = list(thread_extents)
        self.max_threads_per_block = max_threads_per_block

    def initialize_with_target(self, target) -> None:
        super().initialize_with_target(target)
        if self.max_threads_per_block == -1:
            self.max_threads_per_block = gpu_limit(self.target, "max-threads-per-block")

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        limit = self.max_threads_per_block
        if limit == -1:
            limit = gpu_limit(self.target, "max-threads-per-block")
        bind_block_thread_idx(
            sch, block, self.max_threadblocks, limit, factor_sampler(sch, self.thread_extents)
        )
        return [sch]
