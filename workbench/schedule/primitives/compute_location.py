"""Compute location: ``compute_at``, ``reverse_compute_at``, ``sample_compute_location``.

``compute_at`` moves a producer block under a loop of its consumers and regenerates the loops
above it so that each iteration of that loop computes exactly the part of the producer's output
the consumers under the loop read in that iteration (region inference). ``reverse_compute_at``
is the mirror image: a consumer moves under a loop of its producers and, per iteration, consumes
what they have just produced.

Region inference, per moved block:

1. *required*: the regions of the moved block's buffers that the blocks on the other side
   (consumers for compute_at, producers for reverse_compute_at) access, with their iterators
   replaced by their bindings and relaxed over the loops between ``loop`` and them
   (:func:`workbench.ir.region.block_access_regions`), united per buffer;
2. *provided*: the instances of the moved block whose accesses to those buffers meet the
   required region, bounded per iterator as TVM does (``CalculateBlockVarDomain``): each index
   that is one iterator through ``+ c``, ``* c``, ``// c`` and ``% c`` is solved backwards
   (``B[vi // 4]`` needed over ``[lo, hi]`` gives ``vi`` in ``[lo * 4, hi * 4 + 3]``; ``9 - vi``,
   ``vio * 16`` likewise; ``% c`` bounds nothing); indices mixing iterators that are together an
   affine bijection of them (``(v1*8 + v4) // 16, (v1*8 + v4) % 16``: splits and fuses, TVM's
   ``DetectIterMap``) are inverted and the inverse relaxed over the required box. The bounds of
   one access are intersected over its dimensions and united over the accesses; anything else
   is refused (``vh * 2 + vrh``);
3. each iterator gets a new loop over that range, intersected with the iterator's domain. The
   extent must be a constant: a range whose extent varies gets its largest extent and a
   predicate, and so does a range that may stick out of the domain (the last tile of an
   imperfect split). Iterators nothing constrains (a reduction's reduce iterators, or every
   iterator of a block reading nothing produced under the loop) keep their whole domain.

A reduction block's new reduce loops thus sum over the box of its reduce domains, which is its
original reduction only if its loops visited each point of that box exactly once: tied
iterators (``vi = o // 8`` beside ``vo = o``) are refused (:mod:`.reduce_space`; TVM requires
affine bindings of reduction blocks). Spatial iterators need no such care: recomputing an
element is only redundant.
"""

from __future__ import annotations

import keyword

from typing import TYPE_CHECKING, Callable, Optional

from ...errors import ScheduleError
from ...ir.arith import Analyzer
from ...ir.buffer import Buffer
from ...ir.expr import (
    BufferLoad,
    Expr,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Not,
    Select,
    Var,
    as_int,
    convert,
    is_const,
)
from ...ir.func import PrimFunc
from ...ir.index_map import IndexMap
from ...ir.functor import children, free_vars
from ...ir.structural import structural_equal
from ...ir.region import block_access_regions
from ...ir.stmt import (
    REDUCE,
    SPATIAL,
    TRUE,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    IterVar,
    Range,
    SeqStmt,
    Stmt,
    make_for,
    seq,
)
from ..instruction import schedule_primitive
from ..rewrite import conjoin
from ..rv import INLINE_MARK, LOCATION_PRIMITIVES, ROOT_MARK, BlockRV, LoopRV
from ...ir.index import FuncIndex, index, replace_all
from .block_scope import (
    buffers,
    check_complete_or_reduction,
    check_in_scope,
    check_not_output,
    consumers,
    producers,
    removal_root,
)
from .inline import _invert, compute_inline_func, reverse_compute_inline_func
from .loops import loop_name
from .reduce_space import reduce_space_problem

if TYPE_CHECKING:
    from ..schedule import Schedule

Region = tuple  # tuple[Range, ...]


def _subtrees(loop: For) -> tuple[Stmt, ...]:
    return loop.body.seq if isinstance(loop.body, SeqStmt) else (loop.body,)


def _check_placement(primitive: str, idx: FuncIndex, block: Block, loop: For) -> None:
    check_in_scope(primitive, idx, block)
    scope = idx.scope(block)
    if idx.scope(loop) is not scope:
        raise ScheduleError(
            primitive,
            f"{loop_name(loop)} is not in the block scope of block "
            f"{block.name!r} (scope {scope.name if scope else 'root'!r})",
            argument="loop",
            nodes=[loop, block],
        )
    if loop in idx.ancestors(idx.realizes[block.name]):
        raise ScheduleError(
            primitive,
            f"{loop_name(loop)} encloses block {block.name!r}: the "
            f"target loop must not be one of the block's own loops",
            argument="loop",
            nodes=[loop, block],
        )


def _check_outside(
    primitive: str,
    idx: FuncIndex,
    block: Block,
    loop: For,
    prods: list[Block],
    prods_under: set[str],
    cons: list[Block],
    cons_under: set[str],
) -> None:
    """Producers outside the loop must precede it and consumers follow it, or the moved block
    would run before its inputs exist or after its output is read."""
    at = idx.order[loop]
    for deps, under, role, must_precede in (
        (prods, prods_under, "producer", True),
        (cons, cons_under, "consumer", False),
    ):
        for dep in deps:
            precedes = idx.order[idx.realizes[dep.name]] < at
            if dep.name in under or precedes == must_precede:
                continue
            side, move = ("after", "before") if must_precede else ("before", "after")
            raise ScheduleError(
                primitive,
                f"block {dep.name!r}, a {role} of block "
                f"{block.name!r}, comes {side} {loop_name(loop)}: the block would "
                f"move {move} its {role}",
                argument="loop",
                nodes=[loop, block, dep],
            )


