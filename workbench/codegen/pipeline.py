"""Software pipelining (TVM's InjectSoftwarePipeline), applied while lowering a loop annotated
``software_pipeline_stage`` / ``software_pipeline_order`` — the annotations of the paper's
Use-Tensor-Core trace (seed 000, A.3).

The loop's body is a sequence of statements ``S_0 .. S_n-1`` (the blocks and loops directly
under it). ``stage[i]`` delays statement ``i`` by that many iterations; ``order[i]`` is its
position in the new body. With ``M = max(stage)`` the loop runs ``N + M`` steps, and step ``t``
runs, in the given order, every ``S_i`` of iteration ``t - stage[i]`` that exists::

    for k in range(N):                        for t in range(N + 1):
      S0: A_sh = load(k)        stage 0         if t < N:  S0(k = t)        A_sh[t % 2] = ...
      S1: C += use(A_sh)        stage 1   ==>   if t >= 1: S1(k = t - 1)    ... A_sh[(t-1) % 2]

so the copy of tile ``k + 1`` is issued while tile ``k`` is computed on. A buffer allocated in
the loop body that one stage writes and a later stage reads gets a version per iteration in
flight (``later - earlier + 1``): a leading dimension indexed by the iteration modulo that
count (double buffering for two stages). The result computes what the loop computed, on every
backend; on a GPU the copies of the next tile overlap the math of this one.

``software_pipeline_async_stages`` (asynchronous copies, ``cp.async``) is accepted and the
copies are made synchronously: the same values, without that overlap.
"""

from __future__ import annotations

from typing import Optional, Sequence

from ..errors import BuildError
from ..ir import expr as E
from ..ir.buffer import Buffer
from ..ir.functor import pre_order, substitute, transform
from ..ir.stmt import Allocate, BufferStore, For, ForKind, IfThenElse, Stmt, seq

STAGE, ORDER, ASYNC = ("software_pipeline_stage", "software_pipeline_order", "software_pipeline_async_stages")


def is_pipelined(loop: For) -> bool:
    return STAGE in loop.annotations or ORDER in loop.annotations


def inject(loop: For, children: Sequence[Stmt], local: Sequence[Buffer]) -> Stmt:
    """The pipelined form of ``loop`` (lowered ``min`` and ``extent``) whose body's statements,
    lowered, are ``children``; ``local``: the buffers allocated in the loop body. Returns the
    new loop wrapped in the allocations it needs (versioned buffers outside, the others
    inside)."""
    name = loop.loop_var.name
    n = len(children)
    stages = list(loop.annotations.get(STAGE, [0] * n))
    order = list(loop.annotations.get(ORDER, range(n)))
    if len(stages) != n or len(order) != n:
        raise BuildError(
            f"software pipeline of loop {name!r}: its body has {n} statements but "
            f"{STAGE} has {len(stages)} entries and {ORDER} {len(order)}"
        )
    if sorted(order) != list(range(n)):
        raise BuildError(
            f"software pipeline of loop {name!r}: {ORDER}={order} is not a permutation of 0..{n - 1}"
        )
    if any(not isinstance(s, int) or s < 0 for s in stages):
        raise BuildError(
            f"software pipeline of loop {name!r}: {STAGE}={stages} must be non-negative integers"
        )
    if not isinstance(loop.extent, E.IntImm):
        raise BuildError(f"software pipeline of loop {name!r}: needs a constant extent, has {loop.extent}")
    extent, depth = loop.extent.value, max(stages)

    # versions: a buffer of the body read in a later stage than it is written
    writes = [{x.buffer for x in pre_order(c) if isinstance(x, BufferStore)} for c in children]
    reads = [{x.buffer for x in pre_order(c) if isinstance(x, E.BufferLoad)} for c in children]
    versions: dict[Buffer, int] = {}
    for i in range(n):
        for j in range(n):
            for buf in writes[i] & reads[j]:
                if stages[j] > stages[i]:
                    if buf not in local:
                        raise BuildError(
                            f"software pipeline of loop {name!r}: buffer {buf.name} is written "
                            f"in stage {stages[i]} and read in stage {stages[j]}, but it is "
                            f"allocated outside the loop, so it cannot get a version per "
                            f"iteration in flight"
                        )
                    versions[buf] = max(versions.get(buf, 1), stages[j] - stages[i] + 1)
    versioned = {b: b.with_(shape=(v,) + b.shape) for b, v in versions.items()}

    step = E.Var(f"{name}_step", loop.loop_var.dtype)
    parts = []
    for i in sorted(range(n), key=lambda i: order[i]):
        iteration = E.Sub(step, E.IntImm(stages[i])) if stages[i] else step
        body = substitute(children[i], {loop.loop_var: E.Add(loop.min, iteration)})
        body = _add_version(body, versioned, versions, iteration)
        guard: Optional[E.Expr] = None
        if stages[i] > 0:
            guard = E.GE(step, E.IntImm(stages[i]))
        if stages[i] < depth:
            last = E.LT(step, E.IntImm(extent + stages[i]))
            guard = last if guard is None else E.And(guard, last)
        parts.append(body if guard is None else IfThenElse(guard, body))
    body = seq(*parts)
    for buf in reversed([b for b in local if b not in versioned]):
        body = Allocate(buf, body)
    annotations = {k: v for k, v in loop.annotations.items() if k not in (STAGE, ORDER, ASYNC)}
    out: Stmt = For(
        step,
        E.IntImm(0, loop.loop_var.dtype),
        E.IntImm(extent + depth, loop.loop_var.dtype),
        ForKind.SERIAL if loop.kind == ForKind.SERIAL else loop.kind,
        body,
        loop.thread_tag,
        annotations,
    )
    for buf in reversed(list(versioned.values())):
        out = Allocate(buf, out)
    return out


def _add_version(
    body: Stmt, versioned: dict[Buffer, Buffer], versions: dict[Buffer, int], iteration: E.Expr
) -> Stmt:
    """Accesses of the versioned buffers in ``body`` take ``iteration % versions`` first."""
    if not versioned:
        return body

    def post(node):
        if isinstance(node, BufferStore) and node.buffer in versioned:
            v = E.FloorMod(iteration, E.IntImm(versions[node.buffer]))
            return BufferStore(versioned[node.buffer], node.value, (v,) + node.indices)
        if isinstance(node, E.BufferLoad) and node.buffer in versioned:
            v = E.FloorMod(iteration, E.IntImm(versions[node.buffer]))
            return E.BufferLoad(versioned[node.buffer], (v,) + node.indices, node.dtype)
        return node

    return transform(body, post)
