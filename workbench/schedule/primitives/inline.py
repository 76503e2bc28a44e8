"""Inlining: ``compute_inline`` (a producer into its consumers) and ``reverse_compute_inline``
(a consumer into its producer).

Both remove a block, its loops and the intermediate buffer between the two stages; the block
that absorbs the computation gets its read / write regions recomputed from its new body.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional, cast

import numpy as np

from ...errors import ScheduleError
from ...ir.arith import const_int_bound, simplify
from ...ir.buffer import Buffer
from ...ir.expr import GE, LT, And, BufferLoad, Expr, FloorDiv, FloorMod, IntImm, Var, is_const
from ...ir.func import PrimFunc
from ...ir.functor import free_vars, pre_order, substitute, transform
from ...ir.index_map import MAX_CHECKED_POINTS, IndexMap, _evaluate
from ...ir.region import infer_access_regions
from ...ir.stmt import TRUE, Block, BufferStore, For, Range
from ...ir.structural import structural_equal
from ..instruction import schedule_primitive
from ..rewrite import conjoin
from ..rv import BlockRV
from ...ir.index import index, replace_all
from .block_scope import (
    check_complete,
    check_in_scope,
    check_not_output,
    drop_allocation,
    producers,
    removal_root,
)

if TYPE_CHECKING:
    from ..schedule import Schedule


def _with_regions(block: Block) -> Block:
    """``block`` with its reads / writes recomputed from its body."""
    reads, writes = infer_access_regions(
        block.body,
        block.init,
        alloc_buffers=block.alloc_buffers,
        var_ranges={iv.var: iv.dom for iv in block.iter_vars},
    )
    return block.with_(reads=reads, writes=writes)


def _single_store(primitive: str, block: Block, role: str = "block") -> BufferStore:
    if not isinstance(block.body, BufferStore):
        raise ScheduleError(
            primitive,
            f"the body of {role} {block.name!r} is a {type(block.body).__name__}, not a single BufferStore",
            argument="block",
            nodes=[block],
        )
    return block.body


def _producer_store(primitive: str, block: Block) -> BufferStore:
    """The one store of a producer: its body, or the single store in a loop nest without
    blocks (the copy blocks of ``read_at`` / ``write_at``, as TVM allows)."""
    if isinstance(block.body, BufferStore):
        return block.body
    stores = [n for n in pre_order(block.body) if isinstance(n, BufferStore)]
    nested = any(isinstance(n, Block) for n in pre_order(block.body))
    if len(stores) != 1 or nested:
        return _single_store(primitive, block, role="producer")
    return stores[0]


def _replace_loads(node: Any, buffer: Buffer, fn) -> Any:
    """``node`` with every load of ``buffer`` replaced by ``fn(load)`` (loads rebuilt first)."""

    def post(n: Any) -> Any:
        return fn(n) if type(n) is BufferLoad and n.buffer is buffer else n

    return transform(node, post)


def _reader_names(func: PrimFunc, buffer: Buffer, skip: Block) -> list[str]:
    return [b.name for b in func.blocks() if b is not skip and any(r.buffer is buffer for r in b.reads)]


# ------------------------------------------------------------------------------------------
# compute_inline


def compute_inline_func(func: PrimFunc, block: Block, primitive: str = "compute_inline") -> PrimFunc:
    """``func`` with ``block`` inlined into its consumers; raises ScheduleError when invalid."""
    idx = index(func)
    check_in_scope(primitive, idx, block)
    check_not_output(primitive, func, block)
    check_complete(primitive, idx, block)
    store = _single_store(primitive, block)
    ivars = [iv.var for iv in block.iter_vars]
    seen: list[Var] = []
    for k, i in enumerate(store.indices):
        if not (isinstance(i, Var) and i in ivars) or i in seen:
            raise ScheduleError(
                primitive,
                f"block {block.name!r} stores {store.buffer.name} at "
                f"index {k} = {i}; each index must be a distinct iterator of the "
                f"block",
                argument="block",
                nodes=[block],
            )
        seen.append(i)
    stray = (free_vars(store.value) & set(ivars)) - set(seen)
    if stray:
        raise ScheduleError(
            primitive,
            f"block {block.name!r} computes its value from iterators "
            f"{sorted(v.name for v in stray)} that do not index "
            f"{store.buffer.name}",
            argument="block",
            nodes=[block],
        )
    removed = removal_root(primitive, idx, block)
    buffer = store.buffer

    # every store index was checked above to be a Var
    store_vars = cast("tuple[Var, ...]", store.indices)

    def inline(load: BufferLoad) -> Expr:
        return substitute(store.value, dict(zip(store_vars, load.indices)))

    def post(n: Any) -> Any:
        if type(n) is BufferLoad and n.buffer is buffer:
            return inline(n)
        if type(n) is Block and any(r.buffer is buffer for r in n.reads):
            return _with_regions(n)
        return n

    func = replace_all(func, {removed: None})
    func = func.with_body(transform(func.body, post))
    return drop_allocation(func, buffer)


@schedule_primitive("compute_inline", tvm_inputs=("block",))
def compute_inline(sch: Schedule, block: BlockRV) -> None:
    """Inline ``block`` into every block that reads its output, then remove it, its loops and
    its buffer.

    Rules: ``block`` is a complete block (spatial iterators only, no init, the only writer of
    its buffer, not reading it) that writes no function parameter; its body is one store whose
    indices are distinct iterators, and its value uses no other iterator; it is not alone in
    its scope.

    Before / after ``compute_inline(B)``::

        for i, j in T.grid(4, 8):            for i, j in T.grid(4, 8):
          block B: vi, vj = i, j                block C: vi, vj = i, j
            B[vi, vj] = A[vi, vj] * 2             C[vi, vj] = A[vi, vj] * 2 + 1
        for i, j in T.grid(4, 8):
          block C: vi, vj = i, j
            C[vi, vj] = B[vi, vj] + 1
    """
    sch.func = compute_inline_func(sch.func, sch.get(block))


# ------------------------------------------------------------------------------------------
# reverse_compute_inline


def reverse_compute_inline_func(
    func: PrimFunc, block: Block, primitive: str = "reverse_compute_inline"
) -> PrimFunc:
    """``func`` with consumer ``block`` inlined into its producer; raises ScheduleError."""
    idx = index(func)
    check_in_scope(primitive, idx, block)
    check_complete(primitive, idx, block)
    store = _single_store(primitive, block)
    if not is_const(idx.realizes[block.name].predicate, 1):
        # the guard is over the consumer's loops, which disappear
        raise ScheduleError(
            primitive,
            f"block {block.name!r} has a predicate (T.where); only an unconditional consumer "
            f"can be inlined into its producer",
            argument="block",
            nodes=[block],
        )
    prods = producers(idx, block)
    if len(prods) != 1:
        raise ScheduleError(
            primitive,
            f"block {block.name!r} has {len(prods)} producer blocks "
            f"{[b.name for b in prods]}; {primitive} needs exactly one",
            argument="block",
            nodes=[block, *prods],
        )
    producer = prods[0]
    check_complete(primitive, idx, producer, role="producer")
    pstore = _producer_store(primitive, producer)
    buffer = pstore.buffer
    if buffer in func.params:
        raise ScheduleError(
            primitive,
            f"producer {producer.name!r} writes the function "
            f"parameter {buffer.name}, which must keep its value",
            argument="block",
            nodes=[producer],
        )
    others = [n for n in _reader_names(func, buffer, block) if n != producer.name]
    if others:
        raise ScheduleError(
            primitive,
            f"{buffer.name} is also read by blocks {others}; only "
            f"the single consumer of a buffer can be inlined into its producer",
            argument="block",
            nodes=[block],
        )
    loads = [n for n in pre_order(store) if type(n) is BufferLoad and n.buffer is buffer]
    at = loads[0].indices if loads else ()
    if not loads or any(
        not all(structural_equal(a, b, map_free_vars=False) for a, b in zip(at, ld.indices))
        for ld in loads[1:]
    ):
        raise ScheduleError(
            primitive,
            f"block {block.name!r} must read {buffer.name} at one "
            f"and the same index, {len(loads)} distinct reads found",
            argument="block",
            nodes=[block],
        )
    realize = idx.realizes[producer.name]
    inner = _inner_loops(producer, pstore)
    # ranges of the producer's iterators (and of the loops inside it that hold its store)
    pranges = {iv.var: iv.dom for iv in producer.iter_vars}
    pranges.update({loop.loop_var: Range(loop.min, loop.extent) for loop in inner})
    vmap = _identity_vmap(block, buffer, at, pstore)
    guard: Expr = TRUE
    if vmap is not None:
        _check_covers(primitive, block, producer, pstore, pranges)
    else:
        vmap, guard = _affine_vmap(primitive, block, producer, pstore, buffer, at, pranges)
    if not is_const(guard, 1) and inner:
        raise ScheduleError(
            primitive,
            f"block {block.name!r} covers part of what producer {producer.name!r} computes, and "
            f"the producer stores from loops inside its block, where no guard can be placed",
            argument="block",
            nodes=[block, producer],
        )

    def index_of(e: Expr) -> Expr:
        e = substitute(e, vmap)
        # a bare iterator stays itself (a unit iterator is not folded to its constant, as TVM)
        return e if isinstance(e, (Var, IntImm)) else simplify(e, pranges)

    def rebuild(n: Any) -> Any:
        if type(n) is BufferLoad and n.buffer is buffer:
            return pstore.value
        if type(n) is BufferLoad:
            return BufferLoad(n.buffer, tuple(index_of(i) for i in n.indices))
        return substitute(n, vmap) if isinstance(n, Var) else n

    # the value keeps its arithmetic as written (no reassociation of float operations)
    value = transform(store.value, rebuild)
    new_store = BufferStore(store.buffer, value, tuple(index_of(i) for i in store.indices))
    body = transform(producer.body, lambda n: new_store if n is pstore else n)
    new_producer = _with_regions(producer.with_(body=body))
    new_realize = realize.with_(block=new_producer)
    if not is_const(guard, 1):
        # the guard over the producer's iterators, as a predicate over its loops
        binding = dict(zip([iv.var for iv in producer.iter_vars], realize.iter_values))
        outer = simplify(substitute(guard, binding), idx.var_ranges(realize))
        new_realize = new_realize.with_(predicate=_conjoin_new(realize.predicate, outer))
    removed = removal_root(primitive, idx, block)
    func = replace_all(func, {removed: None, realize: new_realize})
    return drop_allocation(func, buffer)


def _inner_loops(producer: Block, pstore: BufferStore) -> list[For]:
    """The loops inside ``producer``'s block that enclose its store (copy blocks)."""
    out = []
    node: Any = producer.body
    while isinstance(node, For):
        out.append(node)
        node = node.body
    return out if node is pstore else []


