"""``RewriteParallelVectorizeUnroll``: turn the root block's annotations into loop kinds.

``ParallelizeVectorizeUnroll`` left limits on the root block; with the decisions now known,
for every block: the outer spatial loops are fused into one ``parallel`` loop while their
product stays within ``meta_schedule.parallel``; the inner spatial loops whose accesses stay
contiguous are fused into one ``vectorized`` loop within ``meta_schedule.vectorize`` (when every
loop of the nest could be both, the nest is fused and split by the vector limit: parallel
outside, vector inside); the outermost loop of a block that is not purely spatial gets
``pragma_auto_unroll_max_step``. Blocks are visited in program order, each before the blocks
nested in it, as TVM's postprocessor does: a block computed inside another's loops sees those
loops already fused, so a record of TVM's tuning gives TVM's program here. With explicit
unrolling, loops under the annotated loop are then marked ``unrolled`` from the inside out while
extent x statements stays within the step (TVM's UnrollLoop pass, which our LLVM backend does
not run itself)::

    for i0, j0, i1, j1 (4 x 4 x 8 x 16):        for i0_j0_fused in T.parallel(16):
      C[...] = ...                                for i1 in range(8):
                                                    for j1 in T.vectorized(16):
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from ...ir.arith import simplify
from ...ir.expr import Add, Expr, IntImm, Mul, Var
from ...ir.functor import pre_order, substitute
from ...ir.stmt import SPATIAL, Block, BlockRealize, BufferStore, For, ForKind, IfThenElse, SeqStmt, Stmt
from ...schedule import LoopRV, Schedule
from ...schedule.primitives.read_write_at import AUTO_COPY
from ..analysis import (
    AUTO_TENSORIZE,
    AUTO_UNROLL_MAX_STEP,
    PARALLEL,
    UNROLL_EXPLICIT,
    UNROLL_EXPLICIT_PRAGMA,
    UNROLL_IMPLICIT,
    VECTORIZE,
    const_extent,
    loop_iter_type,
)
from .base import Postproc

_KEYS = (PARALLEL, VECTORIZE, UNROLL_EXPLICIT, UNROLL_IMPLICIT)


@dataclass
class Plan:
    max_parallel: int = -1
    max_vectorize: int = -1
    unroll_explicit: int = -1
    unroll_implicit: int = -1
    n_parallel: int = -1
    n_vectorize: int = -1


class RewriteParallelVectorizeUnroll(Postproc):
    """Fuse-and-parallelize, fuse-and-vectorize and unroll as the root annotations allow."""

    def apply(self, sch: Schedule) -> bool:
        root = sch.get_block(sch.func.root.name)
        anns = sch.get(root).annotations
        found = {k: anns[k] for k in _KEYS if k in anns}
        if not found:
            return True
        for key in found:
            sch.unannotate(root, key)
        base = Plan(
            found.get(PARALLEL, -1),
            found.get(VECTORIZE, -1),
            found.get(UNROLL_EXPLICIT, -1),
            found.get(UNROLL_IMPLICIT, -1),
        )
        unroll_roots: list[LoopRV] = []
        # in program order, each block before the blocks nested in it (TVM's order: a block
        # computed inside another's loops sees the loops that one already fused)
        stack = list(reversed(sch.get_child_blocks(root)))
        while stack:
            block = stack.pop()
            if AUTO_TENSORIZE not in sch.get(block).annotations:
                stack.extend(reversed(sch.get_child_blocks(block)))  # an intrinsic's loops stay
            loops = sch.get_loops(block)
            if not loops:
                continue
            plan = replace(base)
            _adjust(sch, block, loops, plan)
            if plan.n_parallel == plan.n_vectorize == len(loops):
                # every loop both parallel and vector: one loop split into the two (TVM's)
                outer, inner = sch.split(sch.fuse(*loops), factors=[None, plan.max_vectorize])
                sch.parallel(outer)
                sch.vectorize(inner)
                loops = [outer] * (len(loops) - 1) + [inner]
            else:
                if plan.n_parallel > 0:
                    fused = sch.fuse(*loops[: plan.n_parallel])
                    sch.parallel(fused)
                    loops[: plan.n_parallel] = [fused] * plan.n_parallel
                if plan.n_vectorize > 0:
                    fused = sch.fuse(*loops[-plan.n_vectorize :])
                    sch.vectorize(fused)
                    loops[-plan.n_vectorize :] = [fused] * plan.n_vectorize
            step = plan.unroll_explicit + plan.unroll_implicit + 1
            # a purely spatial block is not unrolled (TVM's RewriteUnroll); one computed inside
            # a reduction's loops is, by the annotation of those loops
            spatial = all(iv.iter_type == SPATIAL for iv in sch.get(block).iter_vars)
            if (plan.unroll_explicit != -1 or plan.unroll_implicit != -1) and step > 0 and not spatial:
                sch.annotate(loops[0], AUTO_UNROLL_MAX_STEP, step)
                sch.annotate(loops[0], UNROLL_EXPLICIT_PRAGMA, int(plan.unroll_explicit != -1))
                if plan.unroll_explicit != -1:
                    unroll_roots.append(loops[0])
        # like TVM's UnrollLoop pass: once, over the final loop nests
        done: set = set()
        for top in unroll_roots:
            node = sch.get(top)
            if node.loop_var in done:
                continue
            done.add(node.loop_var)
            _unroll_explicitly(sch, top, node.annotations[AUTO_UNROLL_MAX_STEP])
        return True


def _adjust(sch: Schedule, block, loops: list[LoopRV], plan: Plan) -> None:
    """How many outer loops to parallelize and inner loops to vectorize for this block."""
    if plan.max_parallel == -1 and plan.max_vectorize == -1:
        return
    idx = sch.index
    nodes: list[For] = [sch.get(l) for l in loops]
    kinds = [loop_iter_type(idx, n) for n in nodes]
    if plan.max_parallel != -1:
        count, product = 0, 1
        for node, kind in zip(nodes, kinds):
            extent = const_extent(node)
            if kind != SPATIAL or _fixed(node) or extent is None:
                break
            count += 1
            product *= extent
            if product > plan.max_parallel or isinstance(node.body, SeqStmt):
                break
        plan.n_parallel = count if product != 1 else -1
    block_node = sch.get(block)
    innermost = not any(isinstance(n, Block) for n in pre_order(block_node.body))
    if plan.max_vectorize != -1 and innermost:
        limit = _max_contiguous(idx, block_node, nodes)
        count, product = 0, 1
        for node, kind in zip(reversed(nodes), reversed(kinds)):
            extent = const_extent(node)
            if (
                count >= limit
                or kind != SPATIAL
                or _fixed(node)
                or extent is None
                or extent <= 0
                or isinstance(node.body, SeqStmt)
            ):
                break
            product *= extent
            if product > plan.max_vectorize:
                break
            count += 1
        plan.n_vectorize = count if product != 1 else -1
    if plan.n_parallel != -1 and plan.n_vectorize != -1:
        rewritable = sum(
            1
            for node, kind in zip(nodes, kinds)
            if not _fixed(node)
            and kind == SPATIAL
            and not isinstance(node.body, SeqStmt)
            and const_extent(node) is not None
        )
        if rewritable == len(nodes) and innermost and _max_contiguous(idx, block_node, nodes) == len(nodes):
            plan.n_parallel = plan.n_vectorize = len(nodes)
        else:  # vectorizing first
            plan.n_parallel = min(plan.n_parallel, len(nodes) - plan.n_vectorize)


def _fixed(loop: For) -> bool:
    """A loop the plan leaves as it is: bound, or annotated (fuse refuses both), or already
    parallel / vectorized by an earlier block sharing it (fuse would accept it, as TVM's does,
    but the block processed first already chose its kind)."""
    return loop.kind != ForKind.SERIAL or bool(loop.thread_tag) or bool(loop.annotations)


def _max_contiguous(idx, block: Block, loops: list[For]) -> int:
    """How many innermost loops can be fused into one vector loop with every access of the
    block staying contiguous (TVM's stride check)."""
    realize = idx.realizes[block.name]
    binding = {iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)}
    limit = len(loops)
    for access in (*block.reads, *block.writes):
        indices = [simplify(substitute(r.min, binding)) for r in access.region]
        strides = []
        for loop in loops:
            stride, buffer_stride = 0, 1
            for dim in range(len(access.region) - 1, -1, -1):
                coef = _stride(indices[dim], loop.loop_var)
                if coef:
                    stride = coef * buffer_stride
                    break
                buffer_stride *= access.buffer.shape[dim]
            strides.append(stride)
        fusible, prev = 0, None
        for k in range(len(strides) - 1, -1, -1):
            if strides[k] == 0:
                fusible += 1
            elif prev is None:
                if strides[k] != 1 and fusible != 0:
                    break
                fusible += 1
                prev = k
            elif strides[k] == strides[prev] * const_extent(loops[prev]):
                fusible += 1
                prev = k
            else:
                break
        limit = min(limit, fusible)
    return limit


