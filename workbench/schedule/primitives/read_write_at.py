"""``read_at`` / ``write_at``: a copy stage at the top (or bottom) of one loop's body (TVM's).

``cache_read`` copies a whole buffer and needs ``compute_at`` to shrink the copy to a tile;
``read_at(loop, block, i, scope)`` does both at once: it copies, once per iteration of
``loop``, exactly the region of ``block.reads[i]`` that the blocks under ``loop`` read, into a
buffer of ``scope``, and makes them read the copy. ``write_at`` is the mirror image for a
written buffer: the blocks under ``loop`` write the new buffer, and a copy-back at the end of
the loop body stores the region to the original. This is how the Use-Tensor-Core space stages
tiles through ``shared.dyn`` and ``wmma.matrix_a/b`` / ``wmma.accumulator`` (seed 000, A.3).

The copy is one block (annotated ``auto_copy``) whose iterators are the loop variables of
``loop`` and the loops above it that the region depends on; its body is a plain loop nest over
the region (the backend or a later ``tensorize`` turns it into vector loads or wmma
fragment loads).

Before / after ``read_at(k0, C, 0, "shared")`` on a tiled matmul::

    for i0, j0, k0:                          for i0, j0, k0:
      for i1, j1, k1:                          block A_shared (v0 = i0, v1 = k0):
        block C: C[..] += A[i0*16+i1,            for ax0, ax1 in grid(16, 4):
                          k0*4+k1] * B[..]         A_shared[v0*16+ax0, v1*4+ax1] = A[...]
                                                 for i1, j1, k1:
                                                   block C: C[..] += A_shared[..] * B[..]
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Sequence

from ...errors import ScheduleError
from ...ir.buffer import Buffer
from ...ir.expr import And, BufferLoad, IntImm, Var, is_const, max_expr, min_expr
from ...ir.functor import free_vars, pre_order, replace_buffers, substitute
from ...ir.region import block_access_regions
from ...ir.stmt import (
    SPATIAL,
    TRUE,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    For,
    IfThenElse,
    IterVar,
    Range,
    SeqStmt,
    Stmt,
    make_for,
    seq,
)
from ..instruction import schedule_primitive
from ..rewrite import simplify
from ..rv import BlockRV, LoopRV
from .block_scope import buffer_names, fresh_name
from .cache import allocate, check_storage_scope, nth_buffer, scoped_name

if TYPE_CHECKING:
    from ..schedule import Schedule

#: annotation of the copy blocks read_at / write_at create (TVM's ``auto_copy``)
AUTO_COPY = "auto_copy"


@schedule_primitive("read_at")
def read_at(
    sch: Schedule, loop: LoopRV, block: BlockRV, read_buffer_index: int, storage_scope: str
) -> BlockRV:
    """Copy the region of ``block.reads[read_buffer_index]`` that the blocks under ``loop``
    read into a new buffer of ``storage_scope``, at the start of ``loop``'s body (each
    iteration), and make them read the copy. Returns the copy block.

    Rules: some block under ``loop`` reads the buffer, and no block under ``loop`` writes it
    before a reader; the copied region has constant extents.
    """
    return _read_write_at(sch, "read_at", loop, block, read_buffer_index, storage_scope, True)


@schedule_primitive("write_at")
def write_at(
    sch: Schedule, loop: LoopRV, block: BlockRV, write_buffer_index: int, storage_scope: str
) -> BlockRV:
    """Make the blocks under ``loop`` write ``block.writes[write_buffer_index]`` into a new
    buffer of ``storage_scope``, copied back to the original at the end of ``loop``'s body
    (each iteration). Returns the copy-back block.

    Rules: some block under ``loop`` writes the buffer, and none reads it after the last
    writer; the copied region has constant extents; a block under ``loop`` reads the buffer
    only after another block under ``loop`` wrote it, or as a reduction whose init and
    reduce loops are all under ``loop`` (the new buffer starts empty in each iteration).
    A region sticking out of the buffer (a guarded padding read) is copied where it is inside.
    """
    return _read_write_at(sch, "write_at", loop, block, write_buffer_index, storage_scope, False)


def _read_write_at(
    sch, primitive: str, loop_rv: LoopRV, block_rv: BlockRV, index: int, storage_scope: str, is_read: bool
) -> BlockRV:
    argument = "read_buffer_index" if is_read else "write_buffer_index"
    check_storage_scope(primitive, storage_scope)
    loop: For = sch.get(loop_rv)
    node: Block = sch.get(block_rv)
    src = nth_buffer(primitive, node, index, "read" if is_read else "write", argument)
    idx = sch.index
    subtrees = list(loop.body.seq) if isinstance(loop.body, SeqStmt) else [loop.body]
    relax_threads = storage_scope.startswith("shared") or storage_scope == "global"
    regions, r_pos, w_pos = [], [], []
    for i, sub in enumerate(subtrees):
        tops = [sub] if isinstance(sub, BlockRealize) else idx.child_realizes(sub)
        reads_it = writes_it = False
        for realize in tops:
            b = realize.block
            has_r = any(r.buffer is src for r in b.reads)
            has_w = any(r.buffer is src for r in b.writes)
            reads_it, writes_it = reads_it or has_r, writes_it or has_w
            if has_r if is_read else has_w:
                regions.append(_relaxed(idx, realize, loop, src, is_read, relax_threads))
        if reads_it:
            r_pos.append(i)
        if writes_it:
            w_pos.append(i)
    what = "reads" if is_read else "writes"
    if not (r_pos if is_read else w_pos):
        raise ScheduleError(
            primitive,
            f"no block under loop {loop.loop_var.name!r} {what} "
            f"{src.name} (block {node.name!r} must be under that loop)",
            argument="loop",
            nodes=[loop, node],
        )
    if is_read:
        if w_pos and w_pos[-1] >= r_pos[0]:
            raise ScheduleError(
                primitive,
                f"{src.name} is written under loop "
                f"{loop.loop_var.name!r} at or after its first reader; a "
                f"copy at the start of the loop body would miss that write",
                argument=argument,
                nodes=[loop, node],
            )
        insert, start, end = r_pos[0], r_pos[0], len(subtrees)
    else:
        if r_pos and r_pos[-1] > w_pos[-1]:
            raise ScheduleError(
                primitive,
                f"{src.name} is read under loop "
                f"{loop.loop_var.name!r} after its last writer; a copy-back "
                f"at the end of the loop body would come too late for it",
                argument=argument,
                nodes=[loop, node],
            )
        insert, start, end = w_pos[-1] + 1, 0, w_pos[-1] + 1
        _check_initialized(idx, primitive, loop, subtrees[:end], src)
    region = _union(idx, loop, regions)
    for r in region:
        if not isinstance(r.extent, IntImm):
            raise ScheduleError(
                primitive,
                f"the region of {src.name} accessed under loop "
                f"{loop.loop_var.name!r} has a non-constant extent "
                f"{r.extent}",
                argument="loop",
                nodes=[loop],
            )
    dst = Buffer(
        fresh_name(scoped_name(src, storage_scope), buffer_names(sch.func)),
        src.shape,
        src.dtype,
        storage_scope,
    )
    for i in range(start, end):
        subtrees[i] = replace_buffers(subtrees[i], {src: dst})
    name = fresh_name(scoped_name(src, storage_scope), set(idx.realizes))
    outer = {l.loop_var: l for l in (*idx.loops_above(loop), loop)}
    copy = _copy_block(name, *((src, dst) if is_read else (dst, src)), region, outer)
    subtrees.insert(insert, copy)
    scope = idx.scope(loop)
    sch.replace(loop, loop.with_(body=seq(*subtrees)))
    allocate(sch, scope.name, dst)
    return sch.new_rv(BlockRV, name)


def _check_initialized(idx, primitive: str, loop: For, subtrees: Sequence[Stmt], src: Buffer) -> None:
    """The new buffer starts empty in each iteration: a block under ``loop`` may read
    ``src`` only after a block under ``loop`` wrote it, or as a reduction whose init runs in
    the same iteration (its reduce loops all under ``loop``)."""
    outer = {l.loop_var for l in (*idx.loops_above(loop), loop)}
    written = False
    for sub in subtrees:
        for realize in [sub] if isinstance(sub, BlockRealize) else idx.child_realizes(sub):
            b = realize.block
            # a reduction's update reads its output without listing it in its reads
            loads = any(isinstance(n, BufferLoad) and n.buffer is src for n in pre_order(b.body))
            if not written and (loads or any(r.buffer is src for r in b.reads)):
                reduce_vars = set().union(
                    *(
                        free_vars(v)
                        for iv, v in zip(b.iter_vars, realize.iter_values)
                        if iv.iter_type != SPATIAL
                    )
                )
                if b.init is None or reduce_vars & outer:
                    raise ScheduleError(
                        primitive,
                        f"block {b.name!r} reads {src.name} under loop {loop.loop_var.name!r} "
                        f"before any block there writes it (and has no init of its own running "
                        f"in each iteration): the new buffer would be read uninitialized",
                        argument="write_buffer_index",
                        nodes=[loop, b],
                    )
            written = written or any(r.buffer is src for r in b.writes)


def _relaxed(
    idx, realize: BlockRealize, loop: For, buf: Buffer, is_read: bool, relax_threads: bool
) -> tuple[Range, ...]:
    """The region of ``buf`` the block accesses in one iteration of ``loop``: relaxed over the
    loops between them (and, for a shared copy, over the thread loops above ``loop``: the
    threads of a block share one copy)."""
    between = idx.loops_above(realize)
    between = between[between.index(loop) + 1 :]
    dom = {l.loop_var: Range(l.min, l.extent) for l in between}
    if relax_threads:
        dom.update(
            {
                l.loop_var: Range(l.min, l.extent)
                for l in idx.loops_above(loop)
                if (l.thread_tag or "").startswith("threadIdx")
            }
        )
    reads, writes = block_access_regions(realize, dom, idx.var_ranges(realize))
    return next(r.region for r in (reads if is_read else writes) if r.buffer is buf)


def _union(idx, loop: For, regions: Sequence[tuple[Range, ...]]) -> tuple[Range, ...]:
    ranges = idx.var_ranges(loop)
    ranges[loop.loop_var] = Range(loop.min, loop.extent)
    out = list(regions[0])
    for region in regions[1:]:
        for d, r in enumerate(region):
            lo = min_expr(out[d].min, r.min)
            hi = max_expr(out[d].min + out[d].extent, r.min + r.extent)
            out[d] = Range(lo, hi - lo)
    return tuple(Range(simplify(r.min, ranges), simplify(r.extent, ranges)) for r in out)


def _copy_block(name: str, src: Buffer, dst: Buffer, region: Sequence[Range], outer: dict) -> BlockRealize:
    """Block ``name`` with one iterator per outer loop the region depends on, copying the
    region element by element in a loop nest of its own."""
    used = set().union(*(free_vars(r.min) | free_vars(r.extent) for r in region))
    loops = [l for v, l in outer.items() if v in used]
    ivs = tuple(IterVar(Var(f"v{k}"), Range(l.min, l.extent), SPATIAL) for k, l in enumerate(loops))
    vmap = {l.loop_var: iv.var for l, iv in zip(loops, ivs)}
    dom = tuple(Range(substitute(r.min, vmap), r.extent) for r in region)
    axes = [Var(f"ax{d}") for d in range(len(dom))]
    ranges = {iv.var: iv.dom for iv in ivs}
    ranges.update({a: Range.from_extent(r.extent) for a, r in zip(axes, dom)})
    indices = tuple(simplify(r.min + a, ranges) for r, a in zip(dom, axes))
    body: Stmt = BufferStore(dst, BufferLoad(src, indices), indices)
    # a relaxed region can stick out of the buffer (a padding stage reads A[i - 1] under a
    # guard): copying it whole would read and write out of bounds, so the copy is guarded
    inside = [simplify(c, ranges) for i, n in zip(indices, src.shape) for c in (i >= 0, i < n)]
    inside = [c for c in inside if not is_const(c, 1)]
    if inside:
        body = IfThenElse(functools.reduce(And, inside), body)
    for a, r in reversed(list(zip(axes, dom))):
        body = make_for(a, r.extent, body)
    block = Block(
        name, ivs, (BufferRegion(src, dom),), (BufferRegion(dst, dom),), body, annotations={AUTO_COPY: 1}
    )
    return BlockRealize(tuple(l.loop_var for l in loops), TRUE, block)


__all__ = ["read_at", "write_at", "AUTO_COPY"]
