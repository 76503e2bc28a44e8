"""What the block primitives ask about a block's scope: dependencies, block classes, removal.

A *block scope* is the list of blocks directly under one block (usually ``root``), in program
order. Dependencies follow that order, as TVM's read-after-write and write-after-write edges: a
*producer* of B is an earlier block of the scope writing a buffer B reads or writes; a
*consumer* of B is a later block reading or writing a buffer B writes.

Block classes (TensorIR):

* *complete*: every iterator is spatial, no ``init``, it is the only writer of its outputs in
  the scope, and it reads none of the buffers it writes — each instance computes its outputs
  from scratch, so running an instance twice, or in another place, is harmless;
* *reduction*: spatial and reduce iterators, an ``init``, the only writer of its outputs, and
  the reduce iterators do not index the outputs.
"""

from __future__ import annotations

from typing import Optional

from ...errors import ScheduleError
from ...ir.buffer import Buffer
from ...ir.func import PrimFunc
from ...ir.functor import free_vars
from ...ir.stmt import REDUCE, SPATIAL, Block, For, SeqStmt, Stmt
from ...ir.index import FuncIndex, replace


def buffers(regions) -> set[Buffer]:
    return {r.buffer for r in regions}


def scope_blocks(idx: FuncIndex, block: Block) -> list[Block]:
    """The blocks of ``block``'s scope (``block`` included), in program order."""
    scope = idx.scope(block)
    if scope is None:
        return [block]
    return [r.block for r in idx.child_realizes(scope)]


def producers(idx: FuncIndex, block: Block) -> list[Block]:
    """Earlier blocks of the scope that write a buffer ``block`` reads or writes."""
    blocks = scope_blocks(idx, block)
    touched = buffers(block.reads) | buffers(block.writes)
    return [b for b in blocks[: blocks.index(block)] if buffers(b.writes) & touched]


def consumers(idx: FuncIndex, block: Block) -> list[Block]:
    """Later blocks of the scope that read or write a buffer ``block`` writes."""
    blocks = scope_blocks(idx, block)
    written = buffers(block.writes)
    return [b for b in blocks[blocks.index(block) + 1 :] if (buffers(b.reads) | buffers(b.writes)) & written]


def _other_writer(idx: FuncIndex, block: Block) -> Optional[str]:
    written = buffers(block.writes)
    for other in scope_blocks(idx, block):
        shared = buffers(other.writes) & written
        if other is not block and shared:
            return (
                f"is not the only writer of {sorted(b.name for b in shared)} in its scope "
                f"(block {other.name!r} writes it too)"
            )
    return None


def complete_problem(idx: FuncIndex, block: Block) -> Optional[str]:
    """Why ``block`` is not a complete block (None when it is)."""
    others = [iv.var.name for iv in block.iter_vars if iv.iter_type != SPATIAL]
    if others:
        return f"has non-spatial iterators {others}"
    if block.init is not None:
        return "has an init statement"
    both = buffers(block.reads) & buffers(block.writes)
    if both:
        return f"reads the buffers {sorted(b.name for b in both)} it writes"
    return _other_writer(idx, block)


def reduction_problem(idx: FuncIndex, block: Block) -> Optional[str]:
    """Why ``block`` is not a reduction block (None when it is)."""
    opaque = [iv.var.name for iv in block.iter_vars if iv.iter_type not in (SPATIAL, REDUCE)]
    if opaque:
        return f"has opaque iterators {opaque}"
    if block.init is None:
        return "has no init statement"
    reduce_vars = {iv.var for iv in block.iter_vars if iv.iter_type == REDUCE}
    for region in block.writes:
        used = set().union(*(free_vars(r) for r in region.region)) & reduce_vars
        if used:
            return (
                f"indexes its output {region.buffer.name} with reduce iterators "
                f"{sorted(v.name for v in used)}"
            )
    return _other_writer(idx, block)


def check_complete(
    primitive: str, idx: FuncIndex, block: Block, argument: str = "block", role: str = "block"
) -> None:
    problem = complete_problem(idx, block)
    if problem:
        raise ScheduleError(
            primitive,
            f"{role} {block.name!r} is not a complete block: it {problem}",
            argument=argument,
            nodes=[block],
        )


def check_complete_or_reduction(
    primitive: str, idx: FuncIndex, block: Block, argument: str = "block"
) -> None:
    # judge the block as the class its init suggests, to report the relevant problem
    is_reduction = block.init is not None
    problem = (reduction_problem if is_reduction else complete_problem)(idx, block)
    if problem:
        kind = "reduction" if is_reduction else "complete"
        raise ScheduleError(
            primitive,
            f"block {block.name!r} is neither a complete nor a "
            f"reduction block: as a {kind} block it {problem}",
            argument=argument,
            nodes=[block],
        )


def check_in_scope(primitive: str, idx: FuncIndex, block: Block, argument: str = "block") -> None:
    if idx.scope(block) is None:
        raise ScheduleError(
            primitive, "the root block cannot be moved or inlined", argument=argument, nodes=[block]
        )


def check_not_output(primitive: str, func: PrimFunc, block: Block, argument: str = "block") -> None:
    """Refuse a block that writes a function parameter (its result must stay where it is)."""
    outputs = buffers(block.writes) & set(func.params)
    if outputs:
        raise ScheduleError(
            primitive,
            f"block {block.name!r} is an output block: it writes the "
            f"function parameter(s) {sorted(b.name for b in outputs)}",
            argument=argument,
            nodes=[block],
        )


def removal_root(primitive: str, idx: FuncIndex, block: Block, argument: str = "block") -> Stmt:
    """The statement to delete to remove ``block``: its realize and the loops above it that
    hold nothing else. It always sits in a sequence (else nothing would be left in the scope)."""
    node: Stmt = idx.realizes[block.name]
    parent = idx.parent[node]
    while isinstance(parent, For):
        node, parent = parent, idx.parent[parent]
    if not isinstance(parent, SeqStmt):
        raise ScheduleError(
            primitive,
            f"block {block.name!r} is the only statement of its "
            f"scope; removing it would leave the scope empty",
            argument=argument,
            nodes=[block],
        )
    return node


def drop_allocation(func: PrimFunc, buffer: Buffer) -> PrimFunc:
    """``func`` without the allocation of ``buffer`` (which nothing uses any more)."""
    for block in func.blocks():
        if buffer in block.alloc_buffers:
            kept = tuple(b for b in block.alloc_buffers if b is not buffer)
            return replace(func, block, block.with_(alloc_buffers=kept))
    return func


def fresh_name(base: str, taken) -> str:
    """``base``, or ``base_1``, ``base_2`` … — the first not in ``taken`` (block or buffer names)."""
    taken = taken if isinstance(taken, (set, frozenset, dict)) else set(taken)
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


def buffer_names(func: PrimFunc) -> set[str]:
    """Names of the function's parameters and of every allocated buffer."""
    allocated = {b.name for blk in func.blocks() for b in blk.alloc_buffers}
    return {b.name for b in func.params} | allocated