def _conjoin_new(old: Expr, new: Expr) -> Expr:
    """``old and new`` without repeating a conjunct ``old`` already has."""
    have = []
    stack = [old]
    while stack:
        e = stack.pop()
        if isinstance(e, And):
            stack += [e.a, e.b]
        else:
            have.append(e)
    parts = []
    stack = [new]
    while stack:
        e = stack.pop()
        if isinstance(e, And):
            stack += [e.b, e.a]
        elif not any(structural_equal(e, h, map_free_vars=False) for h in have):
            parts.append(e)
    out = old
    for e in parts:
        out = conjoin(out, e)
    return out


def _identity_vmap(block: Block, buffer: Buffer, at: tuple, pstore: BufferStore) -> Optional[dict]:
    """The consumer's iterators as the load's indices when it reads ``buffer`` at distinct
    iterators each spanning its whole dimension and uses no other iterator (any shapes,
    symbolic ones too); None otherwise."""
    doms = {iv.var: iv.dom for iv in block.iter_vars}
    for d, i in enumerate(at):
        if not isinstance(i, Var) or i not in doms or i in at[:d]:
            return None
        n = buffer.shape[d]
        same = is_const(doms[i].extent, n) if isinstance(n, int) else structural_equal(doms[i].extent, n)
        if not (is_const(doms[i].min, 0) and same):
            return None
    if free_vars(block.body) & (set(doms) - set(at)):
        return None
    return dict(zip(at, pstore.indices))


