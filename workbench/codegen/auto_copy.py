"""Lowering of ``auto_copy`` blocks: the threads of a GPU block share the copy (TVM's
LowerAutoCopy, the cooperative part of its "memhammer").

``read_at`` / ``write_at`` (the Use-Tensor-Core space) make copy blocks annotated
``auto_copy`` whose body is a plain loop nest over the copied region. Under GPU thread loops,
each thread would copy the whole region: correct, but every thread writes every element of a
shared (or global) tile — a race, and ``threads`` times the work. This pass, run before the
blocks are lowered away, rewrites the body of each such copy into shared (or global) memory:
the region's elements are dealt round-robin to the threads the region does not depend on (the
``threadIdx`` loops above whose variables its indices do not use), plus a warp's lanes under
the root annotation ``warp_execution`` (a new ``threadIdx.x`` loop of the warp size), with
``vector_bytes`` (an annotation of the block) worth of elements per thread and step::

    block A_shared (auto_copy, vector_bytes=16):     for o in range(E / (T * 8)):
      for ax0, ax1 in grid(64, 32):                    for tx in thread_binding(32, "threadIdx.x"):
        A_shared[..ax0.., ..ax1..] = A[...]              for v in vectorized(8):
                                                           f = (o * T + ty * 32 + tx) * 8 + v
                                                           A_shared[..f // 32.., ..f % 32..] = A[...]

Copies into or out of wmma fragments (``wmma.matrix_a`` / ``wmma.matrix_b`` from shared memory,
``wmma.accumulator`` to shared or global memory) become loops over 16 x 16 tiles, each tile a
loop pair annotated ``{"wmma": "load_matrix_a" | "load_matrix_b" | "store"}`` that the CUDA
backend prints as one warp-wide ``load_matrix_sync`` / ``store_matrix_sync``. Copies into
``local`` memory are left alone: each thread needs the whole tile.
"""

from __future__ import annotations

import math
from typing import Optional, cast

from ..ir.arith import simplify
from ..ir.buffer import Buffer
from ..ir.expr import LT, FloorDiv, FloorMod, IntImm, Var
from ..ir.func import PrimFunc
from ..ir.functor import free_vars, substitute
from ..ir.index import index, replace_all
from ..ir.stmt import Block, BufferStore, For, ForKind, IfThenElse, Range, Stmt, make_for

AUTO_COPY = "auto_copy"
VECTOR_BYTES = "vector_bytes"
WARP_EXECUTION = "warp_execution"
#: scopes a whole thread block shares: a copy into them is split among the threads
COOPERATIVE_SCOPES = ("shared", "shared.dyn", "global")


def lower_auto_copy(func: PrimFunc, warp_size: int = 32) -> PrimFunc:
    """``func`` with each cooperative ``auto_copy`` block's loop nest spread over the threads
    (see the module docstring); unchanged when there is none."""
    idx = index(func)
    lanes = warp_size if func.root.annotations.get(WARP_EXECUTION) else 0
    changes: dict[Stmt, Optional[Stmt]] = {}
    layouts = _b_layouts(func)
    for realize in idx.realizes.values():
        block = realize.block
        if not block.annotations.get(AUTO_COPY) or len(block.writes) != 1:
            continue
        op = _wmma_op(block)
        if op is not None:
            body = _tiles(block, op, layouts.get(block.writes[0].buffer, "row_major"))
            if body is not None:
                changes[block] = _lowered(block, body)
            continue
        if block.writes[0].buffer.scope not in COOPERATIVE_SCOPES:
            continue
        bindings = dict(zip((iv.var for iv in block.iter_vars), realize.iter_values))
        used = set().union(*(free_vars(substitute(r.min, bindings)) for r in block.writes[0].region))
        threads = [
            l
            for l in idx.ancestors(realize)
            if isinstance(l, For)
            and l.kind == ForKind.THREAD_BINDING
            and (l.thread_tag or "").startswith("threadIdx")
        ]
        has_x = any(l.thread_tag == "threadIdx.x" for l in threads)
        shared_by = sorted(
            (l for l in threads if l.loop_var not in used),
            key=lambda l: cast(str, l.thread_tag),  # all tagged threadIdx.*
            reverse=True,
        )  # z, y, x: x fastest
        extra = Var("tx") if lanes and not has_x else None
        if not shared_by and extra is None:
            continue
        body = _spread(block, shared_by, extra, lanes)
        if body is not None:
            changes[block] = _lowered(block, body)
    return replace_all(func, changes) if changes else func


def _lowered(block: Block, body) -> Block:
    """``block`` with its new body, no longer ``auto_copy`` (a second pass leaves it alone)."""
    annotations = {k: v for k, v in block.annotations.items() if k != AUTO_COPY}
    return block.with_(body=body, annotations=annotations)


