"""Program analyses the transformation modules share (TVM MetaSchedule's semantics).

Rules ask questions about the *current* state of a schedule — is this block's binding trivial,
does it reuse data, is this loop spatial — before deciding what to do. Each question is one
small function over the current function's :class:`~workbench.ir.index.FuncIndex`.
"""

from __future__ import annotations

from typing import Iterable, Optional

from ..ir.expr import Add, Call, Expr, IntImm, Select, Sub, Var
from ..ir.func import PrimFunc
from ..ir.functor import free_vars, pre_order, uses_var
from ..ir.stmt import OPAQUE, REDUCE, SPATIAL, Block, BlockRealize, BufferRegion, For, IfThenElse
from ..ir.index import FuncIndex

#: block annotation set by MultiLevelTiling (a tiled block is not tiled again)
TILING_STRUCTURE = "meta_schedule.tiling_structure"
#: root-block annotations left by ParallelizeVectorizeUnroll for RewriteParallelVectorizeUnroll
PARALLEL = "meta_schedule.parallel"
VECTORIZE = "meta_schedule.vectorize"
UNROLL_EXPLICIT = "meta_schedule.unroll_explicit"
UNROLL_IMPLICIT = "meta_schedule.unroll_implicit"
#: AddRFactor marks the original block so RandomComputeLocation also places its rfactor producer
RANDOM_COMPUTE_PRODUCER = "meta_schedule.random_compute_producer"
#: a block annotated ``{INLINE_RULE: "disable"}`` is never inlined by AutoInline
INLINE_RULE = "meta_schedule.inline_rule"
#: a blockized block whose body RewriteTensorize replaces by this tensor intrinsic
AUTO_TENSORIZE = "meta_schedule.auto_tensorize"
#: ... and the intrinsic of its initialization, once RewriteReductionBlock decomposed it
AUTO_TENSORIZE_INIT = "meta_schedule.auto_tensorize_init"
#: root annotation of the tensor-core space: each thread is a warp (threadIdx.x = warp size)
WARP_EXECUTION = "warp_execution"
#: GPU: cache-read blocks to be fetched cooperatively by the threads, with this vector length
COOPERATIVE_FETCH = "meta_schedule.cooperative_fetch"
#: GPU: bounds on the threads of a block, checked by VerifyGPUCode
THREAD_EXTENT_LOW = "meta_schedule.thread_extent_low_inclusive"
THREAD_EXTENT_HIGH = "meta_schedule.thread_extent_high_inclusive"
#: loop annotations read by the LLVM backend's unroller (TVM's names)
AUTO_UNROLL_MAX_STEP = "pragma_auto_unroll_max_step"
UNROLL_EXPLICIT_PRAGMA = "pragma_unroll_explicit"


def const_extent(loop: For) -> Optional[int]:
    """The loop's extent as an int, or None when it is not a constant."""
    return loop.extent.value if isinstance(loop.extent, IntImm) else None


def is_spatial(block: Block) -> bool:
    return all(iv.iter_type == SPATIAL for iv in block.iter_vars)


def is_spatial_func(func: PrimFunc) -> bool:
    """Every block of ``func`` has only spatial iterators (no reduction anywhere)."""
    return all(is_spatial(b) for b in func.blocks())


def has_been_tiled(block: Block) -> bool:
    return TILING_STRUCTURE in block.annotations


def is_trivial_binding(idx: FuncIndex, block: Block) -> bool:
    """Each block iterator is bound to exactly the loop at its position, outer to inner."""
    loops = idx.loops_above(block)
    values = idx.realizes[block.name].iter_values
    return len(loops) == len(values) and all(v is l.loop_var for l, v in zip(loops, values))


def loop_iter_type(idx: FuncIndex, loop: For) -> str:
    """``"S"`` if the loop feeds only spatial iterators of the blocks directly below it, ``"R"``
    if only reduce ones, ``"O"`` when mixed or opaque (TVM's GetLoopIterType)."""
    kinds = set()
    for realize in idx.child_realizes(loop):
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if uses_var(value, loop.loop_var):
                kinds.add(iv.iter_type)
    if OPAQUE in kinds or kinds == {SPATIAL, REDUCE}:
        return OPAQUE
    return REDUCE if REDUCE in kinds else SPATIAL


def block_vars_in(region: BufferRegion) -> set[Var]:
    return set().union(*(free_vars(r.min) for r in region.region)) if region.region else set()


def needs_multi_level_tiling(idx: FuncIndex, block: Block) -> bool:
    """A reduction block with a trivial binding whose reads miss some spatial iterator — data
    is reused across that iterator, so tiling pays off (TVM's NeedsMultiLevelTiling)."""
    if (
        has_been_tiled(block)
        or len(block.writes) != 1
        or not block.reads
        or is_spatial(block)
        or not is_trivial_binding(idx, block)
    ):
        return False
    write = block.writes[0].buffer
    spatial = [
        iv.var
        for iv in block.iter_vars
        if iv.iter_type == SPATIAL and not (_is(iv.dom.min, 0) and _is(iv.dom.extent, 1))
    ]
    seen, unused = set(), 0
    for read in block.reads:
        if read.buffer in seen:
            return False
        seen.add(read.buffer)
        if read.buffer is write:
            continue
        if any(not isinstance(r.extent, IntImm) for r in read.region):
            return False
        used = block_vars_in(read)
        unused += sum(1 for v in spatial if v not in used)
    return unused >= 1