def _check_covers(primitive: str, block: Block, producer: Block, pstore: BufferStore, pranges: dict) -> None:
    """Refuse a producer that provably stores only part of what the consumer reads whole
    (the consumer's other instances would read what was never written; TVM refuses too)."""
    for d, (i, n) in enumerate(zip(pstore.indices, pstore.buffer.shape)):
        n = n.value if isinstance(n, IntImm) else n
        lo, hi = const_int_bound(i, pranges)
        if isinstance(n, int) and lo is not None and hi is not None and (lo > 0 or hi < n - 1):
            raise ScheduleError(
                primitive,
                f"producer {producer.name!r} stores {pstore.buffer.name} only at [{lo}, {hi}] in "
                f"dimension {d}, and block {block.name!r} reads all of [0, {n})",
                argument="block",
                nodes=[block, producer],
            )


def _affine_vmap(
    primitive: str,
    block: Block,
    producer: Block,
    pstore: BufferStore,
    buffer: Buffer,
    at: tuple,
    pranges: dict,
) -> tuple[dict, Expr]:
    """The consumer's iterators as expressions of the producer's, inverting the consumer's
    load indices (an affine map of its iterators: splits, fuses, reorders, unit iterators), and
    the guard that keeps the producer to the instances the consumer had.

    The inverse is then checked by evaluating it at every producer instance: each consumer
    instance must come from exactly one producer instance that stores the element it read."""

    def refuse(why: str) -> ScheduleError:
        return ScheduleError(
            primitive,
            f"block {block.name!r} reads {buffer.name}[{', '.join(map(str, at))}]: {why}",
            argument="block",
            nodes=[block, producer],
        )

    cvars = [iv.var for iv in block.iter_vars]
    extents = []
    for iv in block.iter_vars:
        if not (is_const(iv.dom.min, 0) and isinstance(iv.dom.extent, IntImm)):
            raise refuse(f"iterator {iv.var.name!r} ranges over {iv.dom}, not [0, constant)")
        extents.append(iv.dom.extent.value)
    try:
        imap = IndexMap(tuple(cvars), tuple(at))
    except ValueError as e:
        raise refuse(f"the indices are not an affine map of the block's iterators ({e})") from None
    inverse = _invert(imap, extents)
    if inverse is None:
        raise refuse(
            "the indices are not a one-to-one affine map of the block's iterators "
            "(splits, fuses and reorders of them), so no producer instance can be matched to "
            "each consumer instance"
        )
    cvals = list(inverse.map_indices(pstore.indices))
    for k, i in enumerate(at):
        # an iterator read as a whole index is the producer's index there (the same on every
        # instance the guard keeps, which the check below confirms), kept even when unit
        if isinstance(i, Var) and i not in at[:k]:
            cvals[cvars.index(i)] = pstore.indices[k]
    vmap = {v: e if isinstance(e, (Var, IntImm)) else simplify(e, pranges) for v, e in zip(cvars, cvals)}
    guard: Expr = TRUE
    for v, n in zip(cvars, extents):
        guard = conjoin(guard, simplify(And(GE(vmap[v], IntImm(0)), LT(vmap[v], IntImm(n))), pranges))
    guard = simplify(guard, pranges)
    problem = _check_one_to_one(imap, extents, pstore, pranges, [vmap[v] for v in cvars])
    if problem:
        raise refuse(problem)
    return vmap, guard


