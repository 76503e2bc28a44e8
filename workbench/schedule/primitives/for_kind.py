"""Loop kinds: ``parallel``, ``vectorize``, ``unroll``, ``bind`` (a GPU thread axis).

They change how a serial loop runs, not what it computes. Running iterations concurrently is
only safe when no two iterations update the same output element, so ``parallel``,
``vectorize`` and ``bind`` require that, in every block below, the loop variable feeds only
spatial (data-parallel) iterators — except ``bind`` to ``threadIdx.*``, which may also feed
reduce iterators (a cross-thread reduction). ``unroll`` only replicates the body.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ...errors import ScheduleError
from ...ir.functor import uses_var
from ...ir.stmt import REDUCE, SPATIAL, THREAD_TAGS, For, ForKind
from ..instruction import schedule_primitive
from ..rv import LoopRV
from .loops import const_extent, loop_name

if TYPE_CHECKING:
    from ..schedule import Schedule


def _check_iterators(sch, primitive: str, loop: For, allow_reduce: bool) -> None:
    allowed_desc = "spatial or reduce" if allow_reduce else "spatial"
    allowed = (SPATIAL, REDUCE) if allow_reduce else (SPATIAL,)
    for realize in sch.index.realizes_under(loop):
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
    loop = sch.get(rv)
    if loop.kind != ForKind.SERIAL:
        now = loop.kind.value + (f" ({loop.thread_tag})" if loop.thread_tag else "")
        raise ScheduleError(
            primitive,
            f"{loop_name(loop)} is already {now}; {primitive} applies to serial loops",
            argument="loop",
            nodes=[loop],
        )
    const_extent(primitive, loop)
    if kind != ForKind.UNROLLED:
        _check_iterators(
            sch, primitive, loop, allow_reduce=bool(thread_tag and thread_tag.startswith("threadIdx."))
        )
    sch.replace(loop, loop.with_(kind=kind, thread_tag=thread_tag))


@schedule_primitive("parallel", tvm_inputs=("loop",))
def parallel(sch: Schedule, loop: LoopRV) -> None:
    """Run the iterations of ``loop`` on several CPU threads.

    Rules: ``loop`` is serial, has a constant extent, and feeds only spatial iterators of the
    blocks under it (no two iterations update one element).

    Before / after::

        for i in range(128):               for i in T.parallel(128):
          block C: vi = i                    block C: vi = i
    """
    _set_kind(sch, "parallel", loop, ForKind.PARALLEL)


@schedule_primitive("vectorize", tvm_inputs=("loop",))
def vectorize(sch: Schedule, loop: LoopRV) -> None:
    """Run the iterations of ``loop`` as SIMD lanes (usually an innermost loop).

    Rules: as for ``parallel`` (serial, constant extent, only spatial iterators fed).

    Before / after::

        for j in range(16):                for j in T.vectorized(16):
          block C: vj = j                    block C: vj = j
    """
    _set_kind(sch, "vectorize", loop, ForKind.VECTORIZED)


@schedule_primitive("unroll", tvm_inputs=("loop",))
def unroll(sch: Schedule, loop: LoopRV) -> None:
    """Replicate the body of ``loop`` once per iteration (any iterator kind is fine).

    Rules: ``loop`` is serial and has a constant extent.

    Before / after::

        for k in range(4):                 for k in T.unroll(4):
          block C: vk = k                    block C: vk = k
    """
    _set_kind(sch, "unroll", loop, ForKind.UNROLLED)


@schedule_primitive("bind", tvm_inputs=("loop",), tvm_attrs=("thread_axis",))
def bind(sch: Schedule, loop: LoopRV, thread_axis: str) -> None:
    """Map ``loop`` onto a GPU thread axis (``blockIdx.x``, ``threadIdx.y``, ``vthread.x`` …).

    Rules: ``thread_axis`` is a known axis; ``loop`` is serial, has a constant extent, and feeds
    only spatial iterators — a ``threadIdx.*`` loop may also feed reduce iterators (a
    cross-thread reduction).

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
