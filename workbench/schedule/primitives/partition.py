"""``loop_partition`` (TVM 0.27): one loop becomes consecutive loops over its sub-ranges.

Running ``[0, 2)`` then ``[2, 66)`` then ``[66, 128)`` is running ``[0, 128)`` in the same order,
so the result computes what the loop computed whatever its body; each part gets its own copy of
the body (fresh loop and iterator variables, blocks renamed ``<block>_<loop><k>``), so each can
then be scheduled on its own (the usual use: a main part of a tile multiple and a remainder).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ...errors import ScheduleError
from ...ir.expr import IntImm, Var
from ...ir.functor import pre_order, substitute, transform
from ...ir.region import infer_access_regions
from ...ir.stmt import SPATIAL, TRUE, Block, BlockRealize, For, IterVar, Range, Stmt, seq
from ..instruction import schedule_primitive
from ..rewrite import rebind
from ..rv import ExprRV, LoopRV
from .loops import _check_rebuildable, const_extent, loop_name

if TYPE_CHECKING:
    from ..schedule import Schedule


def _sizes(sch: Schedule, factors: list, extent: int, loop: For) -> list[int]:
    """TVM's rule: positive sizes, one ``None`` inferred as the rest; constants summing below
    the extent (without a ``None``, the rest becomes one more part)."""
    if not isinstance(factors, (list, tuple)) or not factors:
        raise ScheduleError(
            "loop_partition", f"expected a non-empty list of factors, got {factors!r}", argument="factors"
        )
    values: list[Optional[int]] = []
    for k, f in enumerate(factors):
        if isinstance(f, ExprRV):
            f = sch.get(f)
        elif isinstance(f, IntImm):
            f = f.value
        if f is not None and (isinstance(f, bool) or not isinstance(f, int) or f <= 0):
            raise ScheduleError(
                "loop_partition",
                f"factor {k} is {f!r}; factors are positive ints, ExprRVs or one None",
                argument="factors",
            )
        values.append(f)
    if values.count(None) > 1:
        raise ScheduleError(
            "loop_partition", f"factors {list(factors)}: only one factor may be None", argument="factors"
        )
    known = sum(v for v in values if v is not None)
    if known >= extent:
        raise ScheduleError(
            "loop_partition",
            f"factors {values} sum to {known}, not less than the extent {extent} of {loop_name(loop)}",
            argument="factors",
            nodes=[loop],
        )
    if None in values:
        values[values.index(None)] = extent - known
    else:
        values.append(extent - known)
    return values  # type: ignore[return-value]


def _fresh_copy(stmt: Stmt) -> Stmt:
    """``stmt`` with a new variable for every loop and block iterator it binds."""
    bound: dict[Var, Var] = {}
    for n in pre_order(stmt):
        if isinstance(n, For):
            bound[n.loop_var] = Var(n.loop_var.name, n.loop_var.dtype)
        elif isinstance(n, IterVar):
            bound[n.var] = Var(n.var.name, n.var.dtype)
    return substitute(stmt, bound)


def _renamed(stmt: Stmt, suffix: str, taken: set[str]) -> Stmt:
    def post(n):
        if isinstance(n, Block):
            name = _fresh(f"{n.name}_{suffix}", taken)
            return n.with_(name=name)
        return n

    return transform(stmt, post)


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def _narrowed(stmt: Stmt, v: Var, rng: Range) -> Stmt:
    """An iterator bound to the part's loop variable alone gets the part's range as domain (as
    TVM: ``vi = T.axis.remap("S", [i1])`` over ``range(2, 66)``). A reduction iterator keeps
    its domain: the block's init runs where the reduction starts, in the first part only."""

    def post(n):
        if isinstance(n, BlockRealize) and any(x is v for x in n.iter_values):
            ivs = tuple(
                IterVar(iv.var, rng, iv.iter_type) if x is v and iv.iter_type == SPATIAL else iv
                for iv, x in zip(n.block.iter_vars, n.iter_values)
            )
            return BlockRealize(n.iter_values, n.predicate, n.block.with_(iter_vars=ivs))
        return n

    return transform(stmt, post)


def _opaque(name: str, body: Stmt, ranges: dict) -> BlockRealize:
    reads, writes = infer_access_regions(body, None, var_ranges=ranges)
    return BlockRealize((), TRUE, Block(name, (), reads, writes, body))


@schedule_primitive("loop_partition", tvm_inputs=("loop", "*factors"), tvm_attrs=("preserve_unit_iters",))
def loop_partition(
    sch: Schedule, loop: LoopRV, factors: list[ExprRV | int | None], preserve_unit_iters: bool = True
) -> list[LoopRV]:
    """Partition ``loop`` into consecutive loops of extents ``factors``; returns them.

    One factor may be ``None`` (the rest of the extent). The constant factors must sum to less
    than the extent; without a ``None`` the rest becomes one more loop (``[2, 64]`` on 128 gives
    2, 64 and 62). Loop ``k`` is named ``<loop><k>`` and runs over ``[start, start + size)``; each
    holds a copy of the body with its blocks renamed ``<block>_<loop><k>``, inside an opaque
    block ``<first block>_<loop><k>_partition``, and all of them inside an opaque block
    ``<first block>_<loop>_common`` (as TVM, so each part can be scheduled on its own).
    ``preserve_unit_iters=False`` binds the iterators of a part of extent 1 to its start.

    Rules: ``loop`` is serial, unannotated, starts at 0, has a constant extent and holds a
    block; factors are positive ints or ExprRVs with at most one ``None``.

    Before / after ``loop_partition(i, [2, None])`` on a 16-loop::

        for i in range(16):                  block B_i_common:
          block B: vi = i                      block B_i0_partition:
                                                 for i0 in range(2): block B_i0: vi = i0
                                               block B_i1_partition:
                                                 for i1 in range(2, 16): block B_i1: vi = i1
    """
    node = sch.get(loop)
    _check_rebuildable("loop_partition", node, "loop")
    extent = const_extent("loop_partition", node)
    sizes = _sizes(sch, factors, extent, node)
    blocks = [n.block.name for n in pre_order(node.body) if isinstance(n, BlockRealize)]
    if not blocks:
        raise ScheduleError(
            "loop_partition", f"{loop_name(node)} holds no block", argument="loop", nodes=[node]
        )
    idx = sch.index
    ranges = idx.var_ranges(node)
    name = node.loop_var.name
    taken = set(idx.realizes)
    parts: list[Stmt] = []
    new_vars: list[Var] = []
    start = 0
    for k, size in enumerate(sizes):
        v = Var(f"{name}{k}", node.loop_var.dtype)
        new_vars.append(v)
        body = _renamed(_fresh_copy(node.body), f"{name}{k}", taken)
        bind = v if size != 1 or preserve_unit_iters else IntImm(start)
        inner = {**ranges, v: Range(IntImm(start), IntImm(size))}
        body = _narrowed(rebind(body, {node.loop_var: bind}, inner), v, Range(IntImm(start), IntImm(size)))
        part = node.with_(loop_var=v, min=IntImm(start), extent=IntImm(size), body=body)
        parts.append(_opaque(_fresh(f"{blocks[0]}_{name}{k}_partition", taken), part, ranges))
        start += size
    common = _opaque(_fresh(f"{blocks[0]}_{name}_common", taken), seq(*parts), ranges)
    sch.replace(node, common)
    return [sch.new_rv(LoopRV, v) for v in new_vars]


__all__ = ["loop_partition"]
