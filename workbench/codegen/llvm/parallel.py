"""Parallel loops on workbench's persistent thread pool (:mod:`.pool`), lowered the way GCC
lowers ``#pragma omp parallel for schedule(dynamic, chunk)`` for libgomp.

For a parallel loop ``for i in [lo, lo + n)`` the emitter outlines two internal functions::

    void @k_par0_task(ptr noalias %A, ..., i64 %outer_vars..., i64 %begin, i64 %end, ptr %status)
        ; the loop body for i in [begin, end), with the buffers as noalias parameters so the
        ; optimizer keeps its alias facts inside the task
    void @k_par0(ptr %closure)
        ; run by every thread of the team: claims chunks [lo + s, lo + s + chunk) with an atomic
        ; add on the closure's counter until none is left, calling the task on each

and the kernel stores what the body uses (buffer pointers, enclosing loop variables, lo, n, the
chunk size, a zeroed counter and the status slot) into a stack closure and calls
``wb_parallel(@k_par0, closure, T)`` — or calls ``@k_par0`` itself when the process-wide
thread cap (:mod:`.runtime`) is 1. The pool's threads stay alive between regions, so a region
costs about a microsecond. Chunks (about four per thread) rather than one static share per
thread let the running threads take over the work of one the OS has descheduled (a machine
shared with other work), and the region's end waits only for the workers that joined it, not
for one still waiting for a core (see :mod:`.pool`). Only the
outermost parallel loop forks; parallel loops inside it run serially in their task.
"""

from __future__ import annotations

from typing import Callable, Optional, Protocol, Union, cast

from llvmlite import ir

from ...ir import expr as E
from ...ir.func import PrimFunc
from ...ir.functor import pre_order
from ...ir.stmt import For, Stmt
from ...target import Target
from .dtypes import I32, I64, PTR, VOID
from .function import FunctionState, alloca
from . import pool
from .intrinsics import declare
from .runtime import cap_address


#: chunks per thread a parallel loop is cut into (load balance vs. one atomic per chunk)
CHUNKS_PER_THREAD = 4


class Emitter(Protocol):
    """What a parallel region needs of the :class:`~.emitter.KernelEmitter` emitting it (which
    passes itself): its module, the function being filled and its state, which the task's
    function takes over while its body is emitted."""

    name: str
    module: ir.Module
    func: PrimFunc
    target: Target
    fs: FunctionState
    vars: dict
    bufs: dict
    status: ir.Value
    in_parallel: bool
    n_parallel: int

    @property
    def b(self) -> ir.IRBuilder: ...

    def expr(self, e: E.Expr) -> ir.Value: ...

    def stmt(self, s: Stmt) -> None: ...

    def loop(
        self,
        lo: ir.Value,
        count: Union[int, ir.Value],
        body: Callable[[ir.Value], None],
        props: Optional[list] = None,
        name: str = "i",
    ) -> None: ...


def emit_parallel(em: Emitter, loop: For) -> None:
    """Emit ``loop`` as a parallel region (see the module docstring)."""
    name = f"{em.name}_par{em.n_parallel}"
    em.n_parallel += 1
    bufs, vars_ = _captured(em, loop)
    b = em.b
    threads = em.target.num_cores
    if isinstance(loop.extent, E.IntImm):
        threads = max(1, min(threads, loop.extent.value))
    lo = em.expr(loop.min)
    extent = em.expr(loop.extent)
    per_round = ir.Constant(I64, threads * CHUNKS_PER_THREAD)
    chunk = b.sdiv(b.add(extent, b.sub(per_round, ir.Constant(I64, 1))), per_round)
    chunk = b.select(b.icmp_signed("<", chunk, ir.Constant(I64, 1)), ir.Constant(I64, 1), chunk)
    values = [em.bufs[x] for x in bufs] + [em.vars[v] for v in vars_]
    values += [lo, extent, chunk, ir.Constant(I64, 0), em.status]
    closure_t = ir.LiteralStructType([v.type for v in values])
    closure = alloca(em.fs.entry, closure_t, name + "_closure")
    for i, v in enumerate(values):
        b.store(v, _field(b, closure, closure_t, i))
    task = _emit_task(em, name + "_task", loop, bufs, vars_)
    trampoline = _emit_trampoline(em, name, closure_t, task)
    # threads = min(threads, the process-wide cap); one thread runs the chunks itself
    cap = b.load(b.inttoptr(ir.Constant(I64, cap_address()), PTR), typ=I32)
    n = b.select(b.icmp_signed("<", cap, ir.Constant(I32, threads)), cap, ir.Constant(I32, threads))
    fn = em.fs.fn
    fork, alone, join = (fn.append_basic_block(name + suffix) for suffix in ("_fork", "_alone", "_join"))
    b.cbranch(b.icmp_signed(">", n, ir.Constant(I32, 1)), fork, alone)
    b.position_at_end(fork)
    launch = declare(em.module, pool.ENTRY, VOID, [PTR, PTR, I32])
    b.call(launch, [trampoline, closure, n])
    b.branch(join)
    b.position_at_end(alone)
    b.call(trampoline, [closure])
    b.branch(join)
    b.position_at_end(join)


