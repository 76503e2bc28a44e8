"""Caching: ``cache_read``, ``cache_write``, ``reindex`` (TensorIR semantics).

Each puts a *copy stage* between a buffer and the blocks that use it: a new block, in a loop
nest of its own, copying one buffer into another element by element. The new buffer is
allocated by the scope block (the block directly enclosing the ones involved, usually
``root``) with the full shape of the original, so the copy can later be moved under a tile
loop with ``compute_at`` / ``reverse_compute_at`` without changing any index.

Where the stage goes (as TVM's cache-location rule): in the innermost loop body or block body
that holds both the producer of the buffer and the first block that must see the copy,
right before the statement containing that block; for a buffer no block of the scope writes
(a function input), at the start of the scope; for an output nobody reads, at its end. The
copied region is what the producer writes, relaxed over the loops between it and that place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence, Union

from ...errors import ScheduleError
from ...ir.buffer import SCOPES, Buffer
from ...ir.expr import BufferLoad, Expr, IntImm, Select, Var, const, is_const
from ...ir.functor import free_vars, pre_order, replace_buffers, substitute, transform
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
from ...ir.structural import structural_equal
from ..instruction import Instruction, py_value, schedule_primitive
from ..rewrite import conjoin, simplify
from ..rv import RV, BlockRV
from ...ir.index import FuncIndex
from .block_scope import buffer_names, buffers, fresh_name
from .compute_location import guarded_accesses

if TYPE_CHECKING:
    from ..schedule import Schedule

# a statement with a body a stage can be inserted into: a loop or a block
BodyOwner = Union[For, Block]

# ------------------------------------------------------------------------------------------
# helpers shared with the layout primitives


def nth_buffer(primitive: str, block: Block, index: Any, kind: str, argument: str) -> Buffer:
    """The buffer of ``block.reads[index]`` (``kind == "read"``) or ``block.writes[index]``,
    or the one of that name."""
    regions = block.reads if kind == "read" else block.writes
    names = [r.buffer.name for r in regions]
    if isinstance(index, str):
        if index not in names:
            raise ScheduleError(
                primitive,
                f"block {block.name!r} {kind}s no buffer named {index!r} (it {kind}s {names})",
                argument=argument,
                nodes=[block],
            )
        return regions[names.index(index)].buffer
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(regions):
        raise ScheduleError(
            primitive,
            f"block {block.name!r} {kind}s {len(regions)} buffers "
            f"{names}; {index!r} is not an index into them",
            argument=argument,
            nodes=[block],
        )
    return regions[index].buffer


def check_storage_scope(primitive: str, scope: Any) -> None:
    if scope not in SCOPES:
        raise ScheduleError(
            primitive,
            f"unknown storage scope {scope!r}; expected one of {', '.join(SCOPES)}",
            argument="storage_scope",
        )


def scoped_name(buffer: Buffer, scope: str) -> str:
    """TVM's ``<buffer>_<scope>`` naming (dots replaced: the name stays an identifier)."""
    return f"{buffer.name}_{scope.replace('.', '_')}"


def allocation_site(idx: FuncIndex, block: Block, buffer: Buffer) -> Optional[Block]:
    """The block enclosing ``block`` (or ``block`` itself) that allocates ``buffer``; None when
    ``buffer`` is not allocated by a block (a function parameter)."""
    for node in (block, *idx.ancestors(block)):
        if isinstance(node, Block) and buffer in node.alloc_buffers:
            return node
    return None


def allocate(sch, scope_name: str, buffer: Buffer) -> None:
    scope = sch.index.block(scope_name)
    sch.replace(scope, scope.with_(alloc_buffers=scope.alloc_buffers + (buffer,)))


def insert_into_body(sch, owner: BodyOwner, pos: int, stage: Stmt) -> None:
    """Put ``stage`` at position ``pos`` of the body of ``owner`` (a loop or a block)."""
    body = owner.body
    items = list(body.seq) if isinstance(body, SeqStmt) else [body]
    items.insert(pos, stage)
    sch.replace(owner, owner.with_(body=seq(*items)))


def point_region(buffer: Buffer, indices: Sequence[Expr]) -> BufferRegion:
    return BufferRegion(buffer, tuple(Range(i, IntImm(1)) for i in indices))


