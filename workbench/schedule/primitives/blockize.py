"""``blockize`` and ``tensorize`` (TensorIR semantics).

``blockize(loop)`` turns the loop nest under ``loop`` into a block of its own: the one block
below is split into an *outer* block ``<name>_o``, iterating over the loops above ``loop``, and
the original block inside it, iterating over the loops from ``loop`` down. Each binding must
divide as ``outer * c + inner`` with ``inner`` in ``[0, c)`` depending only on the inner loops
(TVM's subspace division; what ``split`` produces), the pattern found on the affine normal form
of :mod:`workbench.ir.arith`.

``tensorize(block_or_loop, tensor_intrin)`` blockizes a loop if given one, checks that the
block's body computes exactly what the intrinsic's *description* computes (structurally, up to
names and to where each buffer tile sits), and replaces the body by the intrinsic's
*implementation*, its buffers bound to the matched tiles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Optional

from ...errors import ScheduleError
from ...ir.arith import Simplifier, union_regions
from ...ir.arith.linear import Lin
from ...ir.buffer import Buffer
from ...ir.expr import Add, BufferLoad, Expr, IntImm, Mul, Sub, Var, conjuncts, is_const
from ...ir.functor import free_vars, pre_order, replace_buffers, substitute, transform
from ...ir.region import infer_access_regions
from ...ir.stmt import SPATIAL, Block, BlockRealize, BufferRegion, BufferStore, For, IterVar, Range, Stmt
from ...ir.structural import structural_match
from ..instruction import schedule_primitive
from ..rv import BlockRV, LoopRV
from ..tensor_intrin import TensorIntrin
from .loops import loop_name
from .block_scope import buffer_names, fresh_name
from .reduction import conjoin_all

if TYPE_CHECKING:
    from ..schedule import Schedule

# ------------------------------------------------------------------------------------------
# subspace division


@dataclass(frozen=True)
class _Division:
    """A binding as ``outer * factor + inner``, ``outer`` in ``outer_dom``, ``inner`` in
    ``inner_dom``; ``outer`` depends on the loops above the blockized loop only, ``inner`` on
    the loops from it down only."""

    outer: Expr
    outer_dom: Range
    inner: Expr
    inner_dom: Range
    factor: int


def _divide(iv: IterVar, value: Expr, inner_vars: set, sim: Simplifier) -> Optional[_Division]:
    used = free_vars(value)
    zero, unit = IntImm(0, value.dtype), Range.from_extent(1)
    if not used & inner_vars:
        return _Division(value, iv.dom, zero, unit, 1)
    if not used - inner_vars:
        return _Division(zero, unit, value, iv.dom, 1)
    try:
        form = sim.lin(value)
    except TypeError:
        return None
    inner_terms, outer_terms = {}, {}
    for atom, coeff in form.terms.items():
        atom_vars = free_vars(atom)
        if atom_vars <= inner_vars:
            inner_terms[atom] = coeff
        elif not atom_vars & inner_vars:
            outer_terms[atom] = coeff
        else:
            return None  # one atom mixes both sides: (i_0 * 4 + i_1) // 3 and the like
    inner = Lin(inner_terms, 0, form.dtype)
    lo, hi = sim.bound_lin(inner)
    if lo != 0 or math.isinf(hi):
        return None
    factor = int(hi) + 1
    if form.const % factor or any(c % factor for c in outer_terms.values()):
        return None
    outer = Lin({a: c // factor for a, c in outer_terms.items()}, form.const // factor, form.dtype)
    olo, ohi = sim.bound_lin(outer)
    if olo < 0 or math.isinf(ohi):
        return None
    return _Division(
        sim.to_expr(outer),
        Range.from_extent(int(ohi) + 1),
        sim.to_expr(inner),
        Range.from_extent(factor),
        factor,
    )


def _loop_chain(primitive: str, argument: str, idx, top: For) -> tuple[list[For], BlockRealize]:
    """The loops from ``top`` down to the single block under it (a chain, nothing else)."""
    loops: list[For] = []
    node: Stmt = top
    while isinstance(node, For):
        loops.append(node)
        node = node.body
    if not isinstance(node, BlockRealize):
        n = len(idx.child_realizes(top))
        raise ScheduleError(
            primitive,
            f"the statements under {loop_name(top)} must be a chain of "
            f"loops ending in one block; found a {type(node).__name__} holding {n} "
            f"block(s)",
            argument=argument,
            nodes=[top],
        )
    return loops, node


def _simplify_all(node, vmap: Mapping[Var, Expr], sim: Simplifier):
    """``node`` with ``vmap`` substituted, buffer indices and regions simplified."""
    node = substitute(node, vmap)

    def post(n):
        if isinstance(n, BufferLoad):
            return BufferLoad(n.buffer, tuple(sim.simplify(i) for i in n.indices), n.dtype)
        if isinstance(n, BufferStore):
            return n.with_(indices=tuple(sim.simplify(i) for i in n.indices))
        if isinstance(n, BufferRegion):
            return BufferRegion(
                n.buffer, tuple(Range(sim.simplify(r.min), sim.simplify(r.extent)) for r in n.region)
            )
        return n

    return transform(node, post)


def blockize_realize(sch, primitive: str, argument: str, top: For, preserve_unit_iters: bool) -> BlockRealize:
    """The realize of the outer block that replaces ``top`` (see :func:`blockize`); errors name
    ``primitive`` and its ``argument``."""
    idx = sch.index
    loops, realize = _loop_chain(primitive, argument, idx, top)
    block = realize.block
    inner_vars = {l.loop_var for l in loops}
    ranges = idx.var_ranges(top)
    ranges.update({l.loop_var: Range(l.min, l.extent) for l in loops})
    sim = Simplifier(ranges)
    divisions = []
    for iv, value in zip(block.iter_vars, realize.iter_values):
        d = _divide(iv, value, inner_vars, sim)
        if d is None:
            raise ScheduleError(
                primitive,
                f"the binding {iv.var.name} = {value} of block "
                f"{block.name!r} is not divisible as outer * c + inner, with outer "
                f"over the loops above {loop_name(top)} and inner in [0, c) over "
                f"the loops from it down",
                argument=argument,
                nodes=[top, block],
            )
        divisions.append(d)
    outer_pred: list[Expr] = []
    inner_pred: list[Expr] = []
    for c in conjuncts(realize.predicate):
        used = free_vars(c)
        if used & inner_vars and used - inner_vars:
            raise ScheduleError(
                primitive,
                f"the predicate {c} of block {block.name!r} mixes loops "
                f"above {loop_name(top)} with loops below it",
                argument=argument,
                nodes=[top, block],
            )
        (inner_pred if used & inner_vars else outer_pred).append(c)

    outer_iters, outer_values, inner_iters, inner_values = [], [], [], []
    sub: dict[Var, Expr] = {}
    for iv, d in zip(block.iter_vars, divisions):
        v_o = Var(iv.var.name + "_o", iv.var.dtype)
        outer_iters.append(IterVar(v_o, d.outer_dom, iv.iter_type))
        outer_values.append(d.outer)
        unit_outer = is_const(d.outer_dom.extent, 1) and not preserve_unit_iters
        outer_term = d.outer_dom.min if unit_outer else v_o
        if is_const(d.inner_dom.extent, 1):
            inner_term = d.inner_dom.min
        else:
            inner_term = Var(iv.var.name + "_i", iv.var.dtype)
            inner_iters.append(IterVar(inner_term, d.inner_dom, iv.iter_type))
            inner_values.append(d.inner)
        sub[iv.var] = Add.make(Mul.make(outer_term, d.factor), inner_term)
    iter_sim = Simplifier({it.var: it.dom for it in outer_iters + inner_iters})
    sub = {v: iter_sim.simplify(e) for v, e in sub.items()}

    inner_block = block.with_(
        iter_vars=tuple(inner_iters),
        reads=tuple(_simplify_all(r, sub, iter_sim) for r in block.reads),
        writes=tuple(_simplify_all(r, sub, iter_sim) for r in block.writes),
        body=_simplify_all(block.body, sub, iter_sim),
        init=None,
    )
    body: Stmt = BlockRealize(tuple(inner_values), conjoin_all(inner_pred), inner_block)
    for l in reversed(loops):
        body = l.with_(body=body)
    init = None
    if block.init is not None:
        init = _outer_init(
            _simplify_all(block.init, sub, iter_sim),
            inner_iters,
            inner_values,
            inner_pred,
            loops,
            fresh_name(block.name + "_init", idx.realizes),
            {it.var: it.dom for it in outer_iters},
        )
    reads, writes = infer_access_regions(
        body,
        init,
        alloc_buffers=(),
        var_ranges={**idx.var_ranges(top), **{it.var: it.dom for it in outer_iters}},
    )
    outer = Block(fresh_name(block.name + "_o", idx.realizes), tuple(outer_iters), reads, writes, body, init)
    return BlockRealize(tuple(outer_values), conjoin_all(outer_pred), outer)


def _outer_init(init: Stmt, inner_iters, inner_values, inner_pred, loops, name, outer_ranges):
    """The init of the outer block: the original init in a block ``<name>_init`` over the inner
    spatial iterators it uses, under copies of the inner loops feeding them."""
    iters, values, imap = [], [], {}
    used = free_vars(init)
    for it, value in zip(inner_iters, inner_values):
        if it.iter_type == SPATIAL and it.var in used:
            imap[it.var] = Var(it.var.name + "_init", it.var.dtype)
            iters.append(IterVar(imap[it.var], it.dom, SPATIAL))
            values.append(value)
    body = substitute(init, imap)
    reads, writes = infer_access_regions(
        body, None, var_ranges={**outer_ranges, **{it.var: it.dom for it in iters}}
    )
    copied = [l for l in loops if any(l.loop_var in free_vars(v) for v in values)]
    fresh = {l.loop_var: Var(l.loop_var.name, l.loop_var.dtype) for l in copied}
    # guards on loops the init does not run over cannot apply to it
    pred = [substitute(c, fresh) for c in inner_pred if free_vars(c) <= set(fresh)]
    stmt: Stmt = BlockRealize(
        tuple(substitute(v, fresh) for v in values),
        conjoin_all(pred),
        Block(name, tuple(iters), reads, writes, body),
    )
    for l in reversed(copied):
        stmt = l.with_(loop_var=fresh[l.loop_var], body=stmt)
    return stmt


@schedule_primitive("blockize", tvm_inputs=("loop",), tvm_attrs=("preserve_unit_iters",))
def blockize(sch: Schedule, loop: LoopRV, preserve_unit_iters: bool = True) -> BlockRV:
    """Make the loop nest under ``loop`` (a chain of loops over one block) a block of its own.

    The new outer block ``<name>_o`` has one iterator ``v_o`` per iterator ``v`` of the block,
    bound to the part of its binding over the loops above ``loop``; the block keeps, as ``v_i``,
    the parts over the loops from ``loop`` down (a part of extent 1 is dropped) and its body uses
    ``v_o * c + v_i``. A reduction's init moves to the outer block (as a block ``<name>_init``
    over the inner spatial iterators), so it still runs once per output element. With
    ``preserve_unit_iters=False`` an outer part of extent 1 is replaced by its constant.

    Before / after ``blockize(i1)`` with ``vi = i0 * 16 + i1``::

        for i0, i1:                            for i0:
          block B: vi = S(i0*16 + i1)            block B_o: vi_o = S(i0)
            B[vi] = A[vi] * 2                      for i1:
                                                     block B: vi_i = S(i1)
                                                       B[vi_o*16 + vi_i] = A[vi_o*16 + vi_i] * 2
    """
    top = sch.get(loop)
    realize = blockize_realize(sch, "blockize", "loop", top, preserve_unit_iters)
    sch.replace(top, realize)
    return sch.new_rv(BlockRV, realize.block.name)


# ------------------------------------------------------------------------------------------
# tensorize: matching a block body against a description


@dataclass(frozen=True)
class _Tile:
    """Where a buffer's tile sits: ``base`` (one min per dimension) and the dimensions of extent
    other than 1 (``kept``); ``view`` is the tile as a buffer of its own, for comparison."""

    buffer: Buffer
    base: tuple
    kept: tuple
    view: Buffer


def _relative(primitive: str, body: Stmt, ranges: Mapping, what: str) -> tuple[Stmt, dict]:
    """``body`` rewritten against tiles: every buffer access ``X[idx]`` becomes ``view[idx -
    base]`` over the dimensions where the body's region of ``X`` is wider than one element; the
    declared regions of nested blocks are dropped (they follow from the statements). Two bodies
    computing the same thing on tiles at different places then compare structurally equal."""
    reads, writes = infer_access_regions(body, None, var_ranges=ranges)
    regions: dict[Buffer, tuple] = {}
    for r in writes + reads:
        old = regions.get(r.buffer)
        regions[r.buffer] = r.region if old is None else union_regions(old, r.region, ranges)
    tiles = {}
    for buf, region in regions.items():
        kept = tuple(d for d, rng in enumerate(region) if not is_const(rng.extent, 1))
        bad = [str(region[d].extent) for d in kept if not isinstance(region[d].extent, IntImm)]
        if bad:
            raise ScheduleError(
                primitive,
                f"{what}: the tile of {buf.name} has non-constant extent(s) {bad}",
                argument="block_or_loop",
            )
        view = Buffer(buf.name, tuple(region[d].extent.value for d in kept), buf.dtype, buf.scope)
        tiles[buf] = _Tile(buf, tuple(r.min for r in region), kept, view)
    sim = Simplifier(dict(ranges))

    def access(buf: Buffer, indices):
        t = tiles[buf]
        return t.view, tuple(sim.simplify(Sub.make(indices[d], t.base[d])) for d in t.kept)

    def pre(n):
        return n if isinstance(n, BufferRegion) else None

    def post(n):
        if isinstance(n, BufferLoad) and n.buffer in tiles:
            view, idx = access(n.buffer, n.indices)
            return BufferLoad(view, idx, n.dtype)
        if isinstance(n, BufferStore) and n.buffer in tiles:
            view, idx = access(n.buffer, n.indices)
            return BufferStore(view, n.value, idx)
        if isinstance(n, Block):
            return n.with_(reads=(), writes=())
        return n

    return transform(body, post, pre), tiles


def _match(block: Block, ranges: Mapping, intrin: TensorIntrin) -> dict[Buffer, tuple[_Tile, _Tile]]:
    """desc parameter -> (its tile in ``block``, its tile in the description), or raise."""
    where = f"block {block.name!r}"
    ours, our_tiles = _relative("tensorize", block.body, ranges, where)
    desc = intrin.desc
    theirs, their_tiles = _relative("tensorize", desc.root.body, {}, f"intrinsic {intrin.name!r}")
    m = structural_match(ours, theirs, block_names=False, buffer_names=False)
    if not m:
        raise ScheduleError(
            "tensorize",
            f"{where} does not match the description of tensor "
            f"intrinsic {intrin.name!r}; first mismatch at {m.mismatch}\n"
            f"--- block body:\n{block.body}\n--- description:\n{desc.root.body}",
            argument="block_or_loop",
            nodes=[block],
        )
    by_view = {t.view: t for t in our_tiles.values()}
    out = {}
    for ours_view, theirs_view in m.buffers.items():
        param = next(p for p, t in their_tiles.items() if t.view is theirs_view)
        out[param] = (by_view[ours_view], their_tiles[param])
    return out


def _bind_impl(
    intrin: TensorIntrin, tiles: dict, taken_blocks: set, taken_buffers: set, sim: Simplifier
) -> tuple[Stmt, tuple]:
    """The implementation's body with every parameter access moved onto the matched tile; its
    own buffers, blocks and variables are copied or renamed so it can be inserted many times."""
    impl = intrin.impl
    param_of = dict(zip(impl.params, intrin.desc.params))

    def moved(buf: Buffer, index: Expr, d_theirs: int, d_ours: int) -> Expr:
        ours, theirs = tiles[param_of[buf]]
        return sim.simplify(Add.make(ours.base[d_ours], Sub.make(index, theirs.base[d_theirs])))

    def indices(buf: Buffer, idx) -> tuple[Buffer, tuple]:
        ours, theirs = tiles[param_of[buf]]
        full = list(ours.base)
        for d_ours, d_theirs in zip(ours.kept, theirs.kept):
            full[d_ours] = moved(buf, idx[d_theirs], d_theirs, d_ours)
        return ours.buffer, tuple(full)

    def post(n):
        if isinstance(n, BufferLoad) and n.buffer in param_of:
            return BufferLoad(*indices(n.buffer, n.indices), n.dtype)
        if isinstance(n, BufferStore) and n.buffer in param_of:
            buf, idx = indices(n.buffer, n.indices)
            return BufferStore(buf, n.value, idx)
        if isinstance(n, BufferRegion) and n.buffer in param_of:
            ours, theirs = tiles[param_of[n.buffer]]
            region = [Range(b, IntImm(1, b.dtype)) for b in ours.base]
            for d_ours, d_theirs in zip(ours.kept, theirs.kept):
                r = n.region[d_theirs]
                region[d_ours] = Range(moved(n.buffer, r.min, d_theirs, d_ours), r.extent)
            return BufferRegion(ours.buffer, tuple(region))
        if isinstance(n, Block):
            name = fresh_name(n.name, taken_blocks)
            taken_blocks.add(name)
            return n.with_(name=name)
        return n

    local = {}
    for b in impl.root.alloc_buffers:
        local[b] = b.with_(name=fresh_name(b.name, taken_buffers))
        taken_buffers.add(local[b].name)
    body = replace_buffers(impl.root.body, local)
    bound = {n.loop_var for n in pre_order(body) if isinstance(n, For)}
    bound |= {n.var for n in pre_order(body) if isinstance(n, IterVar)}
    body = substitute(body, {v: Var(v.name, v.dtype) for v in bound})
    return transform(body, post), tuple(local.values())


@schedule_primitive("tensorize")
def tensorize(
    sch: Schedule, block_or_loop: BlockRV | LoopRV, tensor_intrin: str, preserve_unit_iters: bool = True
) -> None:
    """Replace the computation of a block by a registered tensor intrinsic.

    Given a loop, the loop is blockized first (see :func:`blockize`). The block's body must match
    the intrinsic's description structurally: same loop nest (extents, kinds), same inner block
    (iterator types and domains, predicate), same statements, up to the names of variables,
    blocks and buffers and to where each buffer tile sits. The body is then replaced by the
    implementation, whose parameters are bound to the matched tiles (their offsets added to
    every access); the block keeps its iterators, regions and init.

    Before / after ``tensorize(i1, "avx512_f32_gemm_4x16x4")`` (after splitting i, j, k by 4,
    16, 4)::

        for i0, j0, k0, i1, j1, k1:            for i0, j0, k0:
          block C: ...                           block C_o: vi_o, vj_o, vk_o
            C[vi, vj] += A[vi, vk] * B[vk, vj]     <the intrinsic's vectorized loops on
                                                    C[vi_o*4 : +4, vj_o*16 : +16], ...>
    """
    intrin = TensorIntrin.get(tensor_intrin, primitive="tensorize")
    node = sch.get(block_or_loop)
    idx = sch.index
    if isinstance(node, For):
        realize = blockize_realize(sch, "tensorize", "block_or_loop", node, preserve_unit_iters)
        old = node
        taken = set(idx.realizes) | {realize.block.name}
        for r in pre_order(realize.block):
            if isinstance(r, Block):
                taken.add(r.name)
        ranges = idx.var_ranges(node)
    else:
        if idx.scope(node) is None:
            raise ScheduleError(
                "tensorize", "cannot tensorize the root block", argument="block_or_loop", nodes=[node]
            )
        realize = old = idx.realizes[node.name]
        taken = set(idx.realizes)
        ranges = idx.var_ranges(realize)
    block = realize.block
    ranges.update({iv.var: iv.dom for iv in block.iter_vars})
    tiles = _match(block, ranges, intrin)
    body, allocs = _bind_impl(intrin, tiles, taken, buffer_names(sch.func), Simplifier(ranges))
    annotations = {**intrin.impl.root.annotations, **block.annotations}
    new = block.with_(body=body, alloc_buffers=block.alloc_buffers + allocs, annotations=annotations)
    sch.replace(old, realize.with_(block=new))