def _insertion_point(
    primitive: str,
    idx: FuncIndex,
    block: Block,
    loop: For,
    prods: list[Block],
    cons: list[Block],
    forward: bool,
    index_: int,
) -> int:
    """Where the moved nest goes among the loop body's statements: after every producer of the
    block under the loop, before every consumer (TVM's ``index``: -1 the last such position,
    -2 the first, else the position itself)."""
    prod_names, cons_names = {b.name for b in prods}, {b.name for b in cons}
    seen_prod: set[str] = set()
    seen_cons: set[str] = set()
    subtrees = _subtrees(loop)
    last_prod, first_cons = -1, len(subtrees)
    for k, sub in enumerate(subtrees):
        names = {r.block.name for r in idx.realizes_under(sub)}
        if isinstance(sub, BlockRealize):
            names.add(sub.block.name)
        if names & prod_names:
            last_prod = k
            seen_prod |= names & prod_names
        if names & cons_names:
            first_cons = min(first_cons, k)
            seen_cons |= names & cons_names
    role, needed, seen = ("consumers", cons, seen_cons) if forward else ("producers", prods, seen_prod)
    missing = [b.name for b in needed if b.name not in seen]
    if missing:
        raise ScheduleError(
            primitive,
            f"the {role} {missing} of block {block.name!r} are not "
            f"under {loop_name(loop)}; {primitive} needs all of its {role} "
            f"under the target loop",
            argument="loop",
            nodes=[loop, block],
        )
    _check_outside(primitive, idx, block, loop, prods, seen_prod, cons, seen_cons)
    if last_prod >= first_cons:
        raise ScheduleError(
            primitive,
            f"no place under {loop_name(loop)} comes after every "
            f"producer and before every consumer of block {block.name!r}: a "
            f"producer is in statement {last_prod} of the loop body, a consumer "
            f"in statement {first_cons}",
            argument="loop",
            nodes=[loop, block],
        )
    if index_ == -1:
        return first_cons
    if index_ == -2:
        return last_prod + 1
    if isinstance(index_, int) and not isinstance(index_, bool) and last_prod < index_ <= first_cons:
        return index_
    raise ScheduleError(
        primitive,
        f"index {index_!r} is not a valid insertion point under "
        f"{loop_name(loop)}: expected -1, -2 or one of "
        f"{list(range(last_prod + 1, first_cons + 1))}",
        argument="index",
    )


def _required_regions(
    idx: FuncIndex, loop: For, blocks: list[Block], wanted: set[Buffer], reads: bool, ana: Analyzer
) -> dict[Buffer, Region]:
    """Per buffer of ``wanted``: the union of what ``blocks`` (all under ``loop``) read (or
    write) of it during one iteration of ``loop``."""
    out: dict[Buffer, Region] = {}
    for block in blocks:
        realize = idx.realizes[block.name]
        chain = idx.loops_above(realize)
        below = chain[chain.index(loop) + 1 :]
        dom = {l.loop_var: Range(l.min, l.extent) for l in below}
        accessed = []
        for scope in sorted({b.scope for b in wanted}):
            # as TVM: a buffer the threads of a thread-bound loop above ``loop`` share (shared
            # memory under threadIdx, global under any) serves all of them, so its region is
            # what all of them need (each then fetches a part of it, cooperatively)
            dom_s = dict(dom)
            dom_s.update(
                (l.loop_var, Range(l.min, l.extent))
                for l in chain[: chain.index(loop) + 1]
                if l.kind == ForKind.THREAD_BINDING and _threads_share(scope, l.thread_tag)
            )
            regions = block_access_regions(realize, dom_s, idx.var_ranges(realize))
            accessed += [r for r in regions[0 if reads else 1] if r.buffer.scope == scope]
        for region in accessed:
            if region.buffer not in wanted:
                continue
            old = out.get(region.buffer)
            out[region.buffer] = region.region if old is None else ana.union_regions(old, region.region)
    return out


def _threads_share(scope: str, tag: Optional[str]) -> bool:
    """Whether the threads of a loop bound to ``tag`` see one buffer of ``scope``."""
    if scope.startswith("shared"):
        return not (tag or "").startswith("blockIdx")
    return scope == "global"


#: the preimage of a dimension says nothing about the iterator (``v % 4``: every value of
#: ``v`` lands in any range of residues the consumers need)
FREE = "free"


def _chain(e: Expr, ivars: set[Var], sim) -> Optional[list]:
    """``e`` as a chain ``a*x + b`` (``b`` free of iterators), ``x`` an iterator or ``g // c``
    or ``g % c`` of such a chain: ``[(a, b, x), ...]`` outermost first, ending at the iterator;
    None if ``e`` mixes several iterators (``v*8 + w``) or any other operation."""
    out: list = []
    while True:
        lin = sim.lin(e)
        moving = [(x, c) for x, c in lin.terms.items() if free_vars(x) & ivars]
        if len(moving) != 1:
            return None
        x, a = moving[0]
        b = sim.simplify(e - IntImm(a, e.dtype) * x)
        out.append((a, b, x))
        if isinstance(x, Var):
            return out if x in ivars else None
        if not (isinstance(x, (FloorDiv, FloorMod)) and isinstance(x.b, IntImm) and x.b.value > 0):
            return None
        e = x.a


