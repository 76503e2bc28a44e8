"""Access regions: which part of each buffer a block reads and writes.

A block declares its reads and writes as one :class:`BufferRegion` per buffer, in terms of its
iterator variables. :func:`infer_access_regions` computes them from the body: the accesses to a
buffer are united (``A[vi]`` and ``A[vi + 2]`` give ``A[vi : vi + 3]``), loops inside the body
are relaxed over their ranges, and an inner block contributes its own declared regions with its
iterators replaced by their bindings. :func:`block_access_regions` gives the regions of a block
seen from outside, relaxed over enclosing loops (what compute_at needs).
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence, cast

from .arith.analyzer import RangeLike, VarRanges, as_range
from .arith.relax import Relaxer, relax_range, union_range
from .arith.simplifier import Simplifier
from .buffer import Buffer
from .expr import BufferLoad, Expr, IntImm, Var
from .functor import pre_order, substitute
from .stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    Range,
    SeqStmt,
    Stmt,
)

Region = tuple  # tuple[Range, ...]


class _AccessCollector:
    """Walks a block body once, uniting the regions of each buffer as accesses are found."""

    def __init__(self, var_ranges: VarRanges, exclude: Sequence[Buffer]):
        # one session for the whole walk; loop ranges are added as loops are entered, before
        # any expression mentioning their variable is looked at
        self.ranges = {v: as_range(r) for v, r in (var_ranges or {}).items()}
        self.sim = Simplifier(self.ranges)
        self.dom: dict[Var, Range] = {}
        self.relaxer = Relaxer(self.sim, self.dom)
        self.exclude = set(exclude)
        self.reads: dict[Buffer, Region] = {}
        self.writes: dict[Buffer, Region] = {}

    def _add(self, table: dict, buffer: Buffer, region: Sequence[Range]) -> None:
        if buffer in self.exclude:
            return
        if self.dom:
            region = tuple(relax_range(self.relaxer, r, buffer.shape[d]) for d, r in enumerate(region))
        else:
            simplify = self.sim.simplify
            region = tuple(Range(simplify(r.min), simplify(r.extent)) for r in region)
        old = table.get(buffer)
        if old is None:
            table[buffer] = region
        elif not all(a.min is b.min and a.extent is b.extent for a, b in zip(old, region)):
            # (canonical expressions are shared within the session: equal means identical)
            table[buffer] = tuple(union_range(self.sim, a, b) for a, b in zip(old, region))

    def expr(self, e: Expr) -> None:
        for n in pre_order(e):
            if type(n) is BufferLoad:
                self._add(self.reads, n.buffer, _point(n.indices))

    def stmt(self, s: Stmt) -> None:
        t = type(s)
        # dispatch on the exact type; the casts only tell mypy what the test already proved
        if t is BufferStore:
            st = cast(BufferStore, s)
            self.expr(st.value)
            for i in st.indices:
                self.expr(i)
            self._add(self.writes, st.buffer, _point(st.indices))
        elif t is SeqStmt:
            for x in cast(SeqStmt, s).seq:
                self.stmt(x)
        elif t is For:
            loop = cast(For, s)
            self.expr(loop.min)
            self.expr(loop.extent)
            rng = Range(loop.min, loop.extent)
            if loop.loop_var in self.ranges:
                # a variable reused by a second loop: facts derived from its old range are stale
                self.sim = Simplifier(self.ranges)
            self.ranges[loop.loop_var] = rng
            self._set_dom(loop.loop_var, rng)
            self.stmt(loop.body)
            self._set_dom(loop.loop_var, None)
        elif t is IfThenElse:
            branch = cast(IfThenElse, s)
            self.expr(branch.condition)
            self.stmt(branch.then_case)
            if branch.else_case is not None:
                self.stmt(branch.else_case)
        elif t is Evaluate:
            self.expr(cast(Evaluate, s).value)
        elif t is BlockRealize:
            self._inner_block(cast(BlockRealize, s))
        elif t is Allocate:
            alloc = cast(Allocate, s)
            self.exclude.add(alloc.buffer)
            self.stmt(alloc.body)
        elif t is Block:
            blk = cast(Block, s)
            if blk.init is not None:
                self.stmt(blk.init)
            self.stmt(blk.body)
        else:
            raise TypeError(f"infer_access_regions: unexpected statement {t.__name__}")

    def _set_dom(self, var: Var, rng: Optional[Range]) -> None:
        if rng is None:
            del self.dom[var]
        else:
            self.dom[var] = rng
        self.relaxer = Relaxer(self.sim, self.dom)  # its memo is valid for one domain only

    def _inner_block(self, br: BlockRealize) -> None:
        for v in br.iter_values:
            self.expr(v)
        self.expr(br.predicate)
        block = br.block
        local = set(block.alloc_buffers)
        vmap = {iv.var: v for iv, v in zip(block.iter_vars, br.iter_values)}
        for table, regions in ((self.reads, block.reads), (self.writes, block.writes)):
            for r in regions:
                if r.buffer not in local:
                    self._add(table, r.buffer, _subst(r.region, vmap))


def _subst(region: Sequence[Range], vmap: Mapping[Var, Expr]) -> Region:
    return tuple(substitute(r, vmap) for r in region) if vmap else tuple(region)


def _point(indices: Sequence[Expr]) -> Region:
    return tuple(Range(i, IntImm(1, i.dtype)) for i in indices)


def infer_access_regions(
    body: Stmt,
    init: Optional[Stmt] = None,
    *,
    alloc_buffers: Sequence[Buffer] = (),
    var_ranges: VarRanges = None,
) -> tuple[tuple[BufferRegion, ...], tuple[BufferRegion, ...]]:
    """``(reads, writes)`` of a block body: one BufferRegion per buffer, in first-use order.

    A block with an ``init`` (a reduction) does not list the buffers it writes among its reads,
    as in TVM: ``C[i, j] += A[i, k] * B[k, j]`` reads ``A, B``, so read index 0 is A in traces
    and course material alike. Without an init (e.g. the update block after
    ``decompose_reduction``) a buffer both read and written appears in both. Buffers in
    ``alloc_buffers`` (the block's own) are left out. ``var_ranges`` (usually the block's
    iterators and their domains) lets unions of non-constant offsets simplify.
    """
    c = _AccessCollector(var_ranges, alloc_buffers)
    for s in (init, body):
        if s is not None:
            c.stmt(s)
    written = c.writes.keys() if init is not None else ()
    return (
        tuple(BufferRegion(b, r) for b, r in c.reads.items() if b not in written),
        tuple(BufferRegion(b, r) for b, r in c.writes.items()),
    )


def block_access_regions(
    block_realize: BlockRealize, dom_map: Mapping[Var, RangeLike], var_ranges: VarRanges = None
) -> tuple[tuple[BufferRegion, ...], tuple[BufferRegion, ...]]:
    """The declared ``(reads, writes)`` of a realized block, with its iterators replaced by their
    bindings and relaxed over the loop variables of ``dom_map``.

    With ``{ii: [0, 8)}`` and a block reading ``A[vi]`` where ``vi = io*8 + ii``, the read is
    ``A[io*8 : io*8 + 8]``: the part of A one iteration of ``io`` touches. A side that cannot be
    bounded is clamped to the buffer's extent.
    """
    dom = {v: as_range(r) for v, r in dom_map.items()}
    ranges = {v: as_range(r) for v, r in (var_ranges or {}).items()}
    ranges.update(dom)
    relaxer = Relaxer(Simplifier(ranges), dom)
    block = block_realize.block
    vmap = {iv.var: v for iv, v in zip(block.iter_vars, block_realize.iter_values)}

    def relaxed(regions: Sequence[BufferRegion]) -> tuple[BufferRegion, ...]:
        out = []
        for r in regions:
            region = _subst(r.region, vmap)
            out.append(
                BufferRegion(
                    r.buffer,
                    tuple(relax_range(relaxer, rng, r.buffer.shape[d]) for d, rng in enumerate(region)),
                )
            )
        return tuple(out)

    return relaxed(block.reads), relaxed(block.writes)


__all__ = ["infer_access_regions", "block_access_regions"]