def _invert(imap: IndexMap, extents: list[int]) -> Optional[IndexMap]:
    """The inverse of ``imap`` on ``extents``, or on extents rounded up to a multiple of the
    divisors the map uses (a consumer over 127 of 128 rows, read at ``i // 16, i % 16``)."""
    divisors = [
        n.b.value
        for r in imap.results
        for n in pre_order(r)
        if isinstance(n, (FloorDiv, FloorMod)) and isinstance(n.b, IntImm)
    ]
    step = 1
    for d in divisors:
        step = step * d // math.gcd(step, d)
    for shape in (extents, [-(-e // step) * step for e in extents]):
        try:
            return imap.inverse(shape)[0]
        except ValueError:
            continue
    return None


def _check_one_to_one(
    imap: IndexMap, extents: list[int], pstore: BufferStore, pranges: dict, cvals: list[Expr]
) -> Optional[str]:
    """Why the producer instances kept by the guard do not match the consumer instances one
    to one (None when they do): evaluated at every instance of the producer."""
    pvars = list(pranges)
    pext = []
    for v in pvars:
        r = pranges[v]
        if not (isinstance(r.min, IntImm) and isinstance(r.extent, IntImm)):
            return f"the producer's iterator {v.name!r} has a symbolic range {r}"
        pext.append((r.min.value, r.extent.value))
    total = int(np.prod([e for _, e in pext], dtype=np.int64))
    if total > MAX_CHECKED_POINTS:
        return f"the producer has {total} instances, more than the {MAX_CHECKED_POINTS} checked"
    grid = np.indices([e for _, e in pext], dtype=np.int64).reshape(len(pext), -1)
    env = {v: grid[k] + lo for k, (v, (lo, _)) in enumerate(zip(pvars, pext))}
    try:
        stored = [np.broadcast_to(_evaluate(e, env), (total,)) for e in pstore.indices]
        cons = [np.broadcast_to(_evaluate(e, env), (total,)) for e in cvals]
    except (TypeError, KeyError, ValueError):
        return "the producer's store indices are not integer arithmetic of its iterators"
    keep = np.ones(total, dtype=bool)
    for c, n in zip(cons, extents):
        keep &= (c >= 0) & (c < n)
    cenv = {v: c[keep] for v, c in zip(imap.params, cons)}
    read = [np.broadcast_to(_evaluate(r, cenv), (int(keep.sum()),)) for r in imap.results]
    if not all(np.array_equal(r, s[keep]) for r, s in zip(read, stored)):
        return "the inverse of the indices does not give back what the producer stores"
    flat = np.zeros(int(keep.sum()), dtype=np.int64)
    for c, n in zip(cons, extents):
        flat = flat * n + c[keep]
    want = int(np.prod(extents, dtype=np.int64))
    if len(np.unique(flat)) != len(flat) or len(flat) != want:
        return (
            f"the producer computes {len(np.unique(flat))} distinct of the block's {want} "
            f"instances ({len(flat)} times); every one must be computed exactly once"
        )
    return None


@schedule_primitive("reverse_compute_inline", tvm_inputs=("block",))
def reverse_compute_inline(sch: Schedule, block: BlockRV) -> None:
    """Inline consumer ``block`` into its single producer: the producer computes the
    consumer's value from its own and stores it where the consumer did; the consumer, its
    loops and the buffer between them disappear.

    Rules: ``block`` is a complete block without a predicate whose body is one store; it has
    exactly one producer block, itself complete with a single store, writing an intermediate
    buffer that nothing else reads; ``block`` reads that buffer at one index, a one-to-one
    affine map of its iterators (splits, fuses, reorders, unit iterators: TVM's
    ``test_reverse_compute_inline_affine_load``); the producer computes every element that
    ``block`` reads. When ``block`` reads only part of what the producer computes (a slice,
    127 of 128 rows), the producer gets a predicate keeping the instances ``block`` had, as TVM
    does. The consumer's iterators are solved from the producer's store indices by the
    inverse of that map, and the result is checked by evaluating it at every producer
    instance (each consumer instance must come from exactly one, storing the element it
    read); what fails the check is refused (a strided read ``B[2 * i]``: ``i = x // 2`` would
    also compute from ``B[3]``). Refused where TVM accepts: a consumer or producer over more
    than 2**21 instances whose map is not the identity (the check would be too slow), and a
    producer that computes some consumer instance twice.

    Before / after ``reverse_compute_inline(C)``::

        for i, j in T.grid(4, 8):            for i, j in T.grid(4, 8):
          block B: vi, vj = i, j                block B: vi, vj = i, j
            B[vi, vj] = A[vi, vj] * 2             C[vi, vj] = A[vi, vj] * 2 + 1
        for i, j in T.grid(4, 8):
          block C: vi, vj = i, j
            C[vi, vj] = B[vi, vj] + 1
    """
    sch.func = reverse_compute_inline_func(sch.func, sch.get(block))