def _preimage(e: Expr, lo: Expr, hi: Expr, ivars: set[Var], ana: Analyzer):
    """``(v, vlo, vhi)``: inclusive bounds of the iterator ``v`` holding every value for which
    ``e`` falls in ``[lo, hi]`` (so instances in these bounds produce the whole range), ``(v,
    FREE)`` when ``e`` does not bound ``v`` (a ``%``), or None (several iterators). As TVM's
    SolveBlockVarDomain, through ``+ c``, ``* c`` (either sign), ``// c`` and ``% c``."""
    sim = ana.session()
    chain = _chain(sim.simplify(e), ivars, sim)
    if chain is None:
        return None
    for a, b, x in chain:
        if a > 0:  # a*x + b in [lo, hi]  <=>  x in [ceil((lo - b) / a), floor((hi - b) / a)]
            lo, hi = (lo - b + (a - 1)) // a, (hi - b) // a
        else:
            lo, hi = (b - hi + (-a - 1)) // -a, (b - lo) // -a
        if isinstance(x, FloorMod):
            return chain[-1][2], FREE
        if isinstance(x, FloorDiv):  # g // c in [lo, hi]  <=>  g in [lo * c, hi * c + c - 1]
            c = as_int(x.b)
            lo, hi = lo * c, hi * c + (c - 1)
    return chain[-1][2], ana.simplify(lo), ana.simplify(hi)


def _joint_preimage(
    dims: list[tuple[Expr, Expr, Expr]], block: Block, ana: Analyzer
) -> Optional[dict[Var, tuple[Expr, Expr]]]:
    """Bounds of the iterators of the dimensions ``(index, lo, hi)`` that mix several of them
    (``(v1*8 + v4) // 16, (v1*8 + v4) % 16``): the indices, an affine bijection of these
    iterators (splits and fuses, TVM's DetectIterMap), are inverted and the inverse relaxed
    over the required box. The inverse gives back every instance from the index it writes, so
    the relaxed range holds each instance whose index is in the box."""
    used = sorted({v for e, _, _ in dims for v in free_vars(e)}, key=lambda v: v.name)
    doms = {iv.var: iv.dom for iv in block.iter_vars}
    if not used or any(v not in doms for v in used):
        return None
    if not all(is_const(doms[v].min, 0) and isinstance(doms[v].extent, IntImm) for v in used):
        return None
    try:
        imap = IndexMap(tuple(used), tuple(e for e, _, _ in dims))
    except ValueError:
        return None
    inverse = _invert(imap, [as_int(doms[v].extent) for v in used])
    if inverse is None:
        return None
    box = {p: Range(lo, ana.simplify(hi - lo + 1)) for p, (_, lo, hi) in zip(inverse.params, dims)}
    out = {}
    for v, h in zip(used, inverse.results):
        vlo, vhi = ana.relax(h, box)
        if vlo is None or vhi is None:
            return None
        out[v] = (ana.simplify(vlo), ana.simplify(vhi))
    return out


def _tighter(ana: Analyzer, a: Expr, b: Expr, holds, both) -> Expr:
    """Of two bounds, the one that provably ``holds`` against the other, else ``both(a, b)``."""
    return a if ana.can_prove(holds(a, b)) else b if ana.can_prove(holds(b, a)) else both(a, b)


def _access_bounds(
    block: Block, indices: tuple[Range, ...], need: Region, ana: Analyzer
) -> Optional[dict[Var, tuple[Expr, Expr]]]:
    """Per iterator of ``block``, inclusive bounds holding every instance whose access
    ``indices`` (ranges in the iterators) meets the region ``need``; iterators the access does
    not bound are left out. None if some dimension cannot be solved."""
    ivars = {iv.var for iv in block.iter_vars}
    bounds: dict[Var, tuple[Expr, Expr]] = {}
    mixed: list[tuple[Expr, Expr, Expr]] = []

    def meet(v: Var, lo: Expr, hi: Expr) -> None:
        old = bounds.get(v)
        if old is not None:  # both dimensions hold: the intersection
            lo = _tighter(ana, old[0], lo, lambda a, b: a >= b, Max)
            hi = _tighter(ana, old[1], hi, lambda a, b: a <= b, Min)
        bounds[v] = (ana.simplify(lo), ana.simplify(hi))

    points: list[tuple[Expr, Expr, Expr]] = []
    for have, want in zip(indices, need):
        at = ana.simplify(have.min)
        if not free_vars(at) & ivars:
            continue  # a constant index: every instance touches the same place
        ext = ana.simplify(have.extent)
        if free_vars(ext) & ivars:
            return None
        # an access [at, at + ext) meets [lo, hi] when at is in [lo - ext + 1, hi]
        lo, hi = ana.simplify(want.min - ext + 1), ana.simplify(want.min + want.extent - 1)
        if is_const(ext, 1):
            points.append((at, lo, hi))
        solved = _preimage(at, lo, hi, ivars, ana)
        if solved is None:
            if not is_const(ext, 1):
                return None
            mixed.append((at, lo, hi))
        elif solved[1] is not FREE:
            meet(*solved)
    if mixed:
        # the simplifier may have split a fused index over several dimensions (``(v1*8 + v4)
        # // 16`` is ``v1 // 2``): invert together every dimension sharing an iterator
        group = {v for e, _, _ in mixed for v in free_vars(e)}
        while True:
            dims = [d for d in points if free_vars(d[0]) & group]
            grown = group | {v for e, _, _ in dims for v in free_vars(e)}
            if grown == group:
                break
            group = grown
        joint = _joint_preimage(dims, block, ana)
        if joint is None:
            return None
        for v, (lo, hi) in joint.items():
            meet(v, lo, hi)
    return bounds


