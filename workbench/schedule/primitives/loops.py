"""Loop transformations: ``split``, ``fuse``, ``reorder``, ``add_unit_loop`` (TensorIR semantics).

Each keeps the blocks themselves untouched and only rewrites the loop skeleton and the blocks'
iterator bindings (:func:`workbench.schedule.rewrite.rebind`), so the computed values, and
their order within each block instance, are unchanged.
"""

from __future__ import annotations

from typing import Optional

from ...errors import ScheduleError
from ...ir.expr import Expr, IntImm, LT, Var, is_const
from ...ir.functor import free_vars
from ...ir.stmt import OPAQUE, Block, For, ForKind, Range, make_for
from ..instruction import schedule_primitive
from ..rewrite import rebind
from ..rv import BlockRV, ExprRV, LoopRV


def loop_name(loop: For) -> str:
    return f"loop {loop.loop_var.name!r}"


def const_extent(primitive: str, loop: For, argument: str = "loop") -> int:
    """The loop's extent as an int; the primitives here need static extents."""
    if not isinstance(loop.extent, IntImm):
        raise ScheduleError(
            primitive,
            f"{loop_name(loop)} has extent {loop.extent}, not a constant",
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


@schedule_primitive("split")
def split(
    sch, loop: LoopRV, factors: list[ExprRV | int | None], preserve_unit_iters: bool = True
) -> list[LoopRV]:
    """Split ``loop`` into nested loops of extents ``factors`` (outer to inner).

    One factor may be ``None``: it is inferred as ``ceil(extent / product of the others)``.
    When the factors multiply to more than the extent, the blocks below get the predicate
    ``i_0 * f1 + i_1 < extent``. ``preserve_unit_iters=False`` replaces the variables of
    unit-extent new loops by 0 in the block bindings.

    Rules: ``loop`` is serial, unannotated, starts at 0 and has a constant extent; there are at
    least 2 factors, positive ints or ExprRVs with at most one ``None``, multiplying to at least
    the extent.

    Before / after ``split(i, factors=[None, 16])`` on a 128-loop::

        for i in range(128):               for i_0 in range(8):
          block C: vi = i                    for i_1 in range(16):
                                               block C: vi = i_0 * 16 + i_1
    """
    node = sch.get(loop)
    _check_rebuildable("split", node, "loop")
    extent = const_extent("split", node)
    values = _factor_values(sch, factors, extent, node)
    name = node.loop_var.name
    new_vars = [Var(f"{name}_{k}", node.loop_var.dtype) for k in range(len(values))]
    terms = [IntImm(0) if f == 1 and not preserve_unit_iters else v for v, f in zip(new_vars, values)]
    fused: Expr = terms[0]
    for term, f in zip(terms[1:], values[1:]):
        fused = fused * f + term
    ranges = sch.index.var_ranges(node)
    # unit loops are left out of the simplifier's ranges so it keeps their variables
    ranges.update({v: Range.from_extent(f) for v, f in zip(new_vars, values) if f != 1})
    total = 1
    for f in values:
        total *= f
    guard = LT.make(fused, extent) if total > extent else None
    body = rebind(node.body, {node.loop_var: fused}, ranges, guard)
    for v, f in reversed(list(zip(new_vars, values))):
        body = make_for(v, f, body)
    sch.replace(node, body)
    return [sch.new_rv(LoopRV, v) for v in new_vars]


# ------------------------------------------------------------------------------------------
# fuse


@schedule_primitive("fuse")
def fuse(sch, *loops: LoopRV, preserve_unit_iters: bool = True) -> LoopRV:
    """Fuse perfectly nested loops (given outer to inner) into one serial loop ``i_j_fused``.

    Each loop must be the only statement in the body of the previous one. As in TVM, the loops
    may be parallel, vectorized or unrolled (not bound to a thread, not annotated); the fused
    loop is serial whatever their kinds: set its kind again after fusing (TVM's
    RewriteParallelVectorizeUnroll fuses a parallel loop and re-parallelizes the result).

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
    extents = [const_extent("fuse", n, "loops") for n in nodes]
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
    fused = Var("_".join(n.loop_var.name for n in nodes) + "_fused", nodes[0].loop_var.dtype)
    vmap: dict[Var, Expr] = {}
    stride = 1
    for k in range(len(nodes) - 1, -1, -1):
        value: Expr = fused if stride == 1 else fused // stride
        if k > 0:
            value = value % extents[k]
        if extents[k] == 1 and not preserve_unit_iters:
            value = IntImm(0)
        vmap[nodes[k].loop_var] = value
        stride *= extents[k]
    ranges = idx.var_ranges(nodes[0])
    ranges[fused] = Range.from_extent(stride)
    body = rebind(nodes[-1].body, vmap, ranges)
    sch.replace(nodes[0], make_for(fused, stride, body))
    return sch.new_rv(LoopRV, fused)


# ------------------------------------------------------------------------------------------
# reorder


@schedule_primitive("reorder")
def reorder(sch, *ordered_loops: LoopRV) -> None:
    """Reorder loops of one chain: the given loops take each other's positions in the given
    order (outer to inner); loops of the chain that are not given stay where they are.

    The loops must lie on one path with no other statement in between (a single branch), and
    the blocks below must have only spatial and reduce iterators.

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


@schedule_primitive("add_unit_loop")
def add_unit_loop(sch, block_or_loop: BlockRV | LoopRV) -> LoopRV:
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
