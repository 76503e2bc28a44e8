"""The LLVM function being filled (:class:`FunctionState`) and its stack slots (:func:`alloca`):
shared by the kernel emitter (:mod:`.emitter`) and the parallel tasks it outlines (:mod:`.parallel`).
"""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from . import intrinsics as K
from .dtypes import PTR


class FunctionState:
    """The LLVM function being filled: stack/heap allocations go to its entry block, so they
    happen once per call whatever loop the ``Allocate`` sits in."""

    def __init__(self, fn: ir.Function):
        self.fn = fn
        self.entry = ir.IRBuilder(fn.append_basic_block("entry"))
        self.builder = ir.IRBuilder(fn.append_basic_block("start"))
        self.heap: list[ir.Value] = []

    def finish(self, on_failure: Callable[[ir.IRBuilder], None], ret: Callable[[ir.IRBuilder], None]) -> None:
        """Close the function: entry checks heap allocations, every exit frees them."""
        start = self.fn.blocks[1]
        b = self.builder
        self.free_heap(b)
        ret(b)
        if not self.heap:
            self.entry.branch(start)
            return
        ok = None
        for p in self.heap:
            nonnull = self.entry.icmp_unsigned("!=", p, ir.Constant(PTR, None))
            ok = nonnull if ok is None else self.entry.and_(ok, nonnull)
        fail = ir.IRBuilder(self.fn.append_basic_block("alloc_failed"))
        self.entry.cbranch(ok, start, fail.block)
        self.free_heap(fail)
        on_failure(fail)

    def free_heap(self, b: ir.IRBuilder) -> None:
        if self.heap:
            free = K.declare(b.module, "free", ir.VoidType(), [PTR])
            for p in self.heap:
                b.call(free, [p])


def alloca(entry: ir.IRBuilder, t: ir.Type, name: str) -> ir.Value:
    """A 64-byte aligned stack slot of type ``t``, typed as an opaque ``ptr``."""
    slot = entry.alloca(t, name=name)
    slot.align = 64
    slot.type = PTR  # llvmlite types it as a typed pointer, which its store/gep checks reject
    return slot