def _iter_requirements(
    primitive: str,
    block: Block,
    provided: tuple[BufferRegion, ...],
    required: dict[Buffer, Region],
    ana: Analyzer,
) -> dict[Var, Range]:
    """The range each iterator of ``block`` must cover so that its accesses ``provided``
    cover ``required`` (TVM's CalculateBlockVarDomain): per access, the instances meeting the
    required region (the iterators' bounds of all dimensions intersected), united over the
    accesses; iterators left out are unconstrained."""
    out: dict[Var, Range] = {}
    for region in provided:
        need = required.get(region.buffer)
        if need is None:
            continue
        bounds = _access_bounds(block, region.region, need, ana)
        if bounds is None:
            at = ", ".join(str(ana.simplify(r.min)) for r in region.region)
            raise ScheduleError(
                primitive,
                f"cannot infer the iteration range of block {block.name!r}: it accesses "
                f"{region.buffer.name}[{at}], which is not an iterator through + - * // % by "
                f"constants in each dimension nor an affine bijection of its iterators (splits "
                f"and fuses), so the instances that access a given region cannot be solved",
                argument="block",
                nodes=[block],
            )
        for var, (lo, hi) in bounds.items():
            rng = Range(lo, ana.simplify(hi - lo + 1))
            out[var] = rng if var not in out else ana.union_regions((out[var],), (rng,))[0]
    return out


def guarded_accesses(node) -> list[tuple[BufferLoad | BufferStore, tuple[Expr, ...]]]:
    """Every BufferLoad and BufferStore under ``node`` with the conditions that guard it: the
    branches of ``Select`` (``if_then_else``) and ``IfThenElse`` it sits in, and the predicates
    of nested block realizes. An access with no condition runs for every instance."""
    out: list[tuple[BufferLoad | BufferStore, tuple[Expr, ...]]] = []

    def walk(n, conds: tuple[Expr, ...]) -> None:
        if isinstance(n, Select):
            walk(n.condition, conds)
            walk(n.true_value, conds + (n.condition,))
            walk(n.false_value, conds + (Not(n.condition),))
            return
        if isinstance(n, IfThenElse):
            walk(n.condition, conds)
            walk(n.then_case, conds + (n.condition,))
            if n.else_case is not None:
                walk(n.else_case, conds + (Not(n.condition),))
            return
        if isinstance(n, BlockRealize) and not is_const(n.predicate, 1):
            conds = conds + (n.predicate,)
        if isinstance(n, (BufferLoad, BufferStore)):
            out.append((n, conds))
        for c in children(n):
            walk(c, conds)

    walk(node, ())
    return out


def _check_covered(
    primitive: str,
    idx: FuncIndex,
    block: Block,
    loop: For,
    prods: list[Block],
    needs: dict[Var, Range],
    ana: Analyzer,
) -> None:
    """reverse_compute_at places each instance of ``block`` by what the producers under ``loop``
    write per iteration, so an instance runs only if what it reads is written in some
    iteration. Refuse unless that holds for every instance: some read the block performs
    unconditionally must fix every iterator whose range is not always whole, and must stay
    inside what the producers write. A padding stage fails this (its border instances read
    nothing, the read being under ``if_then_else``): TVM accepts it and never writes the
    border."""
    doms = {iv.var: iv.dom for iv in block.iter_vars}
    partial = {
        v
        for v, need in needs.items()
        if not (
            ana.can_prove(need.min <= doms[v].min)
            and ana.can_prove(need.min + need.extent >= doms[v].min + doms[v].extent)
        )
    }
    if not partial:
        return
    written: dict[Buffer, Region] = {}
    for prod in prods:
        realize = idx.realizes[prod.name]
        dom = {l.loop_var: Range(l.min, l.extent) for l in idx.loops_above(realize)}
        for region in block_access_regions(realize, dom, idx.var_ranges(realize))[1]:
            old = written.get(region.buffer)
            written[region.buffer] = region.region if old is None else ana.union_regions(old, region.region)
    reasons = []
    for access, conds in guarded_accesses(block.body):
        if not isinstance(access, BufferLoad) or access.buffer not in written:
            continue
        if conds:
            reasons.append(f"it reads {access.buffer.name} only where {' and '.join(map(str, conds))}")
            continue
        point = tuple(Range(ana.simplify(e), IntImm(1)) for e in access.indices)
        bounds = _access_bounds(block, point, written[access.buffer], ana)
        if bounds is None:
            reasons.append(f"its read of {access.buffer.name} cannot be solved for its iterators")
            continue
        # every instance whose read lies in what some iteration writes runs in that iteration
        if not partial <= set(bounds):
            names = sorted(v.name for v in partial - set(bounds))
            reasons.append(f"its read of {access.buffer.name} does not fix {names}")
        elif not ana.region_covers(written[access.buffer], ana.relax_region(point, doms)):
            reasons.append(f"it reads {access.buffer.name} outside what the producers write")
        else:
            return
    raise ScheduleError(
        primitive,
        f"block {block.name!r} would not cover its whole iteration domain under "
        f"{loop_name(loop)}: each iteration runs only the instances whose reads that iteration "
        f"produces, and {'; '.join(reasons) or 'none of its reads fixes its iterators'}, so the "
        f"instances that read nothing produced there (a padding border) would never run",
        argument="loop",
        nodes=[loop, block],
    )


