"""``VerifyGPUCode``: reject GPU candidates that exceed the device's per-block limits.

Thread counts are products of sampled tile sizes, so whether a candidate launches at all is
only known after sampling (the RFC's motivating example). Each top-level loop nest of the
function is one kernel; within it the extents bound to each thread axis must agree, and:
threads per block (``threadIdx.x * y * z``) <= ``max-threads-per-block`` (and per axis
x, y <= 1024, z <= 64), virtual threads <= 8, shared memory allocated under the kernel <=
``max-shared-memory-per-block`` bytes, and a block's thread count lies within the bounds
MultiLevelTiling annotated on it.

Shared memory is counted as the backend will allocate it: compacted to the region one block
touches (``codegen.compaction``, TVM's CompactBufferAllocation before its VerifyGPUCode), not
at the full size the root block declares for a cache stage.
"""

from __future__ import annotations

import math

from ...codegen.compaction import plan_allocations
from ...target import Target
from ...ir.expr import IntImm
from ...ir.functor import pre_order
from ...ir.stmt import Block, For, SeqStmt
from ...schedule import Schedule
from ..analysis import THREAD_EXTENT_HIGH, THREAD_EXTENT_LOW, WARP_EXECUTION
from .base import Postproc, Rejected

MAX_VTHREAD = 8


class VerifyGPUCode(Postproc):
    """Check thread and shared-memory limits of every kernel against the target's."""

    def apply(self, sch: Schedule) -> bool:
        target = Target.of(self.target if self.target is not None else "cuda")
        max_threads = target.max_threads_per_block
        max_shared = target.max_shared_memory_per_block
        axis_limit = dict(zip(("threadIdx.x", "threadIdx.y", "threadIdx.z"), target.max_thread_dims))
        body = sch.func.root.body
        compacted = {old: plan.buffer for old, plan in plan_allocations(sch.func).items()}
        for kernel in body.seq if isinstance(body, SeqStmt) else (body,):
            extents: dict[str, int] = {}
            # shared buffers allocated in the kernel, or at the root and used by the kernel
            shared_bufs = {}
            for node in pre_order(kernel):
                if isinstance(node, For) and node.thread_tag:
                    _bind(extents, node)
                elif isinstance(node, Block):
                    for b in [*node.alloc_buffers, *(r.buffer for r in node.reads + node.writes)]:
                        if b.scope.startswith("shared"):
                            shared_bufs[b] = compacted.get(b, b).size * _bytes(b.dtype)
            shared = sum(shared_bufs.values())
            threads = math.prod(v for k, v in extents.items() if k.startswith("threadIdx"))
            vthreads = math.prod(v for k, v in extents.items() if k.startswith("vthread"))
            for axis, limit in axis_limit.items():
                if extents.get(axis, 1) > limit:
                    raise Rejected(f"{axis} extent {extents[axis]} exceeds {limit}")
            if threads > max_threads:
                raise Rejected(f"{threads} threads per block exceed max-threads-per-block {max_threads}")
            if vthreads > MAX_VTHREAD:
                raise Rejected(f"{vthreads} virtual threads exceed {MAX_VTHREAD}")
            if shared > max_shared:
                raise Rejected(
                    f"{shared} bytes of shared memory exceed max-shared-memory-per-block {max_shared}"
                )
        warp = target.thread_warp_size if WARP_EXECUTION in sch.func.root.annotations else 1
        self._check_annotated_bounds(sch, warp)
        return True

    @staticmethod
    def _check_annotated_bounds(sch: Schedule, lanes: int = 1) -> None:
        """``lanes``: threads per bound thread (the warp size under ``warp_execution``)."""
        idx = sch.index
        for realize in idx.realizes.values():
            block = realize.block
            if THREAD_EXTENT_LOW not in block.annotations:
                continue
            threads = lanes
            for node in idx.ancestors(realize):
                if isinstance(node, For) and (node.thread_tag or "").startswith("threadIdx"):
                    threads *= node.extent.value if isinstance(node.extent, IntImm) else 1
            low = block.annotations[THREAD_EXTENT_LOW]
            high = block.annotations.get(THREAD_EXTENT_HIGH, threads)
            if not low <= threads <= high:
                raise Rejected(
                    f"block {block.name!r} runs {threads} threads, outside its bounds [{low}, {high}]"
                )


def _bind(extents: dict[str, int], loop: For) -> None:
    if not isinstance(loop.extent, IntImm):
        raise Rejected(f"loop {loop.loop_var.name!r} bound to {loop.thread_tag} has a dynamic extent")
    seen = extents.setdefault(loop.thread_tag, loop.extent.value)
    if seen != loop.extent.value and not loop.thread_tag.startswith("vthread"):
        raise Rejected(
            f"{loop.thread_tag} is bound to loops of extents {seen} and {loop.extent.value} in one kernel"
        )
    if loop.thread_tag.startswith("vthread"):
        extents[loop.thread_tag] = max(seen, loop.extent.value)


def _bytes(dtype: str) -> int:
    bits = int("".join(c for c in dtype if c.isdigit()) or 32)
    return max(1, bits // 8)
