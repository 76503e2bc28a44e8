"""Cache variants: ``reindex_cache_read``, ``reindex_cache_write``, ``cache_inplace`` (TVM 0.27).

``cache_read`` / ``cache_write`` (:mod:`.cache`) copy a buffer into one of the same shape.
The ``reindex_cache_*`` pair copies one block's single-point access into a buffer laid out by
an index map of the block's iterators (a packing stage, ready for ``compute_at``), in a loop
nest that repeats the block's own loops over the iterators the access uses. ``cache_inplace``
serves a block that reads and updates a buffer in place: a copy in before it and a copy back
after it, both right beside the block (under its loops).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ...errors import ScheduleError
from ...ir.buffer import Buffer
from ...ir.expr import BufferLoad, Expr, IntImm, Max, Min, Var
from ...ir.functor import free_vars, pre_order, replace_buffers, substitute
from ...ir.index_map import IndexMap
from ...ir.region import block_access_regions
from ...ir.stmt import (
    SPATIAL,
    TRUE,
    Block,
    BlockRealize,
    BufferStore,
    For,
    IterVar,
    Range,
    Stmt,
    seq,
)
from ...ir.structural import structural_equal
from ..instruction import schedule_primitive
from ..rewrite import simplify
from ..rv import BlockRV
from ...ir.index import FuncIndex
from .block_scope import buffer_names, buffers, fresh_name
from .cache import (
    allocate,
    check_storage_scope,
    copy_stage,
    nth_buffer,
    point_region,
    render_call,
    retarget_accesses,
    scoped_name,
)
from .compute_location import guarded_accesses

if TYPE_CHECKING:
    from ..schedule import Schedule


# ------------------------------------------------------------------------------------------
# helpers


def block_index_map(primitive: str, value: Any) -> IndexMap:
    """``value`` (a lambda, its text or an IndexMap) as an IndexMap; a bad one is refused."""
    try:
        return IndexMap.coerce(value)
    except (TypeError, ValueError) as exc:
        raise ScheduleError(primitive, str(exc), argument="index_map") from None


def single_access(primitive: str, block: Block, buf: Buffer) -> tuple[Expr, ...]:
    """The one index tuple every load and store of ``buf`` in ``block`` (init included) uses,
    none of them under a condition."""
    found: Optional[tuple[Expr, ...]] = None
    for part in (block.init, block.body):
        if part is None:
            continue
        for n in pre_order(part):
            if isinstance(n, (BufferLoad, BufferStore)) and n.buffer is buf:
                if found is not None and not all(
                    structural_equal(a, b, map_free_vars=False) for a, b in zip(found, n.indices)
                ):
                    raise ScheduleError(
                        primitive,
                        f"block {block.name!r} accesses {buf.name} at {list(found)} and at "
                        f"{list(n.indices)}; {primitive} needs a single point",
                        argument="block",
                        nodes=[block],
                    )
                found = n.indices
        for n, conds in guarded_accesses(part):
            if n.buffer is buf and conds:
                raise ScheduleError(
                    primitive,
                    f"block {block.name!r} accesses {buf.name} only where {conds[0]}; the cache "
                    f"stage copies at every iteration and would access it elsewhere too",
                    argument="block",
                    nodes=[block],
                )
    if found is None:
        raise ScheduleError(
            primitive,
            f"block {block.name!r} declares {buf.name} but its body does not access it",
            argument="block",
            nodes=[block],
        )
    return found


def loop_chain(primitive: str, sch: Schedule, block: Block) -> tuple[Stmt, list[For]]:
    """(outermost statement of the loop chain right above ``block``, the chain's loops): each
    loop of the chain holds only the next, so a stage can go right before or after it."""
    idx = sch.index
    node: Stmt = idx.realizes[block.name]
    chain: list[For] = []
    for loop in reversed(idx.loops_above(block)):
        if loop.body is not node:
            break
        chain.insert(0, loop)
        node = loop
    return node, chain


def _reindex_cache(
    sch: Schedule, primitive: str, block: BlockRV, index: Any, storage_scope: str, index_map: Any, kind: str
) -> BlockRV:
    """reindex_cache_read (``kind == "read"``) / reindex_cache_write (``"write"``)."""
    argument = f"{kind}_buffer_index"
    node = sch.get(block)
    check_storage_scope(primitive, storage_scope)
    buf = nth_buffer(primitive, node, index, kind, argument)
    imap = block_index_map(primitive, index_map)
    if kind == "read" and buf in buffers(node.writes):
        raise ScheduleError(
            primitive,
            f"block {node.name!r} also writes {buf.name}; use cache_inplace for a buffer updated in place",
            argument=argument,
            nodes=[node],
        )
    if (
        kind == "write"
        and node.init is None
        and any(isinstance(n, BufferLoad) and n.buffer is buf for n in pre_order(node.body))
    ):
        raise ScheduleError(
            primitive,
            f"block {node.name!r} reads the earlier values of {buf.name} (it has no init); a write "
            f"cache would start without them",
            argument=argument,
            nodes=[node],
        )
    if len(imap.params) != len(node.iter_vars):
        raise ScheduleError(
            primitive,
            f"{imap} takes {len(imap.params)} indices but block {node.name!r} has "
            f"{len(node.iter_vars)} iterators (the map takes one per block iterator, in order)",
            argument="index_map",
        )
    indices = single_access(primitive, node, buf)
    used_vars = set().union(*(free_vars(i) for i in indices))
    used = [k for k, iv in enumerate(node.iter_vars) if iv.var in used_vars]
    in_map = {p for e in imap.results for p in free_vars(e)}
    for k, (p, iv) in enumerate(zip(imap.params, node.iter_vars)):
        if p in in_map and k not in used:
            raise ScheduleError(
                primitive,
                f"{imap} uses {p.name} (iterator {iv.var.name!r}), which does not index {buf.name}: "
                f"the cache stage has no such iterator",
                argument="index_map",
            )
    for k in used:
        iv = node.iter_vars[k]
        if not (is_zero(iv.dom.min) and isinstance(iv.dom.extent, IntImm)):
            raise ScheduleError(
                primitive,
                f"iterator {iv.var.name!r} of block {node.name!r} has domain [{iv.dom.min}, "
                f"{iv.dom.min} + {iv.dom.extent}); {primitive} needs constant domains starting at 0",
                argument="block",
                nodes=[node],
            )
    extents = [node.iter_vars[k].dom.extent.value for k in used]
    reduced = IndexMap(tuple(imap.params[k] for k in used), imap.results) if used else None
    try:
        shape = reduced.map_shape(extents) if reduced else tuple(1 for _ in imap.results)
        injective = reduced.is_injective(extents) if reduced else True
    except ValueError as exc:
        raise ScheduleError(primitive, str(exc), argument="index_map") from None
    if not injective:
        raise ScheduleError(
            primitive,
            f"{imap} sends two elements of {buf.name} to the same element of the cache",
            argument="index_map",
        )
    idx = sch.index
    realize = idx.realizes[node.name]
    top, chain = loop_chain(primitive, sch, node)
    kept_vars = set().union(*(free_vars(realize.iter_values[k]) for k in used))
    kept = [l for l in chain if l.loop_var in kept_vars]
    pred = realize.predicate
    chain_vars = {l.loop_var for l in chain}
    if not structural_equal(pred, TRUE) and free_vars(pred) & (chain_vars - kept_vars):
        raise ScheduleError(
            primitive,
            f"block {node.name!r} has the predicate {pred} on loops the cache stage does not repeat",
            argument="block",
            nodes=[node],
        )
    cache = Buffer(
        fresh_name(scoped_name(buf, storage_scope), buffer_names(sch.func)), shape, buf.dtype, storage_scope
    )
    name = fresh_name(scoped_name(buf, storage_scope), set(idx.realizes))
    # the stage: the kept loops (fresh variables) around a block of the used iterators
    loop_map = {l.loop_var: Var(l.loop_var.name, l.loop_var.dtype) for l in kept}
    ivs = [IterVar(Var(node.iter_vars[k].var.name), node.iter_vars[k].dom, SPATIAL) for k in used]
    iv_map = {node.iter_vars[k].var: iv.var for k, iv in zip(used, ivs)}
    stage_cache_idx = tuple(
        substitute(e, {imap.params[k]: iv.var for k, iv in zip(used, ivs)}) for e in imap.results
    )
    stage_buf_idx = tuple(substitute(i, iv_map) for i in indices)
    if kind == "read":
        store = BufferStore(cache, BufferLoad(buf, stage_buf_idx), stage_cache_idx)
        regions = ((point_region(buf, stage_buf_idx),), (point_region(cache, stage_cache_idx),))
    else:
        store = BufferStore(buf, BufferLoad(cache, stage_cache_idx), stage_buf_idx)
        regions = ((point_region(cache, stage_cache_idx),), (point_region(buf, stage_buf_idx),))
    stage_block = Block(name, tuple(ivs), regions[0], regions[1], store)
    values = tuple(substitute(realize.iter_values[k], loop_map) for k in used)
    stage: Stmt = BlockRealize(values, substitute(pred, loop_map), stage_block)
    for l in reversed(kept):
        stage = For(loop_map[l.loop_var], l.min, l.extent, l.kind, stage, l.thread_tag, l.annotations)
    block_idx = tuple(
        substitute(e, dict(zip(imap.params, (iv.var for iv in node.iter_vars)))) for e in imap.results
    )
    new_block = retarget_accesses(node, buf, cache, block_idx)
    key = top.loop_var if isinstance(top, For) else None
    sch.replace(node, new_block)
    top = sch.index.loops[key] if key is not None else sch.index.realizes[node.name]
    sch.replace(top, seq(stage, top) if kind == "read" else seq(top, stage))
    allocate(sch, block_scope_name(idx, node), cache)
    return sch.new_rv(BlockRV, name)


def block_scope_name(idx: FuncIndex, block: Block) -> str:
    scope = idx.scope(block)
    assert scope is not None, "a block below the root has a scope"  # (only the root has none)
    return scope.name


def is_zero(e: Expr) -> bool:
    return isinstance(e, IntImm) and e.value == 0


# ------------------------------------------------------------------------------------------
# reindex_cache_read / reindex_cache_write


@schedule_primitive(
    "reindex_cache_read", as_python=render_call, tvm_attrs=("read_buffer_index", "storage_scope")
)
def reindex_cache_read(
    sch: Schedule, block: BlockRV, read_buffer_index: int, storage_scope: str, index_map: IndexMap
) -> BlockRV:
    """Copy what ``block`` reads of ``block.reads[read_buffer_index]`` into a new buffer
    ``<buffer>_<scope>`` at ``index_map(*block iterators)``, and make the block read it there.

    The copy block (returned) has the block's iterators that index the buffer, bound as in the
    block, under copies of the block's loops that bind them, and goes right before the block's
    loops. ``index_map`` takes one index per block iterator (a lambda, its text or an IndexMap)
    and may use only the iterators that index the buffer. Unlike ``cache_read`` it serves this
    block alone. Rules: the block reads the buffer at one point (the same indices everywhere,
    not under a condition) and does not write it; those iterators have constant domains from 0;
    the map is injective on them; a block predicate uses only the loops the copy repeats.

    Before / after ``reindex_cache_read(B, 0, "local", lambda vi, vj: (vj, vi))``::

        for i, j: block B:                   for i, j: block A_local:
          B[vi, vj] = A[vi, vj] * 2            A_local[vj, vi] = A[vi, vj]
                                             for i, j: block B: B[vi, vj] = A_local[vj, vi] * 2
    """
    return _reindex_cache(
        sch, "reindex_cache_read", block, read_buffer_index, storage_scope, index_map, "read"
    )


@schedule_primitive(
    "reindex_cache_write", as_python=render_call, tvm_attrs=("write_buffer_index", "storage_scope")
)
def reindex_cache_write(
    sch: Schedule, block: BlockRV, write_buffer_index: int, storage_scope: str, index_map: IndexMap
) -> BlockRV:
    """Make ``block`` write a new buffer ``<buffer>_<scope>`` at ``index_map(*block iterators)``
    instead of ``block.writes[write_buffer_index]``, and add a block (returned) copying it back
    right after the block's loops, in copies of the loops that bind the iterators indexing the
    buffer. A reduction's ``init`` and its reads of the buffer follow the cache.

    Rules: as ``reindex_cache_read``; and a block reading the buffer's earlier values (an update
    without ``init``) is refused, the cache would not hold them.

    Before / after ``reindex_cache_write(B, 0, "local", lambda vi, vj: (vi // 2, vi % 2, vj))``::

        for i, j: block B:                   for i, j: block B:
          B[vi, vj] = A[vi, vj] * 2            B_local[vi // 2, vi % 2, vj] = A[vi, vj] * 2
                                             for i, j: block B_local:
                                               B[vi, vj] = B_local[vi // 2, vi % 2, vj]
    """
    return _reindex_cache(
        sch, "reindex_cache_write", block, write_buffer_index, storage_scope, index_map, "write"
    )


# ------------------------------------------------------------------------------------------
# cache_inplace


@schedule_primitive("cache_inplace", tvm_inputs=("block",), tvm_attrs=("read_buffer_index", "storage_scope"))
def cache_inplace(sch: Schedule, block: BlockRV, read_buffer_index: Any, storage_scope: str) -> list[BlockRV]:
    """For a block that reads and writes a buffer in place (``block.reads[read_buffer_index]``,
    an index or a name), copy the part it touches into a new buffer ``<buffer>_<scope>`` right
    before the block, make the block work on the copy, and copy that part back right after it.
    Returns ``[copy-in block, copy-back block]``.

    The part copied is the hull of what the block reads and writes at one instance (so an
    element the block reads but does not write goes back unchanged). The two copy blocks are
    named ``<buffer>_<scope>`` and the next fresh name: TVM gives both the same name, workbench
    keeps block names unique. Rules: the block both reads and writes the buffer.

    Before / after ``cache_inplace(A, 0, "local")``::

        for i in range(64):                  for i in range(64):
          block A: A[vi] = A[vi] * 2           for ax0 in range(1): block A_local:
                                                 A_local[vax0] = A[vax0]       (vax0 = i + ax0)
                                               block A: A_local[vi] = A_local[vi] * 2
                                               for ax0 in range(1): block A_local_1:
                                                 A[vax0] = A_local[vax0]
    """
    node = sch.get(block)
    check_storage_scope("cache_inplace", storage_scope)
    buf = nth_buffer("cache_inplace", node, read_buffer_index, "read", "read_buffer_index")
    if buf not in buffers(node.writes):
        raise ScheduleError(
            "cache_inplace",
            f"block {node.name!r} reads {buf.name} but does not write it; use cache_read",
            argument="read_buffer_index",
            nodes=[node],
        )
    idx = sch.index
    realize = idx.realizes[node.name]
    ranges = idx.var_ranges(realize)
    reads, writes = block_access_regions(realize, {}, ranges)
    r = next(x.region for x in reads if x.buffer is buf)
    w = next(x.region for x in writes if x.buffer is buf)
    region = tuple(_hull(a, b, ranges) for a, b in zip(r, w))
    cache = Buffer(
        fresh_name(scoped_name(buf, storage_scope), buffer_names(sch.func)),
        buf.shape,
        buf.dtype,
        storage_scope,
    )
    taken = set(idx.realizes)
    name_in = fresh_name(scoped_name(buf, storage_scope), taken)
    name_out = fresh_name(scoped_name(buf, storage_scope), taken | {name_in})
    copy_in = copy_stage(name_in, buf, cache, region, ranges)
    copy_out = copy_stage(name_out, cache, buf, region, ranges)
    where = block_scope_name(idx, node)
    sch.replace(node, replace_buffers(node, {buf: cache}))
    sch.replace(sch.index.realizes[node.name], seq(copy_in, sch.index.realizes[node.name], copy_out))
    allocate(sch, where, cache)
    return [sch.new_rv(BlockRV, name_in), sch.new_rv(BlockRV, name_out)]


def _hull(a: Range, b: Range, ranges: dict) -> Range:
    """The smallest range holding ``a`` and ``b`` (they are equal for the usual in-place block)."""
    if structural_equal(a.min, b.min, map_free_vars=False) and structural_equal(
        a.extent, b.extent, map_free_vars=False
    ):
        return a
    lo = simplify(Min(a.min, b.min), ranges)
    hi = simplify(Max(a.min + a.extent, b.min + b.extent), ranges)
    return Range(lo, simplify(hi - lo, ranges))


__all__ = [
    "block_scope_name",
    "reindex_cache_read",
    "reindex_cache_write",
    "cache_inplace",
    "single_access",
    "loop_chain",
]
