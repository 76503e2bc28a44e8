"""Queries: random variables for blocks and loops of the current function.

Queries change nothing, but they are recorded (pure instructions) so that a trace replayed on
a fresh schedule recreates the variables the later instructions use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ...errors import ScheduleError
from ...ir.stmt import Block
from ..instruction import py_value, schedule_primitive
from ..rv import BlockRV, LoopRV

if TYPE_CHECKING:
    from ..schedule import Schedule


def _render_get_block(inst, names) -> str:
    """TVM's text; ``func_name`` only where it was given (older traces never had it)."""
    parts = [f"name={py_value(inst.args['name'], names)}"]
    if inst.args.get("func_name") is not None:
        parts.append(f"func_name={py_value(inst.args['func_name'], names)}")
    return f"{names[inst.outputs[0]]} = sch.get_block({', '.join(parts)})"


@schedule_primitive(
    "get_block",
    pure=True,
    as_python=_render_get_block,
    tvm_name="GetSBlock",
    tvm_aliases=("GetBlock",),
    tvm_inputs=(),
    tvm_attrs=("name", "-func_name"),
)
def get_block(sch: Schedule, name: str, func_name: Optional[str] = None) -> BlockRV:
    """The block called ``name`` (block names are unique in a function; ``"root"`` included).

    ``func_name``: the function of a module it is in; the schedule then works on that function
    (as :meth:`Schedule.work_on`). A schedule of one function also accepts ``"main"`` for it
    (TVM's traces name the function of their IRModule so)."""
    funcs = sch._funcs
    if func_name is not None and not isinstance(func_name, str):
        raise ScheduleError("get_block", f"expected a function name, got {func_name!r}", argument="func_name")
    if func_name is not None and func_name not in funcs and not (func_name == "main" and len(funcs) == 1):
        raise ScheduleError(
            "get_block",
            f"no function named {func_name!r}: this schedule has {', '.join(map(repr, funcs))}"
            + (" (also called 'main')" if len(funcs) == 1 else ""),
            argument="func_name",
        )
    if func_name is not None and func_name in funcs and func_name != sch._func_name:
        target = sch.func if func_name == sch._func_name else funcs[func_name]
        if name not in {b.name for b in target.blocks()}:
            raise ScheduleError(
                "get_block",
                f"no block named {name!r} in {func_name}; blocks: "
                + ", ".join(b.name for b in target.blocks()),
                argument="name",
            )
        sch.work_on(func_name)
    if not isinstance(name, str):
        raise ScheduleError("get_block", f"expected a block name, got {name!r}", argument="name")
    if name not in sch.index.realizes:
        raise ScheduleError(
            "get_block",
            f"no block named {name!r} in {sch.func.name}; blocks: {', '.join(sch.index.realizes)}",
            argument="name",
        )
    return sch.new_rv(BlockRV, name)


@schedule_primitive("get_loops", pure=True, tvm_inputs=("block",))
def get_loops(sch: Schedule, block: BlockRV) -> list[LoopRV]:
    """The loops above ``block`` inside its block scope, outer to inner."""
    node = sch.get(block)
    return [sch.new_rv(LoopRV, loop.loop_var) for loop in sch.index.loops_above(node)]


@schedule_primitive("get_child_blocks", pure=True, tvm_inputs=("block_or_loop",))
def get_child_blocks(sch: Schedule, block_or_loop: BlockRV | LoopRV) -> list[BlockRV]:
    """The blocks directly under a block or a loop (not those nested in them), in order."""
    node = sch.get(block_or_loop)
    return [sch.new_rv(BlockRV, r.block.name) for r in sch.index.child_realizes(node)]


def _siblings(sch, block: Block) -> list[Block]:
    """The other blocks of ``block``'s scope (the blocks its scope block directly holds)."""
    idx = sch.index
    scope = idx.scope(block)
    if scope is None:
        return []
    return [r.block for r in idx.child_realizes(scope) if r.block is not block]


def _buffers(regions) -> set:
    return {r.buffer for r in regions}


@schedule_primitive("get_producers", pure=True, tvm_inputs=("block",))
def get_producers(sch: Schedule, block: BlockRV) -> list[BlockRV]:
    """Blocks of the same scope that write a buffer ``block`` reads, in program order."""
    node = sch.get(block)
    reads = _buffers(node.reads)
    return [sch.new_rv(BlockRV, b.name) for b in _siblings(sch, node) if _buffers(b.writes) & reads]


@schedule_primitive("get_consumers", pure=True, tvm_inputs=("block",))
def get_consumers(sch: Schedule, block: BlockRV) -> list[BlockRV]:
    """Blocks of the same scope that read a buffer ``block`` writes, in program order."""
    node = sch.get(block)
    writes = _buffers(node.writes)
    return [sch.new_rv(BlockRV, b.name) for b in _siblings(sch, node) if _buffers(b.reads) & writes]


@schedule_primitive("get_output_blocks", pure=True, tvm_inputs=("scope_block",))
def get_output_blocks(sch: Schedule, scope_block: BlockRV) -> list[BlockRV]:
    """The blocks under ``scope_block`` (nested ones included, in program order) that write a
    buffer their own scope block does not allocate: the blocks whose results leave their
    scope (for the root: the ones writing a function parameter), as in TVM.

    With ``B = T.alloc_buffer(...)`` in the root, blocks B (writes B) and C (writes the
    parameter C): ``get_output_blocks("root")`` is ``[C]``.
    """
    node = sch.get(scope_block)
    idx = sch.index
    out = []
    for realize in idx.realizes_under(idx.realizes[node.name]):
        scope = idx.scope(realize.block)
        allocated = set(scope.alloc_buffers) if scope is not None else set()
        if any(r.buffer not in allocated for r in realize.block.writes):
            out.append(sch.new_rv(BlockRV, realize.block.name))
    return out