def copy_stage(name: str, src: Buffer, dst: Buffer, region: Sequence[Range], ranges: dict) -> Stmt:
    """Loops ``ax0 …`` over ``region`` around block ``name``: ``dst[v] = src[v]``, where the
    iterators ``vax0 …`` span the buffers' shape and are bound to ``region.min + ax``."""
    loop_vars = [Var(f"ax{d}") for d in range(len(region))]
    # iterators are named "v" + loop, the DSL's convention (compute_at names loops back)
    ivs = tuple(IterVar(Var(f"vax{d}"), Range.from_extent(s), SPATIAL) for d, s in enumerate(src.shape))
    inner = dict(ranges)
    inner.update({v: Range.from_extent(r.extent) for v, r in zip(loop_vars, region)})
    values = tuple(simplify(r.min + v, inner) for r, v in zip(region, loop_vars))
    idx = tuple(iv.var for iv in ivs)
    block = Block(
        name,
        ivs,
        (point_region(src, idx),),
        (point_region(dst, idx),),
        BufferStore(dst, BufferLoad(src, idx), idx),
    )
    nest: Stmt = BlockRealize(values, TRUE, block)
    for v, r in reversed(list(zip(loop_vars, region))):
        nest = make_for(v, r.extent, nest)
    return nest


def _clamp(region: Sequence[Range], shape: Sequence[Any]) -> tuple[Range, ...]:
    """Constant ranges cut to the buffer (a relaxed region may overhang a guarded edge); a
    symbolic dimension (a size variable) is left as it is."""
    out = []
    for r, n in zip(region, shape):
        if isinstance(n, int) and isinstance(r.min, IntImm) and isinstance(r.extent, IntImm):
            lo, hi = max(0, r.min.value), min(n, r.min.value + r.extent.value)
            r = Range(IntImm(lo), IntImm(hi - lo))
        out.append(r)
    return tuple(out)


def render_call(
    inst: Instruction,
    names: Mapping[RV, str],
    map_text: Optional[Callable[[Any, Mapping[RV, str]], str]] = None,
) -> str:
    """TVM's trace text: the index map as a lambda, a buffer as a ``("read", 0)`` tuple.
    ``map_text`` renders a recorded map (and a pad value given as one) where the map is kept
    as text with random variables (``transform_layout``); by default it prints itself."""
    parts = []
    for key, value in inst.args.items():
        if key == "index_map" or (key == "pad_value" and isinstance(value, (str, list))):
            text = str(value) if map_text is None else map_text(value, names)
        elif key == "buffer" and isinstance(value, (list, tuple)):
            text = f"({py_value(value[0], names)}, {py_value(value[1], names)})"
        else:
            text = py_value(value, names)
        parts.append(f"{key}={text}")
    call = f"sch.{inst.kind.name}({', '.join(parts)})"
    return f"{names[inst.outputs[0]]} = {call}" if inst.outputs else call


# ------------------------------------------------------------------------------------------
# where the stage goes


def _locate(scope: Block, producer: Optional[str], related: set[str]) -> tuple[BodyOwner, int]:
    """(statement whose body receives the stage, position in that body): see the module doc."""
    found: list[tuple[BodyOwner, int]] = []

    def walk(stmt: Stmt) -> tuple[bool, bool]:
        if isinstance(stmt, BlockRealize):
            return stmt.block.name == producer, stmt.block.name in related
        if isinstance(stmt, For):
            return body_walk(stmt)
        return False, False

    def body_walk(owner: BodyOwner) -> tuple[bool, bool]:
        if not isinstance(owner.body, SeqStmt):
            return walk(owner.body)
        saw_p = saw_r = False
        for i, s in enumerate(owner.body.seq):
            p, r = walk(s)
            if found:
                return True, True
            saw_p, saw_r = saw_p or p, saw_r or r
            if saw_p and saw_r:
                found.append((owner, i))
                return True, True
            if saw_r:  # a related block before the producer: the stage cannot go in here
                break
        return saw_p, saw_r

    _, saw_related = body_walk(scope)
    if found:
        return found[0]
    if saw_related or producer is None:
        return scope, 0
    n = len(scope.body.seq) if isinstance(scope.body, SeqStmt) else 1
    return scope, n