def _is(e: Expr, value: int) -> bool:
    return isinstance(e, IntImm) and e.value == value


def space_and_reduce_length(idx: FuncIndex, block: Block) -> tuple[int, int]:
    """Products of the spatial and the reduce loop extents above ``block`` ((-1, -1) when a loop
    is dynamic or mixed)."""
    space, reduce = 1, 1
    for loop in idx.loops_above(block):
        kind, extent = loop_iter_type(idx, loop), const_extent(loop)
        if extent is None or kind == OPAQUE:
            return -1, -1
        if kind == SPATIAL:
            space *= extent
        else:
            reduce *= extent
    return space, reduce


def needs_rfactor(
    idx: FuncIndex, block: Block, max_parallel_extent: int, max_parallel_basic: int = 1
) -> bool:
    """A reduction worth an rfactor / cross-thread reduction: its spatial loops offer less
    parallelism than its reduction (TVM's NeedsRFactorOrCrossThreadReduction; on GPU
    ``max_parallel_basic`` is the warp size: shorter reductions stay in one thread)."""
    if not block.writes or block.init is None or has_been_tiled(block):
        return False
    if not is_trivial_binding(idx, block) or idx.scope(block) is None:
        return False
    loops = idx.loops_above(block)
    kinds = [loop_iter_type(idx, l) for l in loops]
    if OPAQUE in kinds or REDUCE not in kinds:
        return False
    for outer, inner in zip(loops, loops[1:]):
        if outer.body is not inner:
            return False
    if not loops or idx.realizes[block.name] is not loops[-1].body:
        return False
    space, reduce = space_and_reduce_length(idx, block)
    if space == -1:
        return False
    if needs_multi_level_tiling(idx, block):
        return not (space >= reduce or space > max_parallel_extent)
    return reduce > max_parallel_basic


def _var_with_shift(e: Expr) -> Optional[tuple[Var, bool]]:
    """``(v, shifted)`` when ``e`` is ``v``, ``v + c`` or ``v - c`` for a constant ``c``."""
    if isinstance(e, Var):
        return e, False
    if isinstance(e, (Add, Sub)) and isinstance(e.a, Var) and isinstance(e.b, IntImm):
        return e.a, True
    if isinstance(e, Add) and isinstance(e.b, Var) and isinstance(e.a, IntImm):
        return e.b, True
    return None


def read_write_pattern(read: BufferRegion, write: BufferRegion) -> tuple[bool, bool, bool, bool]:
    """(exists, surjective, injective, ordered) of the map from read indices to write indices,
    when each read index is a write index (plus a constant shift) or a constant
    (TVM's AnalyzeReadWritePattern; ``exists`` is False when some index is anything else)."""
    position: dict[Var, int] = {}
    for k, r in enumerate(write.region):
        if not isinstance(r.extent, IntImm) or not isinstance(r.min, Var):
            return False, False, False, False
        position[r.min] = k
    mapped = []
    for r in read.region:
        if not isinstance(r.extent, IntImm):
            return False, False, False, False
        if isinstance(r.min, IntImm):
            continue
        found = _var_with_shift(r.min)
        if found is None or found[0] not in position:
            return False, False, False, False
        mapped.append(position[found[0]])
    counts = [mapped.count(k) for k in range(len(write.region))]
    ordered = all(a <= b for a, b in zip(mapped, mapped[1:]))
    return True, all(c >= 1 for c in counts), all(c <= 1 for c in counts), ordered


def is_write_cache(block: Block) -> bool:
    """A block with one write whose every read maps injectively and in order onto the write
    indices: a copy, or an elementwise epilogue such as ``relu(conv[n, y, x, f] + bias[f])``
    (TVM's IsWriteCache; MultiLevelTiling computes such a single consumer at the tile instead of
    adding a cache stage in front of it)."""
    if len(block.writes) != 1:
        return False
    for read in block.reads:
        _, _, injective, ordered = read_write_pattern(read, block.writes[0])
        if not (injective and ordered):
            return False
    return True


def has_if_then_else(realize: BlockRealize) -> bool:
    """A non-trivial predicate, an ``IfThenElse`` or a ``Select`` anywhere in the block."""
    if not (isinstance(realize.predicate, IntImm) and realize.predicate.value):
        return True
    return any(isinstance(n, (IfThenElse, Select)) for n in pre_order(realize.block))


def has_op(realize: BlockRealize, ops: Iterable[str]) -> bool:
    ops = set(ops)
    return bool(ops) and any(isinstance(n, Call) and n.op in ops for n in pre_order(realize.block))
