"""Loop kinds: ``parallel``, ``vectorize``, ``unroll``, ``bind`` (a GPU thread axis).

They change how a loop runs, not what it computes. Running iterations concurrently is
only safe when no iteration depends on another, so ``parallel``, ``vectorize`` and ``bind``
require (TVM's rules):

* *compact dataflow*: each block directly under the loop is a complete block (spatial
  iterators only, reading none of the buffers it writes) or a reduction block (an init,
  quasi-affine bindings, spatial and reduce iterators only, the reduce iterators not indexing
  its outputs) — an opaque block such as ``A[i + 1] = A[i + 1] + A[i]`` carries a dependence
  from one iteration to the next and is refused;
* in every block below (nested ones included, init blocks excepted), the loop variable feeds
  only spatial iterators — except ``bind`` to ``threadIdx.*``, which may also feed reduce
  iterators (a cross-thread reduction).

``unroll`` only replicates the body and keeps the order, so it has no such rule. The loop's
current kind does not matter (TVM's rule): each primitive sets the kind it names, replacing a
parallel, vectorized, unrolled or thread-bound one after checking its own rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ...errors import ScheduleError
from ...ir.functor import uses_var
from ...ir.buffer import Buffer
from ...ir.functor import free_vars
from ...ir.stmt import REDUCE, SPATIAL, THREAD_TAGS, Block, BlockRealize, For, ForKind, Stmt
from ..instruction import schedule_primitive
from ..rv import LoopRV
from ...ir.index import _stmt_children
from .block_scope import buffers
from ...ir.expr import IntImm
from .loops import loop_name
from .reduce_space import affine_binding_problem


def _realizes_outside_init(stmt: Stmt) -> list[BlockRealize]:
    """Every realize under ``stmt``, nested ones included, except those inside an init (TVM
    does not check the blocks of an init: they run once, before the reduction)."""
    out: list[BlockRealize] = []
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, BlockRealize):
            if node is not stmt:
                out.append(node)
            stack.append(node.block.body)
        elif isinstance(node, Block):
            stack.append(node.body)
        else:
            stack.extend(reversed(_stmt_children(node)))
    return out


def _child_realizes(stmt: Stmt) -> list[BlockRealize]:
    """The realizes under ``stmt`` not inside another block below it (init excluded)."""
    out: list[BlockRealize] = []
    stack = [stmt.body if isinstance(stmt, Block) else stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, BlockRealize) and node is not stmt:
            out.append(node)
        else:
            stack.extend(reversed(_stmt_children(node)))
    return out


def _dataflow_problem(sch, realize: BlockRealize, nested_writers: dict[Buffer, int]) -> Optional[str]:
    """Why ``realize``, a child block of the loop, is neither a local complete block nor a local
    reduction block (None when it is one). Like TVM, a block is *locally dominant* unless
    two blocks nested in the loop's child blocks write one of its outputs."""
    block = realize.block
    written = buffers(block.writes)
    shared = sorted(b.name for b in written if nested_writers.get(b, 0) > 1)
    if shared:
        return f"several blocks nested in it write {shared}"
    kinds = {iv.iter_type for iv in block.iter_vars}
    if kinds <= {SPATIAL}:
        both = written & buffers(block.reads)
        if not both:
            return None
        return (
            f"it reads {sorted(b.name for b in both)}, which it writes, and has no init: "
            f"one iteration may read what another writes"
        )
    if not kinds <= {SPATIAL, REDUCE}:
        opaque = [iv.var.name for iv in block.iter_vars if iv.iter_type not in (SPATIAL, REDUCE)]
        return f"it has opaque iterators {opaque}"
    if block.init is None:
        return "it has reduce iterators but no init"
    problem = affine_binding_problem(realize, sch.index.loops_above(realize))
    if problem:
        return f"as a reduction block its bindings are not quasi-affine: {problem}"
    reduce_vars = {iv.var for iv in block.iter_vars if iv.iter_type == REDUCE}
    for region in block.writes:
        used = set().union(*(free_vars(r) for r in region.region)) & reduce_vars
        if used:
            return (
                f"as a reduction block it indexes its output {region.buffer.name} with reduce "
                f"iterators {sorted(v.name for v in used)}"
            )
    return None


def _check_compact_dataflow(sch, primitive: str, loop: For) -> None:
    children = _child_realizes(loop)
    nested_writers: dict[Buffer, int] = {}
    for child in children:
        for inner in _child_realizes(child.block):
            for buf in buffers(inner.block.writes):
                nested_writers[buf] = nested_writers.get(buf, 0) + 1
    for child in children:
        problem = _dataflow_problem(sch, child, nested_writers)
        if problem:
            raise ScheduleError(
                primitive,
                f"{loop_name(loop)} does not have compact dataflow: block {child.block.name!r} "
                f"under it is neither a complete nor a reduction block ({problem}); "
                f"{primitive} would run its iterations out of order",
                argument="loop",
                nodes=[loop, child.block],
            )


if TYPE_CHECKING:
    from ..schedule import Schedule