def _produced_region(idx: FuncIndex, producer: Block, buffer: Buffer, owner: BodyOwner) -> tuple[Range, ...]:
    """What ``producer`` writes of ``buffer``, relaxed over its loops below ``owner``."""
    realize = idx.realizes[producer.name]
    loops = idx.loops_above(producer)
    if isinstance(owner, For):
        loops = loops[loops.index(owner) + 1 :]
    dom = {l.loop_var: Range(l.min, l.extent) for l in loops}
    _, writes = block_access_regions(realize, dom, idx.var_ranges(realize))
    region = next(r.region for r in writes if r.buffer is buffer)
    return _clamp(region, buffer.shape)


def _ranges_inside(idx: FuncIndex, owner: BodyOwner) -> dict:
    """The variables in scope inside the body of ``owner`` (a loop or a block)."""
    ranges = idx.var_ranges(owner)
    if isinstance(owner, For):
        ranges[owner.loop_var] = Range(owner.min, owner.extent)
    else:
        ranges.update({iv.var: iv.dom for iv in owner.iter_vars})
    return ranges


def _site_key(owner: BodyOwner) -> tuple[str, Any]:
    return ("loop", owner.loop_var) if isinstance(owner, For) else ("block", owner.name)


def _site(sch, key: tuple[str, Any]) -> BodyOwner:
    return sch.index.loops[key[1]] if key[0] == "loop" else sch.index.block(key[1])


def _consumers(
    sch, primitive: str, given: Optional[Sequence], candidates: list[Block], buffer: Buffer
) -> list[Block]:
    """The blocks named by ``consumer_blocks`` (BlockRVs or names), each one a candidate."""
    if given is None:
        return []
    if not isinstance(given, (list, tuple)):
        raise ScheduleError(
            primitive, f"expected a list of blocks, got {given!r}", argument="consumer_blocks"
        )
    out = []
    for g in given:
        node = sch.get(g) if isinstance(g, BlockRV) else sch.index.realizes.get(g)
        node = node.block if isinstance(node, BlockRealize) else node
        if not isinstance(node, Block) or node not in candidates:
            what = node.name if isinstance(node, Block) else g
            raise ScheduleError(
                primitive,
                f"{what!r} is not a block of the same scope that "
                f"reads {buffer.name} (candidates: "
                f"{[b.name for b in candidates]})",
                argument="consumer_blocks",
            )
        out.append(node)
    return out


def _stage(
    sch, scope: Block, rewrites: dict[Block, Block], site: tuple[BodyOwner, int], stage: Stmt, cache: Buffer
) -> None:
    """Rewrite the blocks, insert the stage, allocate the cache: three path copies."""
    key, pos = _site_key(site[0]), site[1]
    for old, new in rewrites.items():
        sch.replace(sch.index.block(old.name), new)
    insert_into_body(sch, _site(sch, key), pos, stage)
    allocate(sch, scope.name, cache)


# ------------------------------------------------------------------------------------------
# cache_read / cache_write


@schedule_primitive(
    "cache_read", tvm_inputs=("block", "consumer_blocks"), tvm_attrs=("read_buffer_index", "storage_scope")
)
def cache_read(
    sch: Schedule,
    block: BlockRV,
    read_buffer_index: int,
    storage_scope: str,
    consumer_blocks: Optional[list] = None,
) -> BlockRV:
    """Copy the buffer ``block.reads[read_buffer_index]`` into a new buffer of
    ``storage_scope`` (named ``<buffer>_<scope>``) and make its consumers read the copy.

    The consumers are every block of the scope reading the buffer, or those of
    ``consumer_blocks`` (BlockRVs or names). Returns the new copy block. Rules: the buffer has
    at most one writer in the scope, and ``block`` does not write it itself.

    Before / after ``cache_read(C, 0, "local")`` where block C reads A::

        for i, j: block C: C[vi, vj] = A[vi, vj] * 2
                                          for ax0, ax1: block A_local:
                                            A_local[vax0, vax1] = A[vax0, vax1]
                                          for i, j: block C: C[vi, vj] = A_local[vi, vj] * 2
    """
    node = sch.get(block)
    check_storage_scope("cache_read", storage_scope)
    buf = nth_buffer("cache_read", node, read_buffer_index, "read", "read_buffer_index")
    if buf in buffers(node.writes):
        raise ScheduleError(
            "cache_read",
            f"block {node.name!r} also writes {buf.name} (it "
            f"updates it in place); use cache_write for that buffer",
            argument="read_buffer_index",
            nodes=[node],
        )
    idx = sch.index
    scope = idx.scope(node)
    siblings = [r.block for r in idx.child_realizes(scope)]
    writers = [b for b in siblings if buf in buffers(b.writes)]
    if len(writers) > 1:
        raise ScheduleError(
            "cache_read",
            f"{buf.name} is written by several blocks of the "
            f"scope {[b.name for b in writers]}; it must have one writer",
            argument="read_buffer_index",
            nodes=writers,
        )
    readers = [b for b in siblings if buf in buffers(b.reads) and b not in writers]
    consumers = _consumers(sch, "cache_read", consumer_blocks, readers, buf) or readers
    cache = Buffer(
        fresh_name(scoped_name(buf, storage_scope), buffer_names(sch.func)),
        buf.shape,
        buf.dtype,
        storage_scope,
    )
    if writers:
        site = _locate(scope, writers[0].name, {b.name for b in consumers})
        region = _produced_region(idx, writers[0], buf, site[0])
    else:
        site = (scope, 0)
        region = BufferRegion.full(buf).region
    name = fresh_name(scoped_name(buf, storage_scope), set(idx.realizes))
    stage = copy_stage(name, buf, cache, region, _ranges_inside(idx, site[0]))
    rewrites = {b: replace_buffers(b, {buf: cache}) for b in consumers}
    _stage(sch, scope, rewrites, site, stage, cache)
    return sch.new_rv(BlockRV, name)


