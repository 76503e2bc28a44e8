"""Padding: ``can_decompose_padding`` (a query) and ``pad_einsum`` (TVM 0.27).

``pad_einsum`` rounds a block's iteration domain up to multiples (127 -> 128), so that later
tiling divides evenly: the buffers it reads along a padded iterator are copied into zero-padded
buffers first, and what it writes goes to a padded buffer copied back (the original extent only)
after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import ScheduleError
from ...ir.buffer import Buffer
from ...ir.expr import LT, Add, BufferLoad, Expr, IntImm, Mul, Select, Var, const
from ...ir.functor import pre_order, replace_buffers
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
    make_for,
    seq,
)
from ...ir.structural import structural_equal
from ..instruction import schedule_primitive
from ..rewrite import conjoin
from ..rv import BlockRV, LoopRV
from .block_scope import buffer_names, fresh_name
from .cache import allocate, point_region
from .cache_variants import block_scope_name, loop_chain
from .layout import decompose_padding

if TYPE_CHECKING:
    from ..schedule import Schedule


@schedule_primitive("can_decompose_padding", pure=True)
def can_decompose_padding(sch: Schedule, block: BlockRV, loop: LoopRV) -> bool:
    """Whether ``decompose_padding(block, loop)`` would succeed; changes nothing.

    It tries ``decompose_padding`` on a copy of the schedule, so the answer follows that
    primitive's rules exactly. TVM does not trace this query; workbench records it as a pure
    instruction (``Trace.simplified`` drops it), as its other queries.

    ``can_decompose_padding(P, i)`` on a block ``P[vi] = if_then_else(1 <= vi < 9, A[vi - 1], 0)``
    gives True; on a block without that pattern, False.
    """
    trial = sch.copy()
    try:
        decompose_padding(trial, block, loop)
    except ScheduleError:
        return False
    return True


# ------------------------------------------------------------------------------------------
# pad_einsum


def _refuse(block: Block, why: str, argument: str = "block") -> ScheduleError:
    return ScheduleError("pad_einsum", f"block {block.name!r} {why}", argument=argument, nodes=[block])


def _accesses(block: Block) -> dict[Buffer, tuple[Expr, ...]]:
    """buffer -> the one index tuple the block uses for it (the einsum pattern: each index an
    iterator or a constant)."""
    ivars = {iv.var for iv in block.iter_vars}
    out: dict[Buffer, tuple[Expr, ...]] = {}
    for part in (block.init, block.body):
        for n in pre_order(part) if part is not None else ():
            if not isinstance(n, (BufferLoad, BufferStore)):
                continue
            for i in n.indices:
                if not (isinstance(i, IntImm) or (isinstance(i, Var) and i in ivars)):
                    raise _refuse(
                        block,
                        f"indexes {n.buffer.name} with {i}: pad_einsum needs each index to be an "
                        f"iterator or a constant (the Einsum pattern)",
                    )
            seen = out.setdefault(n.buffer, n.indices)
            if not all(structural_equal(a, b, map_free_vars=False) for a, b in zip(seen, n.indices)):
                raise _refuse(block, f"accesses {n.buffer.name} at {list(seen)} and at {list(n.indices)}")
    return out


def _factors(e: Expr) -> list[Expr]:
    return _factors(e.a) + _factors(e.b) if isinstance(e, Mul) else [e]


@schedule_primitive("pad_einsum", tvm_inputs=("block",), tvm_attrs=("padding",))
def pad_einsum(sch: Schedule, block: BlockRV, padding: list[int]) -> None:
    """Pad the iteration domain of ``block`` up to multiples of ``padding`` (one per iterator:
    127 -> 128 for 32), with copies that keep every access in bounds.

    Each buffer the block reads along a padded iterator is copied first into ``<buffer>_pad``
    (``if_then_else(v < extent, X[v], 0)``), each it writes along one goes to ``<buffer>_pad``
    and a block ``<buffer>_pad`` copies the original extent back after the block; buffers no
    padded iterator indexes are left alone. The block's loops grow to the padded extents.

    Rules: the block's loops are its own (each loop holds only the next and binds one iterator
    directly, from 0, constant extent), without a predicate; every access is the Einsum pattern
    (each index an iterator or a constant, one index tuple per buffer); a written buffer is
    indexed by iterators only, and read back only through an ``init``; ``padding`` has one
    positive int per iterator. A padded reduction iterator must add nothing on the padding:
    the update is ``C = C + a * b * …`` with a factor read from a padded copy along that
    iterator (zero there). TVM does not check this last rule: a padded ``max`` reduction
    would take the padding's zeros into account.

    Before / after ``pad_einsum(C, [32, 32, 32])`` on a 127 x 127 x 127 matmul::

        for i, j, k in T.grid(127, 127, 127):   for i0, i1 in T.grid(128, 128): block A_pad:
          block C:                                A_pad[v0, v1] = if_then_else(v0 < 127 and
            C[i, j] += A[i, k] * B[k, j]                            v1 < 127, A[v0, v1], 0)
                                                (B_pad the same)
                                                for i, j, k in T.grid(128, 128, 128): block C:
                                                  C_pad[i, j] += A_pad[i, k] * B_pad[k, j]
                                                for i0, i1 in T.grid(127, 127): block C_pad:
                                                  C[v0, v1] = C_pad[v0, v1]
    """
    node = sch.get(block)
    n_iter = len(node.iter_vars)
    if (
        not isinstance(padding, (list, tuple))
        or len(padding) != n_iter
        or any(isinstance(p, bool) or not isinstance(p, int) or p <= 0 for p in padding)
    ):
        raise _refuse(
            node,
            f"has {n_iter} iterators; padding must be {n_iter} positive ints, got {padding!r}",
            "padding",
        )
    idx = sch.index
    realize = idx.realizes[node.name]
    top, chain = loop_chain("pad_einsum", sch, node)
    if not structural_equal(realize.predicate, TRUE):
        raise _refuse(node, f"has the predicate {realize.predicate}")
    by_var = {l.loop_var: l for l in chain}
    loops: list[For] = []
    for iv, value in zip(node.iter_vars, realize.iter_values):
        loop = by_var.get(value) if isinstance(value, Var) else None
        if (
            loop is None
            or loop in loops
            or not isinstance(iv.dom.min, IntImm)
            or iv.dom.min.value != 0
            or not structural_equal(loop.min, iv.dom.min)
            or not structural_equal(loop.extent, iv.dom.extent)
            or not isinstance(iv.dom.extent, IntImm)
        ):
            raise _refuse(
                node,
                f"binds iterator {iv.var.name!r} to {value}: pad_einsum needs each iterator bound "
                f"to a loop of its own (from 0, of the iterator's constant extent) right above the block",
            )
        loops.append(loop)
    if len(chain) != n_iter:
        raise _refuse(
            node, "has loops above it that bind no iterator (pad_einsum needs the block's own loops)"
        )
    old = {iv.var: iv.dom.extent.value for iv in node.iter_vars}
    new = {iv.var: -(-old[iv.var] // p) * p for iv, p in zip(node.iter_vars, padding)}
    padded = {v for v in old if new[v] != old[v]}
    if not padded:
        return None
    accesses = _accesses(node)
    written = {r.buffer for r in node.writes}
    copies: dict[Buffer, Buffer] = {}
    taken_buffers = buffer_names(sch.func)
    # reads first, in the block's order, then what it writes (TVM's order of the copies)
    order = [r.buffer for r in node.reads if r.buffer not in written] + [r.buffer for r in node.writes]
    order += [b for b in accesses if b not in order]
    for buf in order:
        indices = accesses.get(buf)
        if indices is None or not any(isinstance(i, Var) and i in padded for i in indices):
            continue
        if buf in written and not all(isinstance(i, Var) for i in indices):
            raise _refuse(
                node,
                f"writes {buf.name} at constant indices {list(indices)}; pad_einsum pads "
                f"written buffers indexed by iterators only",
            )
        shape = tuple(new[i] if isinstance(i, Var) else s for i, s in zip(indices, buf.shape))
        copies[buf] = Buffer(fresh_name(f"{buf.name}_pad", taken_buffers), shape, buf.dtype, buf.scope)
        taken_buffers.add(copies[buf].name)
    for buf in written & set(copies):
        if node.init is None and any(
            isinstance(n, BufferLoad) and n.buffer is buf for n in pre_order(node.body)
        ):
            raise _refuse(
                node,
                f"reads the earlier values of {buf.name} (it has no init); its padded copy "
                f"would start without them",
            )
    reductions = [iv.var for iv in node.iter_vars if iv.iter_type != SPATIAL and iv.var in padded]
    if reductions:
        _check_zero_padding(node, reductions, accesses, copies)
    # the stages
    taken_blocks = set(idx.realizes)
    before: list[Stmt] = []
    after: list[Stmt] = []
    for buf, pad in copies.items():
        name = fresh_name(f"{buf.name}_pad", taken_blocks)
        taken_blocks.add(name)
        indices = accesses[buf]
        if buf in written:
            extents = [old[i] for i in indices]
            after.append(_copy_nest(name, pad, buf, extents, None))
        else:
            limits = [old[i] if isinstance(i, Var) and i in padded else None for i in indices]
            before.append(_copy_nest(name, buf, pad, list(pad.shape), limits))
    ivs = tuple(IterVar(iv.var, Range.from_extent(new[iv.var]), iv.iter_type) for iv in node.iter_vars)
    body = replace_buffers(node, copies).with_(iter_vars=ivs)
    nest: Stmt = BlockRealize(realize.iter_values, TRUE, body)
    for l in reversed(chain):
        nest = l.with_(extent=IntImm(new[node.iter_vars[loops.index(l)].var]), body=nest)
    sch.replace(top, seq(*before, nest, *after))
    for pad in copies.values():
        allocate(sch, block_scope_name(idx, node), pad)
    return None


def _check_zero_padding(
    block: Block, reductions: list[Var], accesses: dict[Buffer, tuple[Expr, ...]], copies: dict
) -> None:
    store = block.body
    update = store.value if isinstance(store, BufferStore) else None
    if not (
        isinstance(store, BufferStore)
        and isinstance(update, Add)
        and isinstance(update.a, BufferLoad)
        and update.a.buffer is store.buffer
    ):
        raise _refuse(
            block,
            f"pads reduction iterator(s) {[v.name for v in reductions]} but its update is not "
            f"`C = C + a * b * ...`: the padding's zeros could change the result",
        )
    factors = _factors(update.b)
    for v in reductions:
        if not any(
            isinstance(f, BufferLoad) and f.buffer in copies and any(i is v for i in accesses[f.buffer])
            for f in factors
        ):
            raise _refuse(
                block,
                f"pads reduction iterator {v.name!r} but no factor of the update reads a padded "
                f"buffer along it: the padding would add nonzero terms",
            )


def _copy_nest(name: str, src: Buffer, dst: Buffer, extents: list[int], limits: Any) -> Stmt:
    """Loops ``i0 …`` over ``extents`` around block ``name`` copying ``src`` to ``dst``
    elementwise; ``limits``: per axis, the bound past which a zero is stored instead."""
    ivs = tuple(IterVar(Var(f"v{d}"), Range.from_extent(e), SPATIAL) for d, e in enumerate(extents))
    at = tuple(iv.var for iv in ivs)
    value: Expr = BufferLoad(src, at)
    if limits is not None:
        cond: Expr = TRUE
        for v, lim in zip(at, limits):
            if lim is not None:
                cond = conjoin(cond, LT.make(v, IntImm(lim)))
        if not structural_equal(cond, TRUE):
            value = Select(cond, value, const(0, src.dtype))
    block = Block(name, ivs, (point_region(src, at),), (point_region(dst, at),), BufferStore(dst, value, at))
    loop_vars = [Var(f"i{d}") for d in range(len(extents))]
    nest: Stmt = BlockRealize(tuple(loop_vars), TRUE, block)
    for v, e in reversed(list(zip(loop_vars, extents))):
        nest = make_for(v, e, nest)
    return nest


__all__ = ["can_decompose_padding", "pad_einsum"]