def _loop_plan(
    primitive: str, block: Block, iv: IterVar, need: Optional[Range], ana: Analyzer, forward: bool
) -> tuple[Expr, Expr | int, list]:
    """(start, constant extent, conditions on the iterator's value) for one iterator.

    Conditions are functions of the value, because the value is only known once the loop
    variable exists."""
    try:
        d0 = as_int(iv.dom.min)
    except TypeError:
        raise ScheduleError(
            primitive,
            f"block {block.name!r}: iterator {iv.var.name!r} has a non-constant domain {iv.dom}",
            argument="block",
            nodes=[block],
        ) from None
    if not isinstance(iv.dom.extent, IntImm):
        return _symbolic_loop_plan(primitive, block, iv, need, ana, forward)
    dn = as_int(iv.dom.extent)
    if need is None:
        return iv.dom.min, dn, []
    lo, ext = ana.simplify(need.min), ana.simplify(need.extent)
    lo_lo, lo_hi = ana.const_int_bound(lo)
    if lo_lo is not None and lo_lo == lo_hi:  # a start over unit loops only (``i0`` of range(1))
        lo = IntImm(lo_lo, lo.dtype)
    ext_hi = ana.const_int_bound(ext)[1]
    if ext_hi is None:
        if forward:  # computing more than needed is only redundant
            return iv.dom.min, dn, []
        raise ScheduleError(
            primitive,
            f"cannot bound the range of iterator {iv.var.name!r} of block {block.name!r}: extent {ext}",
            argument="block",
            nodes=[block],
        )
    exact = is_const(ext, ext_hi)
    conds = [] if exact else [lambda v: v < lo + ext]
    if isinstance(lo, IntImm):
        start, end = max(lo.value, d0), min(lo.value + ext_hi, d0 + dn)
        if end <= start:
            raise ScheduleError(
                primitive,
                f"block {block.name!r}: iterator {iv.var.name!r} "
                f"would range over [{lo}, {lo.value + ext_hi}), outside its domain "
                f"[{d0}, {d0 + dn})",
                argument="loop",
                nodes=[block],
            )
        return IntImm(start), end - start, conds
    if forward and ext_hi >= dn:
        return iv.dom.min, dn, []
    if not ana.can_prove(lo >= d0):
        conds.append(lambda v: v >= d0)
    if not ana.can_prove(lo + ext_hi <= d0 + dn):
        conds.append(lambda v: v < d0 + dn)
    return lo, ext_hi, conds


def _symbolic_loop_plan(
    primitive: str, block: Block, iv: IterVar, need: Optional[Range], ana: Analyzer, forward: bool
) -> tuple[Expr, Expr | int, list]:
    """:func:`_loop_plan` for an iterator whose domain ``[d0, d0 + n)`` has a symbolic extent: the
    whole domain where nothing narrower is needed (an Expr extent), else the needed range with
    a constant extent (its bound) and a guard ``v < d0 + n`` where the range may pass the end:
    the tail of a split symbolic loop, as TVM guards it."""
    d0, dn = iv.dom.min, iv.dom.extent
    if need is None:
        return d0, dn, []
    lo, ext = ana.simplify(need.min), ana.simplify(need.extent)
    ext_hi = ana.const_int_bound(ext)[1]
    if ext_hi is None:
        if forward or ana.can_prove(ext >= dn):
            return d0, dn, []
        raise ScheduleError(
            primitive,
            f"cannot bound the range of iterator {iv.var.name!r} of block {block.name!r}: extent {ext}",
            argument="block",
            nodes=[block],
        )
    conds = [] if is_const(ext, ext_hi) else [lambda v: v < lo + ext]
    if not ana.can_prove(lo >= d0):
        conds.append(lambda v: v >= d0)
    if not ana.can_prove(lo + ext_hi <= d0 + dn):
        conds.append(lambda v: v < d0 + dn)
    return lo, ext_hi, conds


def _loop_var_name(iv: IterVar, position: int) -> str:
    """New loops are named after the iterators (``vi`` -> ``i``, the DSL's convention; ``v_ax1``
    -> ``ax1``); where that is no name (``v0`` -> ``0``), TVM's ``ax<position>``."""
    name = iv.var.name
    name = (name[1:] if name.startswith("v") and len(name) > 1 else name).lstrip("_")
    return name if name.isidentifier() and not keyword.iskeyword(name) else f"ax{position}"