@schedule_primitive(
    "cache_write", tvm_inputs=("block", "consumer_blocks"), tvm_attrs=("write_buffer_index", "storage_scope")
)
def cache_write(
    sch: Schedule,
    block: BlockRV,
    write_buffer_index: int,
    storage_scope: str,
    consumer_blocks: Optional[list] = None,
) -> BlockRV:
    """Make ``block`` write a new buffer of ``storage_scope`` (``<buffer>_<scope>``) instead of
    ``block.writes[write_buffer_index]``, and add a block copying it back to the original.

    A reduction's ``init`` moves with it. The copy goes right before the first later reader
    (after the block); the readers in ``consumer_blocks`` read the cache directly instead.
    Returns the copy-back block. Rules: ``block`` is the only writer of the buffer in its scope;
    a block that reads the buffer has its own init (an update whose init went to another block,
    by ``decompose_reduction`` or ``blockize``, would accumulate into a cache nothing
    initialised: TVM accepts it and computes garbage, refused here).

    Before / after ``cache_write(C, 0, "local")``::

        for i, j, k: block C:             for i, j, k: block C:
          init: C[vi, vj] = 0                 init: C_local[vi, vj] = 0
          C[vi, vj] += A[vi, vk] * B[vk, vj]  C_local[vi, vj] += A[vi, vk] * B[vk, vj]
                                          for ax0, ax1: block C_local:
                                            C[vax0, vax1] = C_local[vax0, vax1]
    """
    node = sch.get(block)
    check_storage_scope("cache_write", storage_scope)
    buf = nth_buffer("cache_write", node, write_buffer_index, "write", "write_buffer_index")
    idx = sch.index
    scope = idx.scope(node)
    siblings = [r.block for r in idx.child_realizes(scope)]
    writers = [b for b in siblings if buf in buffers(b.writes)]
    if writers != [node]:
        raise ScheduleError(
            "cache_write",
            f"{buf.name} is written by several blocks of the "
            f"scope {[b.name for b in writers]}; block {node.name!r} must be "
            f"its only writer",
            argument="write_buffer_index",
            nodes=writers,
        )
    if node.init is None and loads(node, buf):
        raise ScheduleError(
            "cache_write",
            f"block {node.name!r} reads {buf.name}, which it writes, and has no init of its own "
            f"(an update whose init, if any, is another block's): the cache would be read where "
            f"nothing wrote it; cache_write the block before decompose_reduction or blockize",
            argument="write_buffer_index",
            nodes=[node],
        )
    readers = [b for b in siblings if b is not node and buf in buffers(b.reads)]
    direct = _consumers(sch, "cache_write", consumer_blocks, readers, buf)
    related = {b.name for b in readers if b not in direct}
    site = _locate(scope, node.name, related)
    region = _produced_region(idx, node, buf, site[0])
    cache = Buffer(
        fresh_name(scoped_name(buf, storage_scope), buffer_names(sch.func)),
        buf.shape,
        buf.dtype,
        storage_scope,
    )
    name = fresh_name(scoped_name(buf, storage_scope), set(idx.realizes))
    stage = copy_stage(name, cache, buf, region, _ranges_inside(idx, site[0]))
    rewrites = {b: replace_buffers(b, {buf: cache}) for b in [node, *direct]}
    _stage(sch, scope, rewrites, site, stage, cache)
    return sch.new_rv(BlockRV, name)