def _wmma_op(block: Block):
    """``load_matrix_a`` / ``load_matrix_b`` / ``store`` for a copy into or out of a wmma
    fragment, else None."""
    src, dst = block.reads[0].buffer.scope, block.writes[0].buffer.scope
    if dst in ("wmma.matrix_a", "wmma.matrix_b"):
        return "load_" + dst.split(".")[1]
    if src == "wmma.accumulator":
        return "store"
    return None


def _b_layouts(func: PrimFunc) -> dict:
    """matrix_b fragment buffer -> the layout the mma_sync blocks reading it expect."""
    out = {}
    for block in func.blocks():
        if block.annotations.get("wmma") == "mma_sync":
            for r in block.reads:
                if r.buffer.scope == "wmma.matrix_b":
                    out[r.buffer] = block.annotations.get("wmma.layout", "row_major")
    return out


def _tiles(block: Block, op: str, layout: str):
    """The copy nest as 16 x 16 tiles, each the loop pair the backend prints as one wmma
    load / store (``{"wmma": op}`` on the tile's outer loop); None unless the copy is a
    2-D nest of constant multiples of 16."""
    loops, node = [], block.body
    while isinstance(node, For):
        loops.append(node)
        node = node.body
    extents = [l.extent.value if isinstance(l.extent, IntImm) else 0 for l in loops]
    if len(loops) != 2 or not isinstance(node, BufferStore) or any(e % 16 or e == 0 for e in extents):
        return None
    outer = [Var(f"{l.loop_var.name}_o") for l in loops]
    inner = [Var(f"{l.loop_var.name}_i") for l in loops]
    vmap = {l.loop_var: o * 16 + i for l, o, i in zip(loops, outer, inner)}
    ranges = {v: Range.from_extent(16) for v in inner}
    ranges.update({o: Range.from_extent(e // 16) for o, e in zip(outer, extents)})
    store = BufferStore(
        node.buffer,
        substitute(node.value, vmap),
        tuple(simplify(substitute(i, vmap), ranges) for i in node.indices),
    )
    tile = make_for(
        inner[0], 16, make_for(inner[1], 16, store), annotations={"wmma": op, "wmma.layout": layout}
    )
    return make_for(outer[0], extents[0] // 16, make_for(outer[1], extents[1] // 16, tile))


def _spread(block: Block, threads: list, lane: Var | None, lanes: int):
    """The block's copy nest dealt over ``threads`` (and a new lane loop), or None when the
    body is not a constant loop nest around one store."""
    loops, node = [], block.body
    while isinstance(node, For):
        if not isinstance(node.extent, IntImm) or not (isinstance(node.min, IntImm) and node.min.value == 0):
            return None
        loops.append(node)
        node = node.body
    if not loops or not isinstance(node, BufferStore):
        return None
    store = node
    extents = [cast(IntImm, l.extent).value for l in loops]  # checked above
    total = math.prod(extents)
    parts = [(l.loop_var, l.extent.value) for l in threads]
    if lane is not None:
        parts.append((lane, lanes))
    n_threads = math.prod(e for _, e in parts)
    vec = _vector_lanes(block, store.buffer, total, n_threads)
    tid = IntImm(0)
    for var, extent in parts:
        tid = tid * extent + var
    outer, v = Var("o"), Var("v")
    flat = (outer * n_threads + tid) * vec + v
    ranges = {var: Range.from_extent(e) for var, e in parts}
    ranges.update({outer: Range.from_extent(-(-total // (n_threads * vec))), v: Range.from_extent(vec)})
    coords, rest = {}, flat
    for l, e in reversed(list(zip(loops, extents))):
        coords[l.loop_var] = simplify(FloorMod(rest, IntImm(e)), ranges)
        rest = FloorDiv(rest, IntImm(e))
    stmt: Stmt = BufferStore(
        store.buffer,
        substitute(store.value, coords),
        tuple(simplify(substitute(i, coords), ranges) for i in store.indices),
    )
    if total % (n_threads * vec):
        stmt = IfThenElse(simplify(LT(flat, IntImm(total)), ranges), stmt)
    if vec > 1:
        stmt = make_for(v, vec, stmt, ForKind.VECTORIZED)
    else:
        stmt = substitute(stmt, {v: IntImm(0)})
    if lane is not None:
        stmt = make_for(lane, lanes, stmt, ForKind.THREAD_BINDING, thread_tag="threadIdx.x")
    return make_for(outer, -(-total // (n_threads * vec)), stmt)


def _vector_lanes(block: Block, buf: Buffer, total: int, n_threads: int) -> int:
    """Elements per thread and step: ``vector_bytes`` of the element type when that divides
    the work evenly (else 1)."""
    nbytes = block.annotations.get(VECTOR_BYTES)
    size = max(1, int("".join(c for c in buf.dtype if c.isdigit()) or 32) // 8)
    if not isinstance(nbytes, int) or nbytes <= size:
        return 1
    vec = nbytes // size
    return vec if total % (n_threads * vec) == 0 else 1


__all__ = ["lower_auto_copy"]