def _check_split_reduction(primitive: str, block: Block, loop: For, plans: list, ana: Analyzer) -> None:
    """A reduction consumer runs, per iteration of ``loop``, the terms its producers have just
    written. That sums each term once, init first, only if the iterations cut one reduce
    iterator's domain into consecutive pieces in order (``vk = i_o * 4 + k``: TVM's
    reverse_compute_at of an rfactor'd reduction) while the spatial ones stay put, and only if
    the iterations run one after another: the pieces of a thread-bound or parallel loop would
    update one element at once (TVM accepts that; we refuse it, decision 9)."""

    def refuse(why: str) -> ScheduleError:
        return ScheduleError(
            primitive,
            f"reduction block {block.name!r} would have its reduce iterator split across "
            f"iterations of {loop_name(loop)}: {why}; move it to a loop where its producers "
            f"produce whole reductions",
            argument="loop",
            nodes=[loop, block],
        )

    split = [
        (iv, start, extent, conds)
        for iv, (start, extent, conds) in zip(block.iter_vars, plans)
        if iv.iter_type == REDUCE
        and not (is_const(start, as_int(iv.dom.min)) and _same_extent(extent, iv.dom.extent) and not conds)
    ]
    if not split:
        return
    for iv, (start, _, _) in zip(block.iter_vars, plans):
        if iv.iter_type != REDUCE and loop.loop_var in free_vars(start):
            raise refuse(f"its spatial iterator {iv.var.name!r} moves with the loop too")
    if len(split) > 1:
        raise refuse(f"the pieces of {[iv.var.name for iv, *_ in split]} would not tile their domains")
    iv, start, extent, conds = split[0]
    if loop.kind not in (ForKind.SERIAL, ForKind.UNROLLED):
        raise refuse(f"the loop is {loop.kind.value}, so its iterations would update one element at once")
    base = ana.simplify(start - convert(extent, start.dtype) * (loop.loop_var - loop.min))
    tiles = (
        not conds
        and loop.loop_var not in free_vars(base)
        and ana.can_prove(base == iv.dom.min)
        and ana.can_prove(loop.extent * extent == iv.dom.extent)
    )
    if not tiles:
        raise refuse(
            f"{iv.var.name!r} would range over [{start}, {start} + {extent}), which does not cut "
            f"[{iv.dom.min}, {iv.dom.min} + {iv.dom.extent}) into consecutive pieces, one per iteration"
        )


def _same_extent(a: Expr | int, b: Expr) -> bool:
    if isinstance(a, int):
        return isinstance(b, IntImm) and a == b.value
    return structural_equal(a, b)


def _build_nest(
    primitive: str,
    block: Block,
    needs: dict[Var, Range],
    outer: dict[Var, Range],
    preserve_unit_loops: bool,
    forward: bool,
    loop: For,
) -> Stmt:
    ana = Analyzer(outer)
    plans = [_loop_plan(primitive, block, iv, needs.get(iv.var), ana, forward) for iv in block.iter_vars]
    if not forward and block.init is not None:
        _check_split_reduction(primitive, block, loop, plans, ana)
    scope = dict(outer)
    loops: list[tuple[Var, Expr | int]] = []
    values: list[Expr] = []
    predicate: Expr = TRUE
    for iv, (start, extent, conds) in zip(block.iter_vars, plans):
        if isinstance(extent, int) and extent == 1 and not preserve_unit_loops:
            value = start
        else:
            var = Var(_loop_var_name(iv, len(loops)), iv.var.dtype)
            loops.append((var, extent))
            scope[var] = Range.from_extent(extent)
            value = var if is_const(start, 0) else start + var
        values.append(value)
        # a unit loop's variable is 0 in the guard (TVM's analyzer drops it there)
        guarded = start if isinstance(extent, int) and extent == 1 else value
        for cond in conds:
            predicate = conjoin(predicate, cond(guarded))
    inner = Analyzer(scope)
    # as TVM, each binding is its start plus the new loop variable, not simplified further
    if not is_const(predicate, 1):
        predicate = TRUE if inner.can_prove(predicate) else inner.simplify(predicate)
    nest: Stmt = BlockRealize(tuple(values), predicate, block)
    for var, extent in reversed(loops):
        nest = make_for(var, convert(extent, var.dtype), nest)  # min 0 is int32, as TVM
    return nest


def _check_reduce_space(primitive: str, idx: FuncIndex, block: Block) -> None:
    """The new reduce loops run over the box of the reduce domains: refuse a reduction whose
    loops did not visit that box exactly once (TVM: reduction blocks have affine bindings)."""
    realize = idx.realizes[block.name]
    problem = reduce_space_problem(realize, idx.loops_above(realize))
    if problem:
        raise ScheduleError(
            primitive,
            f"reduction block {block.name!r} cannot be rebuilt with "
            f"one loop per iterator: {problem}; the new loops would change which "
            f"terms it sums",
            argument="block",
            nodes=[block],
        )


def relocate(
    func: PrimFunc,
    block: Block,
    loop: For,
    primitive: str,
    preserve_unit_loops: bool = False,
    index_: int = -1,
) -> PrimFunc:
    """``func`` with ``block`` moved under ``loop`` (compute_at when ``primitive`` is
    ``"compute_at"``, reverse_compute_at otherwise); raises ScheduleError when invalid."""
    forward = primitive == "compute_at"
    idx = index(func)
    _check_placement(primitive, idx, block, loop)
    check_complete_or_reduction(primitive, idx, block)
    if block.init is not None:
        _check_reduce_space(primitive, idx, block)
    if forward:
        check_not_output(primitive, func, block)
    prods, cons = producers(idx, block), consumers(idx, block)
    position = _insertion_point(primitive, idx, block, loop, prods, cons, forward, index_)
    outer = idx.var_ranges(loop)
    outer[loop.loop_var] = Range(loop.min, loop.extent)
    ana = Analyzer(outer)
    if forward:
        provided = block.writes
        required = _required_regions(idx, loop, cons, buffers(block.writes), True, ana)
    else:
        provided = block.reads
        required = _required_regions(idx, loop, prods, buffers(block.reads), False, ana)
    needs = _iter_requirements(primitive, block, provided, required, ana)
    if not forward:
        _check_covered(primitive, idx, block, loop, prods, needs, ana)
    nest = _build_nest(primitive, block, needs, outer, preserve_unit_loops, forward, loop)
    subtrees = _subtrees(loop)
    body = seq(*subtrees[:position], nest, *subtrees[position:])
    removed = removal_root(primitive, idx, block)
    return replace_all(func, {removed: None, loop: loop.with_(body=body)})


# ------------------------------------------------------------------------------------------
# the primitives


