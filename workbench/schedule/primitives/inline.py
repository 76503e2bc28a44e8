"""Inlining: ``compute_inline`` (a producer into its consumers) and ``reverse_compute_inline``
(a consumer into its producer).

Both remove a block, its loops and the intermediate buffer between the two stages; the block
that absorbs the computation gets its read / write regions recomputed from its new body.
"""

from __future__ import annotations

from typing import Any, cast

from ...errors import ScheduleError
from ...ir.buffer import Buffer
from ...ir.expr import BufferLoad, Expr, Var, is_const
from ...ir.func import PrimFunc
from ...ir.functor import free_vars, pre_order, substitute, transform
from ...ir.region import infer_access_regions
from ...ir.stmt import Block, BufferStore
from ...ir.structural import structural_equal
from ..instruction import schedule_primitive
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


@schedule_primitive("compute_inline")
def compute_inline(sch, block: BlockRV) -> None:
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
    _check_injective(primitive, block, store, buffer, at)
    # the consumer's iterators, as functions of the producer's store indices
    vmap = dict(zip(cast("tuple[Var, ...]", at), pstore.indices))  # _check_injective: Vars
    value = _replace_loads(store.value, buffer, lambda _: pstore.value)
    new_store = BufferStore(
        store.buffer, substitute(value, vmap), tuple(substitute(i, vmap) for i in store.indices)
    )
    body = transform(producer.body, lambda n: new_store if n is pstore else n)
    new_producer = _with_regions(producer.with_(body=body))
    removed = removal_root(primitive, idx, block)
    func = replace_all(func, {removed: None, producer: new_producer})
    return drop_allocation(func, buffer)


def _check_injective(primitive: str, block: Block, store: BufferStore, buffer: Buffer, at: tuple) -> None:
    """The consumer reads the producer's buffer at distinct iterators spanning each dimension
    whole, and computes from nothing else: one consumer instance per producer instance."""
    doms = {iv.var: iv.dom for iv in block.iter_vars}
    for d, i in enumerate(at):
        if not isinstance(i, Var) or i not in doms or i in at[:d]:
            raise ScheduleError(
                primitive,
                f"block {block.name!r} reads {buffer.name} at index "
                f"{d} = {i}; each index must be a distinct iterator of the block",
                argument="block",
                nodes=[block],
            )
        dom = doms[i]
        if not (is_const(dom.min, 0) and is_const(dom.extent, buffer.shape[d])):
            raise ScheduleError(
                primitive,
                f"iterator {i.name!r} of block {block.name!r} ranges "
                f"over {dom}, not the whole extent {buffer.shape[d]} of "
                f"{buffer.name} in dimension {d}",
                argument="block",
                nodes=[block],
            )
    stray = free_vars(store) & (set(doms) - set(at))
    if stray:
        raise ScheduleError(
            primitive,
            f"block {block.name!r} uses iterators "
            f"{sorted(v.name for v in stray)} that do not index {buffer.name}",
            argument="block",
            nodes=[block],
        )


@schedule_primitive("reverse_compute_inline")
def reverse_compute_inline(sch, block: BlockRV) -> None:
    """Inline consumer ``block`` into its single producer: the producer computes the
    consumer's value from its own and stores it where the consumer did; the consumer, its
    loops and the buffer between them disappear.

    Rules: ``block`` is a complete block whose body is one store; it has exactly one producer
    block, itself complete with a single store, writing an intermediate buffer that nothing
    else reads; ``block`` reads that buffer at one index made of distinct iterators, each
    spanning its dimension, and uses no other iterator.

    Before / after ``reverse_compute_inline(C)``::

        for i, j in T.grid(4, 8):            for i, j in T.grid(4, 8):
          block B: vi, vj = i, j                block B: vi, vj = i, j
            B[vi, vj] = A[vi, vj] * 2             C[vi, vj] = A[vi, vj] * 2 + 1
        for i, j in T.grid(4, 8):
          block C: vi, vj = i, j
            C[vi, vj] = B[vi, vj] + 1
    """
    sch.func = reverse_compute_inline_func(sch.func, sch.get(block))