def _captured(em: Emitter, loop: For):
    """Buffers and enclosing loop variables the loop uses, in first-use order."""
    bufs: dict = {}
    vars_: dict = {}
    for n in pre_order(loop):
        if isinstance(n, E.Var) and n is not loop.loop_var and n in em.vars:
            vars_.setdefault(n, None)
        buf = getattr(n, "buffer", None)
        if buf is not None and buf in em.bufs:
            bufs.setdefault(buf, None)
    # size variables: strides and allocation sizes use them without a Var node in the body
    for v in em.func.size_vars:
        if v in em.vars:
            vars_.setdefault(v, None)
    return list(bufs), list(vars_)


def _field(b: ir.IRBuilder, ptr: ir.Value, struct_t: ir.Type, i: int) -> ir.Value:
    return b.gep(ptr, [ir.Constant(I32, 0), ir.Constant(I32, i)], inbounds=True, source_etype=struct_t)


def _emit_task(em: Emitter, name: str, loop: For, bufs: list, vars_: list) -> ir.Function:
    # a parallel loop is never inside a vector loop: the captured variables are scalars
    var_types = [cast(ir.Value, em.vars[v]).type for v in vars_]
    fnty = ir.FunctionType(VOID, [PTR] * len(bufs) + var_types + [I64, I64, PTR])
    fn = ir.Function(em.module, fnty, name=name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    for arg, buf in zip(fn.args, bufs):
        arg.name = buf.name
        arg.add_attribute("noalias")
    saved = em.fs, em.vars, em.bufs, em.status, em.in_parallel
    em.fs = FunctionState(fn)
    em.bufs = dict(zip(bufs, fn.args))
    em.vars = dict(zip(vars_, fn.args[len(bufs) :]))
    begin, end, status = fn.args[-3:]
    em.status, em.in_parallel = status, True
    try:

        def body(i: ir.Value) -> None:
            em.vars[loop.loop_var] = i
            em.stmt(loop.body)

        em.loop(begin, em.b.sub(end, begin), body, name=loop.loop_var.name)

        def failed(b: ir.IRBuilder) -> None:
            b.store(ir.Constant(I32, 1), status)
            b.ret_void()

        em.fs.finish(failed, lambda b: b.ret_void())
    finally:
        em.fs, em.vars, em.bufs, em.status, em.in_parallel = saved
    return fn


def _emit_trampoline(
    em: Emitter, name: str, closure_t: ir.LiteralStructType, task: ir.Function
) -> ir.Function:
    fn = ir.Function(em.module, ir.FunctionType(VOID, [PTR]), name=name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    closure = fn.args[0]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    n = len(closure_t.elements)
    fields = [
        b.load(_field(b, closure, closure_t, i), typ=closure_t.elements[i]) for i in range(n) if i != n - 2
    ]
    counter = _field(b, closure, closure_t, n - 2)
    *captured, lo, extent, chunk, status = fields
    claim = fn.append_basic_block("claim")
    work = fn.append_basic_block("work")
    done = fn.append_basic_block("done")
    b.branch(claim)
    b.position_at_end(claim)
    start = b.atomic_rmw("add", counter, chunk, "monotonic")
    b.cbranch(b.icmp_signed("<", start, extent), work, done)
    b.position_at_end(work)
    stop = b.add(start, chunk)
    stop = b.select(b.icmp_signed("<", stop, extent), stop, extent)
    b.call(task, captured + [b.add(lo, start), b.add(lo, stop), status])
    b.branch(claim)
    b.position_at_end(done)
    b.ret_void()
    return fn