@schedule_primitive("compute_at", tvm_inputs=("block", "loop"), tvm_attrs=("preserve_unit_loops", "index"))
def compute_at(
    sch: Schedule, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False, index: int = -1
) -> None:
    """Move producer ``block`` under ``loop``, computing per iteration only what the consumers
    under ``loop`` read in that iteration.

    Preconditions (otherwise ``ScheduleError`` naming ``compute_at``, the argument and the
    loops or blocks involved, and the schedule is left as it was):

    * ``block`` is a complete or reduction block and writes no function parameter;
    * a reduction block's loops visit each point of its reduce domains once (bindings as
      ``split`` and ``fuse`` leave them);
    * ``loop`` is in the same block scope as ``block`` and is not one of ``block``'s own loops;
    * every consumer of ``block`` is under ``loop``, after every producer of it there.

    ``index``: where among the loop body's statements the block goes (-1: just before the first
    consumer, -2: just after the last producer). New loops are named after the block's
    iterators; a unit loop is kept only with ``preserve_unit_loops``. A loop from
    ``sample_compute_location`` may also be the location "root" (nothing happens) or "inline"
    (``compute_inline``).

    Before / after ``compute_at(B, i)`` (``i`` is C's loop; B's new loop is named after its
    iterator ``vj``)::

        for i0, j0 in T.grid(4, 8):          for i in range(4):
          block B: vi, vj = i0, j0              for j in range(8):
            B[vi, vj] = A[vi, vj] * 2             block B: vi, vj = i, j
        for i, j in T.grid(4, 8):                   B[vi, vj] = A[vi, vj] * 2
          block C: vi, vj = i, j                for j in range(8):
            C[vi, vj] = B[vi, vj] + 1             block C: vi, vj = i, j
                                                    C[vi, vj] = B[vi, vj] + 1

    Example (run by the tests):

    >>> import workbench as wb
    >>> A = wb.placeholder((4, 8), "float32", name="A")
    >>> B = wb.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="B")
    >>> C = wb.compute((4, 8), lambda i, j: B[i, j] + 1.0, name="C")
    >>> sch = wb.Schedule(wb.create_func([A, C], name="f"))
    >>> i, j = sch.get_loops(sch.get_block("C"))
    >>> sch.compute_at(sch.get_block("B"), i)
    >>> print(sch.func)
    @T.prim_func
    def f(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
        # with T.block("root"):
        B = T.alloc_buffer((4, 8), "float32")
        for i in range(4):
            for j in range(8):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads(A[vi, vj])
                    T.writes(B[vi, vj])
                    B[vi, vj] = A[vi, vj] * T.float32(2)
            for j_1 in range(8):
                with T.block("C"):
                    vi_1, vj_1 = T.axis.remap("SS", [i, j_1])
                    T.reads(B[vi_1, vj_1])
                    T.writes(C[vi_1, vj_1])
                    C[vi_1, vj_1] = B[vi_1, vj_1] + T.float32(1)

    A loop of the block itself is refused:

    >>> sch.compute_at(sch.get_block("C"), i)
    Traceback (most recent call last):
    workbench.errors.ScheduleError: compute_at (argument 'loop'): loop 'i' encloses block 'C': \
the target loop must not be one of the block's own loops
    """
    target = sch.get(loop)
    if isinstance(target, str):  # a location mark drawn by sample_compute_location
        if target == INLINE_MARK:
            sch.func = compute_inline_func(sch.func, sch.get(block))
        return None
    sch.func = relocate(sch.func, sch.get(block), target, "compute_at", preserve_unit_loops, index)
    return None


@schedule_primitive(
    "reverse_compute_at", tvm_inputs=("block", "loop"), tvm_attrs=("preserve_unit_loops", "index")
)
def reverse_compute_at(
    sch: Schedule, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False, index: int = -1
) -> None:
    """Move consumer ``block`` under ``loop``, consuming per iteration what the producers under
    ``loop`` produced in that iteration.

    Rules: ``block`` is a complete or reduction block (the latter visiting each point of its
    reduce domains once, as for ``compute_at``); the loop is in the same block scope and
    is not one of the block's own loops; every producer of ``block`` is under ``loop``, before
    every consumer of it there. A reduction block's reduce iterator may be split across the
    iterations only if they cut its domain into consecutive pieces, in order, with the spatial
    iterators fixed, and the loop is serial or unrolled (a row sum under its producer's column
    loop; TVM's rfactor'd ``B_rf`` / ``B``): TVM also accepts a thread-bound loop there, whose
    threads would then update one element at once, which we refuse (decision 9). ``index`` and
    ``preserve_unit_loops`` as in ``compute_at``; the location "inline" means
    ``reverse_compute_inline``.

    Each iteration runs the instances of ``block`` whose reads the producers have just written,
    so the moved block must still run every one of its instances over the whole loop: one of
    its reads, performed by every instance (not under ``if_then_else``), must fix each iterator
    the producers constrain and stay inside what they write. Otherwise the primitive is refused
    (decision 9, no silent wrong code), where TVM accepts it: a padding stage
    ``P[v] = if_then_else(1 <= v < 7, T[v - 1], 0)`` moved under a loop of ``T`` would only
    run for ``v`` in ``[1, 7)`` and never write its border; so would a block whose iterators are
    fixed by reads of different producers (``S[x, y] = B1[x] + B2[y]`` runs only ``x == y``).
    Inline a padding stage into its consumer or ``compute_at`` it instead.

    Before / after ``reverse_compute_at(C, i)`` (``i`` is B's loop)::

        for i, j in T.grid(4, 8):            for i in range(4):
          block B: vi, vj = i, j                for j in range(8):
            B[vi, vj] = A[vi, vj] * 2             block B: vi, vj = i, j
        for i0, j0 in T.grid(4, 8):                 B[vi, vj] = A[vi, vj] * 2
          block C: vi, vj = i0, j0              for j in range(8):
            C[vi, vj] = B[vi, vj] + 1             block C: vi, vj = i, j
                                                    C[vi, vj] = B[vi, vj] + 1
    """
    target = sch.get(loop)
    if isinstance(target, str):  # a location mark drawn by sample_compute_location
        if target == INLINE_MARK:
            sch.func = reverse_compute_inline_func(sch.func, sch.get(block))
        return None
    sch.func = relocate(sch.func, sch.get(block), target, "reverse_compute_at", preserve_unit_loops, index)
    return None