# ------------------------------------------------------------------------------------------
# reindex


def buffer_of(primitive: str, block: Block, buffer: Any, argument: str = "buffer") -> tuple[Buffer, str]:
    """(buffer, "read" | "write") for ``("read" | "write", index)`` or a buffer name."""
    if isinstance(buffer, (list, tuple)) and len(buffer) == 2 and buffer[0] in ("read", "write"):
        return nth_buffer(primitive, block, buffer[1], buffer[0], argument), buffer[0]
    if isinstance(buffer, str):
        for kind, regions in (("write", block.writes), ("read", block.reads)):
            for r in regions:
                if r.buffer.name == buffer:
                    return r.buffer, kind
        raise ScheduleError(
            primitive,
            f"block {block.name!r} accesses no buffer named {buffer!r}",
            argument=argument,
            nodes=[block],
        )
    raise ScheduleError(
        primitive, f'expected ("read" | "write", index) or a buffer name, got {buffer!r}', argument=argument
    )


def loads(block: Block, buf: Buffer) -> bool:
    """Whether the body of ``block`` (not its init) loads ``buf`` (the read regions may leave out
    the update of an accumulation)."""
    return any(isinstance(n, BufferLoad) and n.buffer is buf for n in pre_order(block.body))


def stores(block: Block, buf: Buffer) -> bool:
    return buf in buffers(block.writes) or any(
        isinstance(n, BufferStore) and n.buffer is buf for n in pre_order(block.body)
    )


def _single_access(block: Block, buf: Buffer) -> tuple[Expr, ...]:
    """The one index tuple every load and store of ``buf`` in ``block`` uses."""
    found: list[tuple[Expr, ...]] = []
    for part in (block.init, block.body):
        for n in pre_order(part) if part is not None else ():
            if isinstance(n, (BufferLoad, BufferStore)) and n.buffer is buf:
                if found and not all(
                    structural_equal(a, b, map_free_vars=False) for a, b in zip(found[0], n.indices)
                ):
                    raise ScheduleError(
                        "reindex",
                        f"block {block.name!r} accesses {buf.name} "
                        f"at different indices ({list(found[0])} and "
                        f"{list(n.indices)}); reindex needs a single pattern",
                        argument="buffer",
                        nodes=[block],
                    )
                found.append(n.indices)
    if not found:
        raise ScheduleError(
            "reindex",
            f"block {block.name!r} declares {buf.name} but its body does not access it",
            argument="buffer",
            nodes=[block],
        )
    return found[0]


def _access_guard(block: Block, buf: Buffer, covered: set[Var]) -> Expr:
    """The condition under which ``block`` accesses ``buf`` (TRUE when some access is
    unconditional): the copy block must access the original buffer only there, or a read under a
    padding guard would become an out-of-bounds read of the whole extent."""
    guards = [
        conds
        for part in (block.init, block.body)
        if part is not None
        for n, conds in guarded_accesses(part)
        if n.buffer is buf
    ]
    if any(not conds for conds in guards):
        return TRUE
    first = guards[0]
    if any(
        len(g) != len(first) or not all(structural_equal(a, b, map_free_vars=False) for a, b in zip(g, first))
        for g in guards[1:]
    ):
        raise ScheduleError(
            "reindex",
            f"block {block.name!r} accesses {buf.name} under different conditions; reindex "
            f"needs one condition to keep in the copy block",
            argument="buffer",
            nodes=[block],
        )
    guard: Expr = TRUE
    for c in first:
        guard = conjoin(guard, c)
    loads = [n for n in pre_order(guard) if isinstance(n, BufferLoad)]
    outside = free_vars(guard) - covered
    if loads or outside:
        why = (
            f"it reads {loads[0].buffer.name}"
            if loads
            else f"it depends on {sorted(v.name for v in outside)}, which do not index {buf.name}"
        )
        raise ScheduleError(
            "reindex",
            f"block {block.name!r} accesses {buf.name} only where {guard}, and the copy block "
            f"cannot test that condition: {why}",
            argument="buffer",
            nodes=[block],
        )
    return guard


