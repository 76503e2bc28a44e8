"""Loop transformations: ``split``, ``fuse``, ``reorder``, ``add_unit_loop`` (TensorIR semantics).

Each rewrites the loop skeleton and the blocks' iterator bindings
(:func:`workbench.schedule.rewrite.rebind`), and every other use of a replaced loop variable
(an opaque block's regions and body, the blocks nested in it), so the computed values, and
their order within each block instance, are unchanged. Blocks that use no replaced variable are
shared untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ...errors import ScheduleError
from ...ir.arith import Simplifier
from ...ir.expr import (
    GE,
    GT,
    LE,
    LT,
    Add,
    BufferLoad,
    Expr,
    FloorDiv,
    FloorMod,
    IntImm,
    Var,
    conjuncts,
    is_const,
)
from ...ir.functor import free_vars, pre_order
from ...ir.stmt import OPAQUE, Block, BlockRealize, For, ForKind, IfThenElse, Range, Stmt, make_for, seq
from ...ir.structural import structural_equal
from ..instruction import schedule_primitive
from ..rewrite import rebind, simplify
from ...ir.index import replace_all
from ..rv import BlockRV, ExprRV, LoopRV

if TYPE_CHECKING:
    from ..schedule import Schedule


def loop_name(loop: For) -> str:
    return f"loop {loop.loop_var.name!r}"


def const_extent(primitive: str, loop: For, argument: str = "loop", advice: str = "") -> int:
    """The loop's extent as an int, for primitives that need a static extent (``advice`` says
    what to do instead when it is symbolic)."""
    if not isinstance(loop.extent, IntImm):
        raise ScheduleError(
            primitive,
            f"{loop_name(loop)} has extent {loop.extent}, not a constant" + (f": {advice}" if advice else ""),
            argument=argument,
            nodes=[loop],
        )
    return loop.extent.value


def _check_rebuildable(primitive: str, loop: For, argument: str, any_kind: bool = False) -> None:
    """split and fuse replace loops by new serial ones: refuse loops whose thread binding or
    annotations would be silently lost, and loops not starting at 0 (as TVM does). ``split``
    also refuses parallel, vectorized and unrolled loops; ``fuse`` (``any_kind``) accepts them
    and makes them serial, as TVM's does."""
    if (
        loop.thread_tag
        or loop.kind == ForKind.THREAD_BINDING
        or (not any_kind and loop.kind != ForKind.SERIAL)
    ):
        what = loop.kind.value + (f" ({loop.thread_tag})" if loop.thread_tag else "")
        applies = "loops not bound to a thread" if any_kind else "serial loops"
        raise ScheduleError(
            primitive,
            f"{loop_name(loop)} is {what}; {primitive} applies to "
            f"{applies} (change the loop kind after {primitive})",
            argument=argument,
            nodes=[loop],
        )
    if loop.annotations:
        raise ScheduleError(
            primitive,
            f"{loop_name(loop)} has annotations {sorted(loop.annotations)}; unannotate it first",
            argument=argument,
            nodes=[loop],
        )
    if not is_const(loop.min, 0):
        raise ScheduleError(
            primitive, f"{loop_name(loop)} starts at {loop.min}, not 0", argument=argument, nodes=[loop]
        )


# ------------------------------------------------------------------------------------------
# split