def _check_iterators(sch, primitive: str, loop: For, allow_reduce: bool) -> None:
    allowed_desc = "spatial or reduce" if allow_reduce else "spatial"
    allowed = (SPATIAL, REDUCE) if allow_reduce else (SPATIAL,)
    for realize in _realizes_outside_init(loop):
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if iv.iter_type in allowed or not uses_var(value, loop.loop_var):
                continue
            kind = {REDUCE: "reduce"}.get(iv.iter_type, "opaque")
            raise ScheduleError(
                primitive,
                f"{loop_name(loop)} feeds {kind} iterator "
                f"{iv.var.name!r} of block {realize.block.name!r} "
                f"({iv.var.name} = {value}); with {primitive} it may only feed "
                f"{allowed_desc} iterators",
                argument="loop",
                nodes=[loop, realize.block],
            )


def _set_kind(sch, primitive: str, rv: LoopRV, kind: ForKind, thread_tag: Optional[str] = None) -> None:
    # Like TVM, the loop's current kind does not matter: the rules are checked for the new kind
    # (a thread-bound loop may be unrolled, re-bound, parallelized), and the new kind replaces the
    # old one, thread binding included.
    loop = sch.get(rv)
    if not isinstance(loop.extent, IntImm) and not free_vars(loop.extent) <= set(sch.func.size_vars):
        # an extent over enclosing loops (a triangular nest): TVM accepts it; kept refused here
        raise ScheduleError(
            primitive,
            f"{loop_name(loop)} has extent {loop.extent}, not a constant",
            argument="loop",
            nodes=[loop],
        )
    if kind == ForKind.THREAD_BINDING and not isinstance(loop.extent, IntImm):
        # a GPU launch's grid and block sizes are fixed when the kernel is built
        raise ScheduleError(
            primitive,
            f"{loop_name(loop)} has extent {loop.extent}, not a constant: thread extents are launch "
            f"dimensions fixed when the kernel is built",
            argument="loop",
            nodes=[loop],
        )
    if kind != ForKind.UNROLLED:
        _check_iterators(
            sch, primitive, loop, allow_reduce=bool(thread_tag and thread_tag.startswith("threadIdx."))
        )
        _check_compact_dataflow(sch, primitive, loop)
    sch.replace(loop, loop.with_(kind=kind, thread_tag=thread_tag))


@schedule_primitive("parallel", tvm_inputs=("loop",))
def parallel(sch: Schedule, loop: LoopRV) -> None:
    """Run the iterations of ``loop`` on several CPU threads.

    Rules: ``loop`` has compact dataflow (each block directly under it is a complete or a
    reduction block, see the module notes) and feeds only spatial iterators of the blocks under
    it (no two iterations update one element). Its extent may be symbolic (``T.parallel(n)``,
    as in TVM): the threads share out ``n`` iterations when the kernel is called.

    Before / after::

        for i in range(128):               for i in T.parallel(128):
          block C: vi = i                    block C: vi = i
    """
    _set_kind(sch, "parallel", loop, ForKind.PARALLEL)


@schedule_primitive("vectorize", tvm_inputs=("loop",))
def vectorize(sch: Schedule, loop: LoopRV) -> None:
    """Run the iterations of ``loop`` as SIMD lanes (usually an innermost loop).

    Rules: as for ``parallel`` (compact dataflow, only spatial iterators fed). A symbolic
    extent (``T.vectorized(n)``, as TVM allows) or a split's tail predicate is fine: the llvm
    target then hands the loop to LLVM's loop vectorizer, which emits a scalar remainder.

    Before / after::

        for j in range(16):                for j in T.vectorized(16):
          block C: vj = j                    block C: vj = j
    """
    _set_kind(sch, "vectorize", loop, ForKind.VECTORIZED)


@schedule_primitive("unroll", tvm_inputs=("loop",))
def unroll(sch: Schedule, loop: LoopRV) -> None:
    """Replicate the body of ``loop`` once per iteration (any iterator kind is fine).

    Rules: none on the iterators. A thread-bound loop becomes an unrolled one (its binding is
    dropped, as in TVM). A symbolic extent (``T.unroll(n)``, as TVM allows) cannot be unrolled
    fully: the llvm target asks LLVM to unroll it partially.

    Before / after::

        for k in range(4):                 for k in T.unroll(4):
          block C: vk = k                    block C: vk = k
    """
    _set_kind(sch, "unroll", loop, ForKind.UNROLLED)


@schedule_primitive("bind", tvm_inputs=("loop",), tvm_attrs=("thread_axis",))
def bind(sch: Schedule, loop: LoopRV, thread_axis: str) -> None:
    """Map ``loop`` onto a GPU thread axis (``blockIdx.x``, ``threadIdx.y``, ``vthread.x`` …).

    Rules: ``thread_axis`` is a known axis; ``loop`` has a constant extent (TVM binds symbolic
    loops too; GPU launches here have dimensions fixed at build time), has
    compact dataflow (as for ``parallel``) and feeds only spatial iterators — a ``threadIdx.*``
    loop may also feed reduce iterators (a cross-thread reduction).

    Before / after ``bind(i, "blockIdx.x")``::

        for i in range(128):               for i in T.thread_binding(128, "blockIdx.x"):
          block C: vi = i                    block C: vi = i
    """
    if thread_axis not in THREAD_TAGS:
        raise ScheduleError(
            "bind",
            f"unknown thread axis {thread_axis!r}; expected one of {', '.join(THREAD_TAGS)}",
            argument="thread_axis",
        )
    _set_kind(sch, "bind", loop, ForKind.THREAD_BINDING, thread_tag=thread_axis)