LOCATION_PRIMITIVES.update({"compute_at", "reverse_compute_at"})


# ------------------------------------------------------------------------------------------
# sampling a compute location


def _loop_iter_type(idx: FuncIndex, loop: For) -> str:
    """ "S" if the loop feeds only spatial iterators of the blocks under it, "R" if only
    reduce iterators, "O" otherwise (TVM's GetLoopIterType)."""
    kinds = set()
    for realize in idx.child_realizes(loop):
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if loop.loop_var in free_vars(value):
                kinds.add(iv.iter_type)
    if kinds <= {SPATIAL}:
        return SPATIAL
    return REDUCE if kinds == {REDUCE} else "O"


def _valid(fn, *args) -> bool:
    try:
        fn(*args)
    except ScheduleError:
        return False
    return True


def compute_location_candidates(func: PrimFunc, block: Block) -> tuple[list[int], list[For]]:
    """The compute locations ``sample_compute_location`` may draw for ``block``: -2 (inline,
    when valid), -1 (root), then the positions of valid compute_at loops among the loops of the
    block's first consumer; also returns those loops.

    As in TVM, only loops down to the deepest loop shared by all consumers qualify, skipping
    unit loops, stopping at the first spatial loop after a non-spatial one and at non-spatial
    loops past the last spatial one (they would only repeat the producer).
    """
    checks, loops = _location_checks(func, block)
    return [d for d, valid in checks if valid()], loops


def _location_checks(func: PrimFunc, block: Block):
    """``([(decision, is_valid), ...], loops)``: the decisions that qualify structurally, in
    order, each with a thunk that tries the primitive (the costly part, so callers replaying a
    known decision check only that one)."""
    idx = index(func)
    checks: list[tuple[int, Callable[[], bool]]] = [
        (-2, lambda: _valid(compute_inline_func, func, block)),
        (-1, lambda: True),
    ]
    cons = consumers(idx, block)
    if not cons:
        return checks, []
    chains = [idx.loops_above(idx.realizes[b.name]) for b in cons]
    shared = 0
    while all(len(c) > shared and c[shared] is chains[0][shared] for c in chains):
        shared += 1
    loops = chains[0]
    kinds = [_loop_iter_type(idx, l) for l in loops[:shared]]
    last_spatial = max((k for k, t in enumerate(kinds) if t == SPATIAL), default=-1)
    seen_other = False
    for k in range(shared):
        if is_const(loops[k].extent, 1):
            continue
        if kinds[k] == SPATIAL:
            if seen_other:
                break
        else:
            seen_other = True
            if k > last_spatial:
                break
        # (the default binds this loop; mypy cannot infer a lambda with a default argument)
        checks.append((k, lambda loop=loops[k]: _valid(relocate, func, block, loop, "compute_at", True)))  # type: ignore[misc]
    return checks, loops


@schedule_primitive("sample_compute_location", sampling=True, tvm_inputs=("block",))
def sample_compute_location(sch: Schedule, block: BlockRV, decision: Optional[int] = None) -> LoopRV:
    """Draw where to compute ``block``: uniformly among its valid locations (see
    :func:`compute_location_candidates`). Returns a LoopRV to pass to ``compute_at``: a loop of
    the first consumer, or the location "root" (-1: leave the block alone) or "inline" (-2).

    The decision is TVM's: -2, -1, or the position of the chosen loop among the first
    consumer's loops. A replayed decision that is no longer a candidate falls back to the
    nearest candidate before it (as in TVM) — unless it is pinned: the replay then refuses it
    (``Schedule._apply``), since a pinned location that moved would be a lie::

        l3 = sch.sample_compute_location(block=b0, decision=1)
        sch.compute_at(block=b0, loop=l3, preserve_unit_loops=True, index=-1)
    """
    node = sch.get(block)
    if decision is None:
        candidates, loops = compute_location_candidates(sch.func, node)
        decision = sch.rng.choice(candidates)
    elif isinstance(decision, bool) or not isinstance(decision, int) or decision < -2:
        raise ScheduleError(
            "sample_compute_location",
            f"decision {decision!r} is not -2, -1 or a loop position",
            argument="decision",
        )
    else:  # the recorded decision if still valid, else the nearest valid one before it
        checks, loops = _location_checks(sch.func, node)
        decision = next((d for d, valid in reversed(checks) if d <= decision and valid()), -1)
    mark = {-2: INLINE_MARK, -1: ROOT_MARK}.get(decision)
    # a sampling primitive returns (outputs, decision); the registered method returns the outputs
    return sch.new_rv(LoopRV, mark or loops[decision].loop_var), decision  # type: ignore[return-value]