def _chain_top(idx: FuncIndex, block: Block) -> Stmt:
    """The outermost statement of the loop chain right above ``block`` (each loop holding only
    the next one), which must reach up to the block's scope."""
    node: Stmt = idx.realizes[block.name]
    for loop in reversed(idx.loops_above(block)):
        if loop.body is not node:
            raise ScheduleError(
                "reindex",
                f"loop {loop.loop_var.name!r} above block "
                f"{block.name!r} holds other statements too; reindex needs the "
                f"block alone under its loops",
                argument="block",
                nodes=[loop],
            )
        node = loop
    return node


@schedule_primitive("reindex", as_python=render_call, tvm_name="ReIndex")
def reindex(sch: Schedule, block: BlockRV, buffer: Any) -> BlockRV:
    """Make ``block`` access a new buffer ``<buffer>_reindex`` indexed by its own iterators,
    with a block copying between it and the original (before the block's loops for a read,
    after them for a write). ``buffer`` is ``("read" | "write", index)`` or a buffer name.

    The new buffer has one axis per iterator used in the original indices (in iterator order,
    of the iterator's extent). Rules: the block is a leaf (it holds no other block, as in TVM)
    indexing the buffer by its iterators (not by loops of its own body: TVM crashes there);
    every access of the buffer in the block uses the same indices; the block is alone under its
    loops; those iterators start at 0. A buffer the block both reads and writes (an update) is
    reindexed as a write, and only when the block has its own init: the read of an update would
    send the updates to a copy never written back, and the write of an update whose init went to
    another block (decompose_reduction, blockize) would accumulate into a buffer nothing
    initialised. TVM accepts both and computes garbage; both are refused here.

    Names as TVM: the new buffer is ``<buffer>_reindex`` and the copy block is named after the
    buffer it writes, ``<buffer>_reindex_reindex`` for a read, ``<buffer>_reindex`` for a write.
    Where TVM would repeat a buffer or block name (two reindexes of the same buffer), ours gets
    a ``_1``, ``_2`` … suffix: blocks and buffers are looked up by their unique names here.

    An access under a condition (a padding stage's ``if_then_else``) keeps that condition in the
    copy block: a read copy reads the original only where the condition holds (and stores 0
    elsewhere, which the block never reads back), a write copy copies back only there. TVM
    copies the whole extent, reading out of bounds or overwriting what the block left alone.
    A condition the copy block cannot test (on iterators that do not index the buffer, or on
    loaded data), or different conditions on different accesses, is refused.

    Before / after ``reindex(C, ("read", 0))`` where C reads ``A[vj, vi]``::

        for i, j: block C:                for ax0, ax1: block A_reindex_reindex:
          C[vi, vj] = A[vj, vi]             A_reindex[vax0, vax1] = A[vax1, vax0]
                                          for i, j: block C: C[vi, vj] = A_reindex[vi, vj]
    """
    node = sch.get(block)
    buf, kind = buffer_of("reindex", node, buffer)
    idx = sch.index
    inner = [n.block.name for n in pre_order(node.body) if isinstance(n, BlockRealize)]
    if inner:
        raise ScheduleError(
            "reindex",
            f"block {node.name!r} is not a leaf block: it contains block(s) {inner}; reindex "
            f"the inner block instead",
            argument="block",
            nodes=[node],
        )
    if kind == "read" and stores(node, buf):
        raise ScheduleError(
            "reindex",
            f"block {node.name!r} also writes {buf.name}: the reindexed copy would take its "
            f"updates and never be written back; reindex the write of {buf.name} instead (a "
            f"block with its own init)",
            argument="buffer",
            nodes=[node],
        )
    if kind == "write" and node.init is None and loads(node, buf):
        raise ScheduleError(
            "reindex",
            f"block {node.name!r} reads {buf.name}, which it writes, and has no init of its own "
            f"(an update whose init, if any, is another block's): the new buffer would be read "
            f"where nothing wrote it; reindex the block before decompose_reduction or blockize",
            argument="buffer",
            nodes=[node],
        )
    indices = _single_access(node, buf)
    used = set().union(*(free_vars(i) for i in indices))
    top = _chain_top(idx, node)
    # the copy goes above the block's loops: it sees the block's iterators (as its own) and
    # what is in scope there, not the loops of the block's own body
    outside = used - {iv.var for iv in node.iter_vars} - set(idx.var_ranges(top))
    if outside:
        raise ScheduleError(
            "reindex",
            f"block {node.name!r} indexes {buf.name} by {sorted(v.name for v in outside)}, which are "
            f"not its iterators (loops of its own body); reindex needs a leaf block indexing the "
            f"buffer by its iterators",
            argument="block",
            nodes=[node],
        )
    covered = [iv for iv in node.iter_vars if iv.var in used]
    for iv in covered:
        if not (
            isinstance(iv.dom.min, IntImm) and iv.dom.min.value == 0 and isinstance(iv.dom.extent, IntImm)
        ):
            raise ScheduleError(
                "reindex",
                f"iterator {iv.var.name!r} of block {node.name!r} "
                f"has domain [{iv.dom.min}, {iv.dom.min} + {iv.dom.extent}); "
                f"reindex needs constant domains starting at 0",
                argument="block",
                nodes=[node],
            )
    new_buf = Buffer(
        fresh_name(f"{buf.name}_reindex", buffer_names(sch.func)),
        tuple(iv.dom.extent.value for iv in covered),
        buf.dtype,
        buf.scope,
    )
    own = tuple(iv.var for iv in covered)
    # the copy block: its iterators replace the covered ones in the original indices
    ivs = tuple(IterVar(Var(f"vax{k}"), iv.dom, SPATIAL) for k, iv in enumerate(covered))
    vmap = {iv.var: new.var for iv, new in zip(covered, ivs)}
    theirs = tuple(substitute(i, vmap) for i in indices)
    mine = tuple(iv.var for iv in ivs)
    src, dst = (buf, theirs), (new_buf, mine)
    if kind == "write":
        src, dst = dst, src
    guard = substitute(_access_guard(node, buf, set(own)), vmap)
    value: Expr = BufferLoad(*src)
    if kind == "read" and not is_const(guard, 1):
        # (what the block reads outside the guard: it never reads it back)
        value = Select(guard, value, const(0, value.dtype))
    copy_body: Stmt = BufferStore(dst[0], value, dst[1])
    if kind == "write" and not is_const(guard, 1):  # elsewhere the block left buf as it was
        copy_body = IfThenElse(guard, copy_body)
    # TVM names the copy block after the buffer it writes, plus "_reindex"
    name = fresh_name(f"{dst[0].name}_reindex", set(idx.realizes))
    copy = Block(name, ivs, (point_region(*src),), (point_region(*dst),), copy_body)
    loops = [Var(f"ax{k}") for k in range(len(ivs))]
    stage: Stmt = BlockRealize(tuple(loops), TRUE, copy)
    for v, iv in reversed(list(zip(loops, ivs))):
        stage = make_for(v, iv.dom.extent, stage)
    new_block = retarget_accesses(node, buf, new_buf, own)
    scope = idx.scope(node)
    key = _site_key(top) if isinstance(top, For) else None
    sch.replace(node, new_block)
    top = _site(sch, key) if key else sch.index.realizes[node.name]
    sch.replace(top, seq(stage, top) if kind == "read" else seq(top, stage))
    allocate(sch, scope.name, new_buf)
    return sch.new_rv(BlockRV, name)


def retarget_accesses(block: Block, buf: Buffer, new_buf: Buffer, own: tuple[Expr, ...]) -> Block:
    """``block`` accessing ``new_buf[own]`` wherever it accessed ``buf`` (loads, stores, regions:
    what reindex and the reindexing caches do to the block they serve)."""

    def post(n: Any) -> Any:
        if isinstance(n, BufferLoad) and n.buffer is buf:
            return BufferLoad(new_buf, own)
        if isinstance(n, BufferStore) and n.buffer is buf:
            return BufferStore(new_buf, n.value, own)
        return n

    def regions(rs: tuple[BufferRegion, ...]) -> tuple[BufferRegion, ...]:
        return tuple(point_region(new_buf, own) if r.buffer is buf else r for r in rs)

    body = transform(block.body, post)
    init = None if block.init is None else transform(block.init, post)
    return block.with_(body=body, init=init, reads=regions(block.reads), writes=regions(block.writes))


__all__ = [
    "cache_read",
    "cache_write",
    "reindex",
    "nth_buffer",
    "buffer_of",
    "check_storage_scope",
    "scoped_name",
    "allocation_site",
    "allocate",
    "insert_into_body",
    "copy_stage",
    "point_region",
    "render_call",
]