def _stride(e: Expr, var: Var) -> int:
    """The coefficient of ``var`` in an affine ``e`` (0 when absent; the smallest one of a sum)."""
    if e is var:
        return 1
    if isinstance(e, Mul):
        if isinstance(e.a, IntImm):
            return _stride(e.b, var) * e.a.value
        if isinstance(e.b, IntImm):
            return _stride(e.a, var) * e.b.value
        return 0
    if isinstance(e, Add):
        found = [s for s in (_stride(e.a, var), _stride(e.b, var)) if s]
        return min(found) if found else 0
    return 0


def _unroll_explicitly(sch: Schedule, top: LoopRV, max_step: int) -> None:
    """Mark ``unrolled`` each serial loop under ``top`` (itself included) whose extent times
    the statements of its body is at most ``max_step`` and below which every loop is
    unrolled or vectorized."""
    chosen: list[Var] = []

    def visit(s: Stmt) -> tuple[int, bool]:  # (statements executed, a loop stays a loop)
        if isinstance(s, For):
            steps, blocked = visit(s.body)
            extent = const_extent(s)
            if s.kind == ForKind.VECTORIZED:
                return steps, blocked  # becomes vector instructions: no loop remains
            if s.kind == ForKind.UNROLLED and extent is not None:
                return steps * extent, blocked
            if s.kind == ForKind.SERIAL and not blocked and extent is not None and extent * steps <= max_step:
                chosen.append(s.loop_var)
                return steps * extent, False
            return steps, True
        if isinstance(s, SeqStmt):
            parts = [visit(x) for x in s.seq]
            return sum(p[0] for p in parts), any(p[1] for p in parts)
        if isinstance(s, BlockRealize):
            if AUTO_TENSORIZE in s.block.annotations or s.block.annotations.get(AUTO_COPY):
                # to be replaced by an intrinsic, or a copy the backend spreads over the
                # threads (read_at / write_at): not unrolled around
                return 1, True
            steps, blocked = visit(s.block.body)
            if s.block.init is not None:
                init_steps, init_blocked = visit(s.block.init)
                return steps + init_steps, blocked or init_blocked
            return steps, blocked
        if isinstance(s, IfThenElse):
            a = visit(s.then_case)
            b = visit(s.else_case) if s.else_case is not None else (0, False)
            return a[0] + b[0], a[1] or b[1]
        return (1, False) if isinstance(s, BufferStore) else (0, False)

    visit(sch.get(top))
    if not chosen:
        return
    rvs = {}
    for realize in sch.index.realizes_under(sch.get(top)):
        for rv in sch.get_loops(realize.block.name):
            rvs.setdefault(sch.symbols[rv], rv)
    for var in chosen:
        sch.unroll(rvs[var])