def _factor_values(sch, factors, extent: int, loop: For) -> list[int]:
    """Concrete factors: ExprRVs resolved, the one ``None`` inferred as ceil(extent / rest)."""
    if not isinstance(factors, (list, tuple)) or len(factors) < 2:
        raise ScheduleError(
            "split", f"expected a list of at least 2 factors, got {factors!r}", argument="factors"
        )
    values: list[Optional[int]] = []
    infer = None
    for k, f in enumerate(factors):
        if f is None:
            if infer is not None:
                raise ScheduleError(
                    "split",
                    f"factors {list(factors)}: only one factor may be None (inferred)",
                    argument="factors",
                )
            infer = k
            values.append(None)
            continue
        if isinstance(f, ExprRV):
            f = sch.get(f)
        elif isinstance(f, IntImm):
            f = f.value
        if isinstance(f, bool) or not isinstance(f, int) or f <= 0:
            raise ScheduleError(
                "split",
                f"factor {k} is {f!r}; factors are positive ints, ExprRVs or one None",
                argument="factors",
            )
        values.append(f)
    if infer is not None:
        rest = 1
        for v in values:
            rest *= v or 1
        values[infer] = -(-extent // rest)
    total = 1
    for v in values:
        total *= v or 1  # None only before the inferred factor is filled in
    if total < extent:
        raise ScheduleError(
            "split",
            f"factors {values} multiply to {total}, less than the extent {extent} of {loop_name(loop)}",
            argument="factors",
            nodes=[loop],
        )
    return values  # type: ignore[return-value]


def _is_one(f) -> bool:
    return isinstance(f, int) and f == 1


def _symbolic_factor_values(sch, factors, loop: For, ranges: dict) -> tuple[list, bool]:
    """Factors for a loop of symbolic extent ``n``: constants and exactly one ``None``, which
    becomes ``ceildiv(n, product of the others)`` (an Expr). Returns (factors, whether the
    blocks need the predicate ``fused < n``): they do unless the others multiply to 1, since
    ``n`` may be any size; constant factors alone cannot be shown to cover ``n`` (TVM refuses
    them too)."""
    if not isinstance(factors, (list, tuple)) or len(factors) < 2:
        raise ScheduleError(
            "split", f"expected a list of at least 2 factors, got {factors!r}", argument="factors"
        )
    values: list = []
    for k, f in enumerate(factors):
        if isinstance(f, ExprRV):
            f = sch.get(f)
        elif isinstance(f, IntImm):
            f = f.value
        if f is not None and (isinstance(f, bool) or not isinstance(f, int) or f <= 0):
            raise ScheduleError(
                "split",
                f"factor {k} is {f!r}; factors are positive ints, ExprRVs or one None",
                argument="factors",
            )
        values.append(f)
    missing = [k for k, f in enumerate(values) if f is None]
    if len(missing) != 1:
        what = (
            "only one factor may be None (inferred)"
            if missing
            else (
                f"constant factors cannot be shown to cover the extent {loop.extent} of {loop_name(loop)}, "
                f"which is not known until the kernel is called: give None for one factor (the outer, "
                f"usually) and it becomes ceildiv({loop.extent}, product of the others)"
            )
        )
        raise ScheduleError("split", f"factors {list(factors)}: {what}", argument="factors", nodes=[loop])
    rest = 1
    for f in values:
        rest *= f or 1
    extent = loop.extent
    if rest == 1:
        values[missing[0]] = extent
        return values, False
    # a multiple of the others (n * 64 split by 16, after a fuse) needs no tail, as in TVM
    exact = is_const(simplify(extent % rest, ranges), 0)
    values[missing[0]] = simplify(extent // rest if exact else (extent + (rest - 1)) // rest, ranges)
    return values, not exact


@schedule_primitive(
    "split", tvm_inputs=("loop", "*factors"), tvm_attrs=("preserve_unit_iters", "!disable_predication")
)
def split(
    sch: Schedule, loop: LoopRV, factors: list[ExprRV | int | None], preserve_unit_iters: bool = True
) -> list[LoopRV]:
    """Split ``loop`` into nested loops of extents ``factors`` (outer to inner).

    One factor may be ``None``: it is inferred as ``ceil(extent / product of the others)``.
    When the factors multiply to more than the extent, the blocks below get the predicate
    ``i_0 * f1 + i_1 < extent``. ``preserve_unit_iters=False`` replaces the variables of
    unit-extent new loops by 0 in the block bindings.

    Rules: ``loop`` is serial, unannotated and starts at 0; there are at least 2 factors,
    positive ints or ExprRVs with at most one ``None``, multiplying to at least the extent.

    A loop of symbolic extent ``n`` (a size variable) splits as in TVM: the factors are
    constants and exactly one ``None``, which becomes ``ceildiv(n, product of the others)``;
    the blocks get the predicate ``i_0 * f + i_1 < n`` (the tail). ``[None, 4]`` gives
    ``for i_0, i_1 in T.grid((n + 3) // 4, 4)``; ``[4, None]`` an inner loop of extent
    ``(n + 3) // 4``. Constant factors alone are refused: nothing shows they cover ``n``.

    Before / after ``split(i, factors=[None, 16])`` on a 128-loop::

        for i in range(128):               for i_0 in range(8):
          block C: vi = i                    for i_1 in range(16):
                                               block C: vi = i_0 * 16 + i_1
    """
    node = sch.get(loop)
    _check_rebuildable("split", node, "loop")
    ranges = sch.index.var_ranges(node)
    values: list
    if isinstance(node.extent, IntImm):
        extent: Expr | int = node.extent.value
        values = _factor_values(sch, factors, node.extent.value, node)
        total = 1
        for f in values:
            total *= f
        needs_guard = total > node.extent.value
    else:
        extent = node.extent
        values, needs_guard = _symbolic_factor_values(sch, factors, node, ranges)
    name = node.loop_var.name
    new_vars = [Var(f"{name}_{k}", node.loop_var.dtype) for k in range(len(values))]
    terms = [IntImm(0) if _is_one(f) and not preserve_unit_iters else v for v, f in zip(new_vars, values)]
    fused: Expr = terms[0]
    for term, f in zip(terms[1:], values[1:]):
        fused = fused * f + term
    # unit loops are left out of the simplifier's ranges so it keeps their variables
    ranges.update({v: Range.from_extent(f) for v, f in zip(new_vars, values) if not _is_one(f)})
    guard = LT.make(fused, extent) if needs_guard else None
    body = rebind(node.body, {node.loop_var: fused}, ranges, guard)
    for v, f in reversed(list(zip(new_vars, values))):
        body = make_for(v, f, body)
    sch.replace(node, body)
    return [sch.new_rv(LoopRV, v) for v in new_vars]


# ------------------------------------------------------------------------------------------
# fuse


@schedule_primitive("fuse", tvm_inputs=("*loops",), tvm_attrs=("preserve_unit_iters",))
def fuse(sch: Schedule, *loops: LoopRV, preserve_unit_iters: bool = True) -> LoopRV:
    """Fuse perfectly nested loops (given outer to inner) into one serial loop ``i_j_fused``.

    Each loop must be the only statement in the body of the previous one. As in TVM, the loops
    may be parallel, vectorized or unrolled (not bound to a thread, not annotated); the fused
    loop is serial whatever their kinds: set its kind again after fusing (TVM's
    RewriteParallelVectorizeUnroll fuses a parallel loop and re-parallelizes the result).
    Extents need not be constants (``T.min(31, 126 - i * 32) + 1`` under an outer ``i`` fuses
    to ``T.min(31, 126 - i * 32) * 16 + 16``, as in TVM), but none may depend on a loop fused
    with it.

    Before / after ``fuse(i, j)``::

        for i in range(4):                 for i_j_fused in range(32):
          for j in range(8):                 block C: vi = i_j_fused // 8
            block C: vi = i, vj = j                   vj = i_j_fused % 8
    """
    if not loops:
        raise ScheduleError("fuse", "expected at least one loop", argument="loops")
    nodes = [sch.get(rv) for rv in loops]
    seen: set = set()
    for n in nodes:
        if n.loop_var in seen:
            raise ScheduleError("fuse", f"{loop_name(n)} is given twice", argument="loops", nodes=[n])
        seen.add(n.loop_var)
        _check_rebuildable("fuse", n, "loops", any_kind=True)
    idx = sch.index
    for outer, inner in zip(nodes, nodes[1:]):
        if outer.body is inner:
            continue
        if inner in idx.loops_above(outer):
            msg = f"loops must be given outer to inner, but {loop_name(inner)} encloses {loop_name(outer)}"
        elif idx.parent.get(inner) is not None and outer in idx.ancestors(inner):
            msg = (
                f"{loop_name(inner)} is not the only statement in the body of "
                f"{loop_name(outer)}: only perfectly nested loops fuse"
            )
        else:
            msg = f"{loop_name(inner)} is not inside {loop_name(outer)}"
        raise ScheduleError("fuse", msg, argument="loops", nodes=[outer, inner])
    fused_vars = {n.loop_var for n in nodes}
    for n in nodes:
        used = free_vars(n.extent) & fused_vars
        if used:
            raise ScheduleError(
                "fuse",
                f"the extent {n.extent} of {loop_name(n)} depends on "
                f"{sorted(v.name for v in used)}, fused with it",
                argument="loops",
                nodes=[n],
            )
    fused = Var("_".join(n.loop_var.name for n in nodes) + "_fused", nodes[0].loop_var.dtype)
    ranges = idx.var_ranges(nodes[0])
    vmap: dict[Var, Expr] = {}
    stride: Expr = IntImm(1)
    for k in range(len(nodes) - 1, -1, -1):
        extent = nodes[k].extent
        value: Expr = fused if is_const(stride, 1) else fused // stride
        if k > 0:
            value = value % extent
        if is_const(extent, 1) and not preserve_unit_iters:
            value = IntImm(0)
        vmap[nodes[k].loop_var] = value
        stride = simplify(stride * extent, ranges)
    ranges[fused] = Range.from_extent(stride)
    body = rebind(nodes[-1].body, vmap, ranges)
    sch.replace(nodes[0], make_for(fused, stride, body))
    return sch.new_rv(LoopRV, fused)


# ------------------------------------------------------------------------------------------
# reorder


@schedule_primitive("reorder", tvm_inputs=("*ordered_loops",))
def reorder(sch: Schedule, *ordered_loops: LoopRV) -> None:
    """Reorder loops of one chain: the given loops take each other's positions in the given
    order (outer to inner); loops of the chain that are not given stay where they are.

    The loops must lie on one path with no other statement in between (a single branch), and
    the blocks below must have only spatial and reduce iterators, bound affinely to the loops
    from the outermost one given down (TVM's partial affine binding: ``v0 * v0 + v1`` allows
    reordering the loops under ``v0`` but not ``v0`` itself; ``l * 16`` alone, a predicate
    that bounds no sum of the bindings, or one loop feeding two iterators are refused, as in
    TVM). A spatial block would compute the same values in any order; the rule is TVM's, kept
    so that a trace TVM refuses is refused here too.

    Before / after ``reorder(k, i)``::

        for i in range(4):                 for k in range(8):
          for j in range(6):                 for j in range(6):
            for k in range(8):                 for i in range(4):
              block C                            block C
    """
    nodes = [sch.get(rv) for rv in ordered_loops]
    seen: set = set()
    for n in nodes:
        if n.loop_var in seen:
            raise ScheduleError(
                "reorder", f"{loop_name(n)} is given twice", argument="ordered_loops", nodes=[n]
            )
        seen.add(n.loop_var)
    if len(nodes) < 2:
        return None
    idx = sch.index
    chains = {n.loop_var: idx.loops_above(n) + [n] for n in nodes}
    bottom = max(nodes, key=lambda n: len(chains[n.loop_var]))
    top = min(nodes, key=lambda n: len(chains[n.loop_var]))
    chain = chains[bottom.loop_var]
    for n in nodes:
        if n not in chain:
            raise ScheduleError(
                "reorder",
                f"{loop_name(n)} and {loop_name(bottom)} are not in "
                f"one loop chain (neither encloses the other in one block scope)",
                argument="ordered_loops",
                nodes=[n, bottom],
            )
    path = chain[chain.index(top) :]
    for outer, inner in zip(path, path[1:]):
        if outer.body is not inner:
            raise ScheduleError(
                "reorder",
                f"the loops from {loop_name(top)} to "
                f"{loop_name(bottom)} are not a single branch: {loop_name(outer)}"
                f" holds other statements besides {loop_name(inner)}",
                argument="ordered_loops",
                nodes=[outer],
            )
    for realize in idx.realizes_under(bottom):
        for iv in realize.block.iter_vars:
            if iv.iter_type == OPAQUE:
                raise ScheduleError(
                    "reorder",
                    f"block {realize.block.name!r} below the loops "
                    f"has opaque iterator {iv.var.name!r}; only blocks with "
                    f"spatial and reduce iterators can be reordered around",
                    argument="ordered_loops",
                    nodes=[realize.block],
                )
    reordered = {p.loop_var for p in path}
    for realize in idx.realizes_under(bottom):
        block = realize.block
        if block.iter_vars or not (free_vars(block) & reordered):
            continue
        # an opaque block indexes with the loop variables themselves: its iterations may carry
        # a dependence (a prefix sum reads what the previous one wrote), which a new order would
        # break; TVM does not check this and computes something else (DESIGN decision 9)
        carried = {r.buffer for r in block.reads} & {w.buffer for w in block.writes}
        if carried:
            raise ScheduleError(
                "reorder",
                f"opaque block {block.name!r} below the loops uses the loop variables directly "
                f"and reads what it writes ({', '.join(sorted(b.name for b in carried))}): its "
                f"iterations may depend on each other, and reordering would break that",
                argument="ordered_loops",
                nodes=[block],
            )
    for realize in idx.child_realizes(bottom):
        if not realize.block.iter_vars:
            continue  # an opaque block binds nothing (checked for carried dependences above)
        loops = idx.loops_above(realize)
        problem = _affine_problem(realize, loops[loops.index(top) :], idx.var_ranges(top))
        if problem:
            raise ScheduleError(
                "reorder",
                f"block {realize.block.name!r} below the loops is not bound affinely to the loops "
                f"from {loop_name(top)} down: {problem}",
                argument="ordered_loops",
                nodes=[realize.block],
            )
    given = iter(nodes)
    order = [next(given) if p in nodes else p for p in path]
    _check_reduction_order(path, order, idx.realizes_under(bottom))
    body = bottom.body
    inner_vars: set[Var] = set()
    for loop in reversed(order):
        used = (free_vars(loop.min) | free_vars(loop.extent)) & inner_vars
        if used:
            raise ScheduleError(
                "reorder",
                f"the bounds of {loop_name(loop)} depend on "
                f"{sorted(v.name for v in used)}, which would be inner loops",
                argument="ordered_loops",
                nodes=[loop],
            )
        inner_vars.add(loop.loop_var)
        body = loop.with_(body=body)
    sch.replace(top, body)
    return None


def _affine_problem(realize: BlockRealize, loops: list[For], outer: dict) -> Optional[str]:
    """Why the bindings of ``realize`` are not affine in ``loops`` (TVM's partial affine binding,
    the other variables being constants), or None.

    Each binding must be ``base + sum(coeff * slice)``, a slice being ``x``, ``x // a``,
    ``x % b`` or ``x // a % b`` of a loop ``x`` or of a fused sum of such slices, with positive
    coefficients that leave no gap (sorted, each at most the span of the smaller ones: ``l * 16``
    alone is refused, ``v0 * 2 + v1`` over ``v1 < 4`` is accepted, as in TVM); no part of a loop
    may feed two slices; a predicate conjunct on these loops must bound one of the sums a
    binding is made of (what split leaves: ``i_0 * 5 + i_1 < 16``).
    """
    iters = {l.loop_var: (l.extent.value if isinstance(l.extent, IntImm) else None) for l in loops}
    ranges = dict(outer)
    ranges.update({l.loop_var: Range(l.min, l.extent) for l in loops})
    sim = Simplifier(ranges)
    used: dict[str, list[tuple[int, Optional[int]]]] = {}  # source -> [lower, upper) of its slices
    sums: list[dict[str, int]] = []  # the sums of slices the bindings are made of
    fused: dict[str, Optional[int]] = {}  # fused sum -> its span

    def iterish(e: Expr) -> bool:
        return any(isinstance(n, Var) and n in iters for n in pre_order(e))

    def take(source: str, lower: int, extent: Optional[int]) -> None:
        upper = None if extent is None else lower * extent
        for lo, hi in used.get(source, []):
            if (hi is None or lower < hi) and (upper is None or lo < upper):
                raise _NotAffine(f"{source} feeds two iterators (or one twice)")
        used.setdefault(source, []).append((lower, upper))

    def terms(e: Expr) -> dict:
        """``e``'s terms over ``loops``: ``{str(atom): (atom, coeff)}`` (the base left out)."""
        form = sim.lin(e)
        out = {}
        for a, c in form.terms.items():
            if iterish(a):
                out[str(a)] = (a, c)
        return out

    def span(ts: dict) -> Optional[int]:
        """The values ``sum(coeff * slice)`` reaches without a gap are ``[0, span)``."""
        reach: Optional[int] = 1
        # a symbolic extent (None) sorts after a constant one of the same coefficient (a unit
        # loop beside the outer loop of a symbolic split: i_0 * 64 + i_1 * 64 + i_2)
        pairs = [(c, slice_extent(a)) for a, c in ts.values()]
        for coeff, extent in sorted(pairs, key=lambda p: (p[0], p[1] is None, p[1] or 0)):
            if coeff <= 0:
                raise _NotAffine(f"coefficient {coeff}")
            if reach is None or coeff > reach:
                raise _NotAffine("the values it takes have gaps")
            reach = None if extent is None else reach + coeff * (extent - 1)
        return reach

    def source_of(e: Expr) -> tuple[str, Optional[int]]:
        if isinstance(e, Var) and e in iters:
            key = e.name
            if key not in used:
                used[key] = []
            return key, iters[e]
        key = str(e)
        if key not in fused:
            ts = terms(e)
            if not ts or sim.lin(e).const:
                raise _NotAffine(f"{e} is not a sum of loop slices")
            fused[key] = span(register(ts))
            sums.append({k: c for k, (_, c) in ts.items()})
        return key, fused[key]

    def slice_of(a: Expr) -> tuple[str, int, Optional[int]]:
        if isinstance(a, FloorMod) and isinstance(a.b, IntImm) and a.b.value > 0:
            source, lower, extent = slice_of(a.a)
            return source, lower, a.b.value if extent is None else min(extent, a.b.value)
        if isinstance(a, FloorDiv) and isinstance(a.b, IntImm) and a.b.value > 0:
            source, lower, extent = slice_of(a.a)
            c = a.b.value
            return source, lower * c, None if extent is None else -(-extent // c)
        if isinstance(a, Var) or isinstance(a, Add):
            source, extent = source_of(a)
            return source, 1, extent
        raise _NotAffine(f"{a} is not a slice of a loop")

    def slice_extent(a: Expr) -> Optional[int]:
        return slices[str(a)][2]

    slices: dict[str, tuple[str, int, Optional[int]]] = {}

    def register(ts: dict) -> dict:
        """Take the slices of the terms ``ts`` (each use counts) and return ``ts``."""
        for key, (a, _) in ts.items():
            if key not in slices:
                slices[key] = slice_of(a)
            take(*slices[key])
        return ts

    try:
        for value in realize.iter_values:
            ts = terms(value)
            span(register(ts))
            sums.append({k: c for k, (_, c) in ts.items()})
        for cond in conjuncts(realize.predicate):
            sides = [x for x in (getattr(cond, "a", None), getattr(cond, "b", None)) if x is not None]
            if not isinstance(cond, (LT, LE, GT, GE)) or all(not iterish(x) for x in sides):
                if iterish(cond):
                    raise _NotAffine(f"predicate {cond} is not a bound")
                continue
            if iterish(cond.a) and iterish(cond.b):
                raise _NotAffine(f"predicate {cond} is not a bound")
            bounded = {k: c for k, (_, c) in terms(cond.a if iterish(cond.a) else cond.b).items()}
            if not any(_scaled_part(bounded, whole) for whole in sums):
                raise _NotAffine(f"predicate {cond} bounds no sum the bindings are made of")
    except _NotAffine as e:
        return str(e)
    except TypeError:
        return "a binding is not an integer expression"
    return None


class _NotAffine(Exception):
    pass


def _scaled_part(part: dict, whole: dict) -> bool:
    """Whether ``whole`` holds every term of ``part``, all scaled by one positive factor."""
    if not part or any(k not in whole for k in part):
        return False
    k, c = next(iter(part.items()))
    if whole[k] % c:
        return False
    factor = whole[k] // c
    return factor > 0 and all(whole[t] == v * factor for t, v in part.items())


def _check_reduction_order(path: list, order: list, realizes: list) -> None:
    """A reduction's init runs where its reduce iterators are at their minimum, so for every
    output element that iteration must come first. Loops feeding both spatial and reduce
    iterators of one block (left by fusing a spatial with a reduce loop) visit an element's
    reduce points in their own order: two such loops may not swap, or the init would run
    after some updates."""
    for realize in realizes:
        block = realize.block
        if not block.is_reduction:
            continue
        feeds: dict = {}
        for iv, value in zip(block.iter_vars, realize.iter_values):
            for v in free_vars(value):
                feeds.setdefault(v, set()).add(iv.iter_type)
        mixed = [loop for loop in path if len(feeds.get(loop.loop_var, ())) > 1]
        if [loop for loop in order if loop in mixed] != mixed:
            names = ", ".join(loop_name(loop) for loop in mixed)
            raise ScheduleError(
                "reorder",
                f"loops {names} each feed both spatial and reduce "
                f"iterators of block {block.name!r}; swapping them would run its "
                f"init after some of its updates",
                argument="ordered_loops",
                nodes=[block, *mixed],
            )


# ------------------------------------------------------------------------------------------
# add_unit_loop


@schedule_primitive("add_unit_loop", tvm_inputs=("block_or_loop",))
def add_unit_loop(sch: Schedule, block_or_loop: BlockRV | LoopRV) -> LoopRV:
    """Wrap a block (its realize) or a loop in a new loop ``u`` of extent 1.

    Before / after ``add_unit_loop(C)``::

        for i in range(4):                 for i in range(4):
          block C                            for u in range(1):
                                               block C
    """
    node = sch.get(block_or_loop)
    idx = sch.index
    if isinstance(node, Block):
        if idx.scope(node) is None:
            raise ScheduleError(
                "add_unit_loop",
                "cannot add a loop above the root block",
                argument="block_or_loop",
                nodes=[node],
            )
        node = idx.realizes[node.name]
    var = Var("u")
    sch.replace(node, make_for(var, 1, node))
    return sch.new_rv(LoopRV, var)


# ------------------------------------------------------------------------------------------
# merge


def _merge_chain(idx, loop: For, lca) -> list[For]:
    """The loops from ``loop`` up to (not including) ``lca``, outer to inner."""
    chain = [loop]
    for node in idx.ancestors(loop):
        if node is lca:
            break
        if isinstance(node, For):
            chain.append(node)
    return chain[::-1]


def _buffers_used(block: Block) -> tuple[set, set]:
    """(buffers read, buffers written) by ``block``: its regions and its body's loads (an update
    whose init went elsewhere may leave its output out of its read regions)."""
    reads = {r.buffer for r in block.reads} | {
        n.buffer for n in pre_order(block.body) if isinstance(n, BufferLoad)
    }
    return reads, {w.buffer for w in block.writes}


def _shared_buffer(a: Block, b: Block) -> Optional[str]:
    """A buffer through which ``a`` and ``b`` depend on each other (written by one, read or
    written by the other), or None."""
    (ra, wa), (rb, wb) = _buffers_used(a), _buffers_used(b)
    common = (wa & (rb | wb)) | (wb & ra)
    return min((buf.name for buf in common), default=None)


def _check_merge_dependences(sch: Schedule, nodes: list[For], chains: list[list[For]]) -> None:
    """Refuse a merge that reorders dependent statements: merged, iteration ``i`` of every nest
    runs before iteration ``i + 1`` of any, so a nest that reads what another writes (or writes
    what it reads) would see values of other iterations; and the later nests move up past the
    statements between them. TVM 0.27 does not check this and computes something else
    (DESIGN decision 9: refused here)."""
    nests = [[n for n in pre_order(chain[0]) if isinstance(n, Block)] for chain in chains]
    for i, a in enumerate(nests):
        for j in range(i + 1, len(nests)):
            for x in a:
                for y in nests[j]:
                    buf = _shared_buffer(x, y)
                    if buf is not None:
                        raise ScheduleError(
                            "merge",
                            f"block {x.name!r} under {loop_name(nodes[i])} and block {y.name!r} under "
                            f"{loop_name(nodes[j])} depend on each other through buffer {buf!r}: "
                            f"merging would run them interleaved, iteration by iteration",
                            argument="loops",
                            nodes=[nodes[i], nodes[j], x, y],
                        )
    merged = {b.name for nest in nests for b in nest}
    order = [n for n in pre_order(sch.func.body) if isinstance(n, Block) and n.name != "root"]
    pos = [k for k, b in enumerate(order) if b.name in merged]
    for between in order[min(pos) + 1 : max(pos)] if pos else []:
        if between.name in merged:
            continue
        for nest, node in zip(nests, nodes):
            for y in nest:
                buf = _shared_buffer(between, y)
                if buf is not None:
                    raise ScheduleError(
                        "merge",
                        f"block {between.name!r}, between the merged nests, and block {y.name!r} "
                        f"under {loop_name(node)} depend on each other through buffer {buf!r}: "
                        f"merging would move one past the other",
                        argument="loops",
                        nodes=[node, between, y],
                    )


@schedule_primitive("merge", tvm_inputs=("*loops",))
def merge(sch: Schedule, *loops: LoopRV) -> LoopRV:
    """Merge loop nests of equal shape that are siblings under a common ancestor into one nest
    whose innermost loop runs their bodies one after the other, in the order the loops are
    given. For each given loop, its nest is the loops from it up to the lowest loop or block
    enclosing all the given ones; the merged nest takes the place of the first given loop's
    and is named after it (``i`` becomes ``i_m``); the other nests are removed.

    Rules (TVM's): at least one loop, none given twice, all in one block scope; every loop of
    every nest is unannotated, not bound to a thread and starts at 0; each nest is perfect
    (each loop is the only statement in its parent's body); the nests have the same depth
    (at least one) and the same extents level by level. Also refused here: a nest inside an
    ``if`` below the common ancestor (moving it out would run it unconditionally: TVM 0.27
    leaves ``if c: T.evaluate(0)`` behind and runs the merged body whatever ``c``), and nests
    that depend on each other, or on a statement between them, through a buffer (TVM does not
    check this: the bodies run interleaved and later nests move up, which computes something
    else).

    Before / after ``merge(i1, i2)``::

        for i1 in range(4):                for i1_m in range(4):
          for j in range(8): block B         for j in range(8): block B
        for i2 in range(4):                  for j in range(8): block C
          for j in range(8): block C
    """
    if not loops:
        raise ScheduleError("merge", "expected at least one loop", argument="loops")
    nodes = [sch.get(rv) for rv in loops]
    seen: set = set()
    for n in nodes:
        if n.loop_var in seen:
            raise ScheduleError("merge", f"{loop_name(n)} is given twice", argument="loops", nodes=[n])
        seen.add(n.loop_var)
    idx = sch.index
    scopes = {idx.scope(n) for n in nodes}
    if len(scopes) > 1:
        raise ScheduleError(
            "merge", "the loops are not all in one block scope", argument="loops", nodes=list(nodes)
        )
    paths = [[n, *(a for a in idx.ancestors(n) if isinstance(a, (For, Block)))] for n in nodes]
    common = set(paths[0]).intersection(*paths[1:])
    lca = min(common, key=lambda a: paths[0].index(a))
    chains = [_merge_chain(idx, n, lca) for n in nodes]
    for n, chain in zip(nodes, chains):
        if n in common:
            raise ScheduleError(
                "merge",
                f"{loop_name(n)} encloses another given loop: merged loops are siblings",
                argument="loops",
                nodes=[n],
            )
        for loop in chain:
            if loop.annotations or loop.thread_tag or loop.kind == ForKind.THREAD_BINDING:
                raise ScheduleError(
                    "merge",
                    f"{loop_name(loop)} is annotated or bound to a thread",
                    argument="loops",
                    nodes=[loop],
                )
            if not is_const(loop.min, 0):
                raise ScheduleError(
                    "merge", f"{loop_name(loop)} starts at {loop.min}, not 0", argument="loops", nodes=[loop]
                )
        for outer, inner in zip(chain, chain[1:]):
            if outer.body is not inner:
                raise ScheduleError(
                    "merge",
                    f"{loop_name(inner)} is not the only statement in the body of {loop_name(outer)}",
                    argument="loops",
                    nodes=[outer, inner],
                )
        for a in idx.ancestors(chain[0]):
            if a is lca:
                break
            if isinstance(a, IfThenElse):
                raise ScheduleError(
                    "merge",
                    f"{loop_name(chain[0])} is inside an if below the common ancestor of the loops",
                    argument="loops",
                    nodes=[chain[0]],
                )
    first = chains[0]
    for n, chain in zip(nodes, chains):
        if len(chain) != len(first):
            raise ScheduleError(
                "merge",
                f"the nest of {loop_name(n)} is {len(chain)} loops deep, the nest of "
                f"{loop_name(nodes[0])} {len(first)}: merged nests have the same depth",
                argument="loops",
                nodes=[n, nodes[0]],
            )
        for a, b in zip(first, chain):
            if not structural_equal(a.extent, b.extent):
                raise ScheduleError(
                    "merge",
                    f"{loop_name(b)} has extent {b.extent}, {loop_name(a)} {a.extent}: merged loops "
                    f"have the same extents",
                    argument="loops",
                    nodes=[a, b],
                )
    _check_merge_dependences(sch, nodes, chains)
    new_vars = [Var(f"{loop.loop_var.name}_m", loop.loop_var.dtype) for loop in first]
    ranges = idx.var_ranges(first[0])
    ranges.update({v: Range(IntImm(0), loop.extent) for v, loop in zip(new_vars, first)})
    bodies = []
    for chain in chains:
        vmap = {loop.loop_var: v for loop, v in zip(chain, new_vars)}
        bodies.append(rebind(chain[-1].body, vmap, ranges))
    body: Stmt = seq(*bodies)
    for v, loop in reversed(list(zip(new_vars, first))):
        body = make_for(v, loop.extent, body)
    sch.func = replace_all(sch.func, {first[0]: body, **{c[0]: None for c in chains[1:]}})
    return sch.new_rv(LoopRV, new_vars[-1])
