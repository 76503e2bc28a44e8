"""From a lowered function to GPU kernels: the form the C-family printers and the emulator read.

A lowered function says *which* loops run on GPU threads (``For`` loops bound to ``blockIdx.*``,
``threadIdx.*``, ``vthread.*``); a CUDA kernel is one body that every thread runs. This pass
makes that explicit, once, so the kernel source (CUDA C, OpenCL C: :mod:`.cfamily`) and the
emulator cannot disagree. Nothing here is particular to one GPU language (the ``cuda:`` of the
error messages names the GPU backend family, as the target kinds do):

* the function splits into **kernels**: each top-level statement bound to GPU threads is one
  launch; global buffers the function allocates become buffers the host allocates;
* a loop bound to ``threadIdx.x`` / ``blockIdx.y`` ... disappears: its variable becomes the
  hardware index (:data:`HW`), guarded by ``index < extent`` where the launch is wider than the
  loop (the launch extent of an axis is the largest loop bound to it); ``vthread`` loops stay
  serial loops (each thread runs its virtual threads in turn, which is what they mean);
* a store into a shared or global buffer that is not under a loop of some launched thread axis
  runs in thread 0 of that axis only (the IR runs it once; every thread would race);
* a **cross-thread reduction** — a loop bound to a thread axis whose body accumulates
  ``X[i] = X[i] + v`` (or max, min, *) at an index that does not depend on the thread — becomes
  a per-thread accumulator, an :class:`AllReduce` across that axis (warp shuffles or a
  shared-memory tree) and one store by thread 0, as TVM's LowerCrossThreadReduction does;
* a :class:`Barrier` (``__syncthreads()``) goes between two statements where the second reads
  (or writes) a shared buffer the first writes (or reads), and at the end of a loop body whose
  next iteration would overwrite what this one reads;
* shared buffers are declared once per kernel (static ``__shared__`` arrays; ``shared.dyn`` ones
  carved from the dynamic shared memory, sized at launch).

Rejected with a ``BuildError`` naming the loop: a loop with memory accesses bound to no thread
axis at the top level ("unbound loop"), a ``blockIdx`` loop under a serial or thread loop,
``parallel`` loops, more threads or shared memory than the target
allows, a cross-thread reduction under a thread-dependent condition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Optional, Sequence, cast

from ...errors import BuildError
from ...ir import expr as E
from ...ir.buffer import Buffer
from ...ir.dtype import dtype_info
from ...ir.arith import evaluate
from ...ir.func import PrimFunc, size_var_sources
from ...ir.functor import pre_order, substitute, uses_var
from ...ir.stmt import Allocate, BufferStore, Evaluate, For, ForKind, IfThenElse, SeqStmt, Stmt, seq
from ...ir.structural import structural_equal
from ..auto_copy import lower_auto_copy
from ..lower import is_lowered, lower
from ...target import Target

#: the hardware indices, one variable each; a thread loop's variable is replaced by one of these
HW: dict[str, E.Var] = {
    tag: E.Var(tag)
    for tag in ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")
}
THREAD_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
BLOCK_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z")

#: scopes private to a thread (no races, no barriers, never guarded)
FRAGMENT_SCOPES = ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")  # tensor-core tiles
PRIVATE_SCOPES = ("local", *FRAGMENT_SCOPES)
SHARED_SCOPES = ("shared", "shared.dyn")


@dataclass(frozen=True, eq=False)
class Barrier(Stmt):
    """``__syncthreads()``: every thread of the block waits here."""


@dataclass(frozen=True, eq=False)
class AllReduce(Stmt):
    """``acc[0] = op over the threads of axis `tag` of acc[0]``, in every thread (a collective:
    every thread of the block reaches it)."""

    acc: Buffer
    op: str  # "sum", "max", "min", "prod"
    tag: str  # "threadIdx.x" ...


@dataclass(frozen=True, eq=False)
class Wmma(Stmt):
    """A warp-wide tensor-core operation (``op``: load_matrix_a, load_matrix_b, mma_sync, fill,
    store): ``loop`` is its 16x16(x16) loop nest (the exact semantics, which the emulator runs);
    every thread of the warp executes it together, so it is never guarded."""

    op: str
    layout: str
    loop: For


@dataclass
class DeviceKernel:
    """One launch: ``params`` (global buffers, in order), grid and block extents (x, y, z),
    ``body`` in device form, the shared buffers it declares."""

    name: str
    params: tuple[Buffer, ...]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    body: Stmt
    shared: list[Buffer] = field(default_factory=list)
    dyn_shared: list[Buffer] = field(default_factory=list)
    #: the function's size variables: scalar kernel parameters after the buffers
    sizes: tuple[E.Var, ...] = ()

    @property
    def num_threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def extent(self, tag: str) -> int:
        dims = self.grid if tag.startswith("blockIdx") else self.block
        return dims["xyz".index(tag[-1])]

    @property
    def dyn_shared_bytes(self) -> int:
        return sum(_padded_bytes(b) for b in self.dyn_shared)

    def dyn_offsets(self) -> dict[Buffer, int]:
        out, off = {}, 0
        for b in self.dyn_shared:
            out[b] = off
            off += _padded_bytes(b)
        return out


@dataclass
class DeviceProgram:
    """A function as GPU kernels run in order; ``host_buffers`` are its intermediate global
    buffers (allocated by the host, passed to the kernels that use them)."""

    func: PrimFunc
    kernels: list[DeviceKernel]
    host_buffers: list[Buffer]


def _padded_bytes(b: Buffer) -> int:
    n = b.alloc_size() * dtype_info(b.dtype).nbytes
    return (n + 15) // 16 * 16


def _loop_name(f: For) -> str:
    return f.loop_var.name


# ------------------------------------------------------------------------------------------
# splitting into kernels


def device_program(func: PrimFunc, target: Target) -> DeviceProgram:
    """The kernels of ``func`` (lowered), checked against ``target``'s limits."""
    host: list[Buffer] = []

    def top(s: Stmt) -> list[Stmt]:
        """The launches under ``s``; a buffer of a GPU scope allocated above them goes into
        the one that uses it."""
        if isinstance(s, SeqStmt):
            return [item for x in s.seq for item in top(x)]
        if isinstance(s, Allocate) and s.buffer.scope == "global":
            host.append(s.buffer)
            return top(s.body)
        if isinstance(s, Allocate):
            inner = top(s.body)
            users = [n for n, item in enumerate(inner) if _uses_buffer(item, s.buffer)]
            if len(users) > 1:
                raise BuildError(
                    f"cuda: {s.buffer.scope} buffer {s.buffer.name} of {func.name} is used by "
                    f"{len(users)} kernels (top-level thread-bound loop nests), but "
                    f"{s.buffer.scope} memory lives within one kernel; compute its producer "
                    f"and consumers under one blockIdx loop (compute_at), or keep it global"
                )
            for n in users:
                inner[n] = Allocate(s.buffer, inner[n])
            return inner
        if isinstance(s, Evaluate):
            return []
        return [s]

    items = top(func.body)
    kernels = []
    for n, item in enumerate(items):
        _check_bound(item, func)
        name = f"{_c_name(func.name)}_kernel{n}"
        kernels.append(_Kernelizer(name, item, target, func, host).kernel())
    return DeviceProgram(func, kernels, host)


def gpu_program(func: PrimFunc, target: Target) -> tuple[PrimFunc, DeviceProgram]:
    """``func`` lowered for a GPU (unless it is already lowered) and its kernels: the read_at /
    write_at copies are dealt over the threads first (TVM's LowerAutoCopy; only GPU targets: a
    serial backend has no threads to deal them to)."""
    lowered = lower(func if is_lowered(func) else lower_auto_copy(func, target.thread_warp_size))
    return lowered, device_program(lowered, target)


def _uses_buffer(s: Stmt, buf: Buffer) -> bool:
    return any(isinstance(n, (BufferStore, E.BufferLoad)) and n.buffer is buf for n in pre_order(s))


def _c_name(name: str) -> str:
    out = re.sub(r"\W", "_", name) or "f"
    return "_" + out if out[0].isdigit() else out


def _check_bound(item: Stmt, func: PrimFunc) -> None:
    """A top-level statement must start with a thread-bound loop (a kernel launch)."""
    s = item
    while isinstance(s, Allocate):
        s = s.body
    if (
        isinstance(s, For)
        and s.kind == ForKind.THREAD_BINDING
        and not (s.thread_tag or "").startswith("vthread")
    ):
        return
    bound = [n for n in pre_order(s) if isinstance(n, For) and n.kind == ForKind.THREAD_BINDING]
    stores = [n for n in pre_order(s) if isinstance(n, BufferStore)]
    what = ", ".join(sorted({st.buffer.name for st in stores})) or "nothing"
    if isinstance(s, For):
        where = (
            f"loop {_loop_name(s)!r} ({s.kind.value}, extent {s.extent}) is not bound to a GPU thread axis"
        )
    else:
        where = f"a {type(s).__name__} outside every thread-bound loop"
    if bound:
        raise BuildError(
            f"cuda: {where} but encloses the thread-bound loop "
            f"{_loop_name(bound[0])!r} ({bound[0].thread_tag}) of {func.name}: a loop "
            f"around a kernel would run on the host; bind it to blockIdx.* or move "
            f"it inside the thread-bound loops"
        )
    raise BuildError(
        f"cuda: {where} in {func.name} (it writes {what}): every statement of a GPU "
        f"kernel runs under blockIdx/threadIdx loops; bind the loop with "
        f"sch.bind(loop, 'blockIdx.x') (postprocessor RewriteUnboundBlock does it)"
    )


# ------------------------------------------------------------------------------------------
# one kernel


@dataclass(frozen=True)
class _Ctx:
    bound: frozenset = frozenset()  # thread axes bound on the path (threadIdx.* only)
    divergent: Optional[str] = None  # why threads may take different paths here
    in_loop: Optional[str] = None  # the innermost serial loop (blockIdx below is wrong)
    in_reduction: bool = False  # inside a cross-thread reduction nest
    blocks: frozenset = frozenset()  # blockIdx axes bound on the path


class _Kernelizer:
    def __init__(self, name: str, item: Stmt, target: Target, func: PrimFunc, host: list[Buffer]):
        self.name, self.item, self.target, self.func, self.host = name, item, target, func, host
        self.launch: dict[str, int] = {}
        self.shared: list[Buffer] = []
        self.dyn_shared: list[Buffer] = []
        self.n_acc = 0

    def kernel(self) -> DeviceKernel:
        self.collect_extents(self.item)
        self.warp_launch()
        self.check_limits()
        body = self.stmt(self.item, _Ctx())
        body = insert_barriers(body, self.launch)
        params = list(self.func.params)
        used = {n.buffer for n in pre_order(body) if isinstance(n, (BufferStore, E.BufferLoad))}
        params += [b for b in self.host if b in used]
        k = DeviceKernel(
            self.name,
            tuple(params),
            tuple(self.launch.get(t, 1) for t in BLOCK_AXES),  # type: ignore
            tuple(self.launch.get(t, 1) for t in THREAD_AXES),  # type: ignore
            body,
            self.shared,
            self.dyn_shared,
            self.func.size_vars,
        )
        local = [n.buffer for n in pre_order(body) if isinstance(n, Allocate)]
        for b in [*self.shared, *self.dyn_shared, *local]:
            if b.is_symbolic:
                raise BuildError(
                    f"cuda: {b.scope} buffer {b.name} has the symbolic shape {list(b.shape)}; "
                    f"GPU on-chip buffers need a static size (cache a tile of constant extent)"
                )
        shared_bytes = sum(_padded_bytes(b) for b in self.shared) + k.dyn_shared_bytes
        if shared_bytes > self.target.max_shared_memory_per_block:
            names = ", ".join(f"{b.name} ({_padded_bytes(b)} B)" for b in self.shared + self.dyn_shared)
            raise BuildError(
                f"cuda: kernel {self.name} of {self.func.name} needs {shared_bytes} "
                f"bytes of shared memory ({names}); the target allows "
                f"{self.target.max_shared_memory_per_block} per block"
            )
        return k

    # launch extents -----------------------------------------------------------------------
    def collect_extents(self, s: Stmt) -> None:
        for n in pre_order(s):
            if isinstance(n, For) and n.kind == ForKind.THREAD_BINDING and n.thread_tag in HW:
                if not isinstance(n.extent, E.IntImm) or not E.is_const(n.min, 0):
                    raise BuildError(
                        f"cuda: loop {_loop_name(n)!r} bound to {n.thread_tag} "
                        f"needs a constant extent and start 0, has "
                        f"[{n.min}, {n.min} + {n.extent})"
                    )
                tag = n.thread_tag
                self.launch[tag] = max(self.launch.get(tag, 1), n.extent.value)

    def warp_launch(self) -> None:
        """Tensor-core operations are warp-wide: threadIdx.x is the warp's 32 lanes (implicit
        when no loop binds it, as TVM's warp_execution)."""
        if not any(isinstance(n, For) and "wmma" in n.annotations for n in pre_order(self.item)):
            return
        warp = self.target.thread_warp_size
        x = self.launch.get("threadIdx.x", warp)
        if x != warp:
            raise BuildError(
                f"cuda: kernel {self.name} of {self.func.name} uses wmma tensor-core "
                f"operations, which a warp executes together, but binds {x} threads "
                f"to threadIdx.x; bind threadIdx.x to the {warp} lanes of a warp "
                f"(warps to threadIdx.y / z)"
            )
        self.launch["threadIdx.x"] = warp

    def check_limits(self) -> None:
        t = self.target
        threads = 1
        for i, tag in enumerate(THREAD_AXES):
            ext = self.launch.get(tag, 1)
            threads *= ext
            if ext > t.max_thread_dims[i]:
                raise BuildError(
                    f"cuda: kernel {self.name} of {self.func.name} binds {ext} "
                    f"threads to {tag}; a GPU allows at most "
                    f"{t.max_thread_dims[i]}"
                )
        if threads > t.max_threads_per_block:
            dims = " x ".join(
                f"{self.launch.get(tag, 1)} ({tag})" for tag in THREAD_AXES if tag in self.launch
            )
            raise BuildError(
                f"cuda: kernel {self.name} of {self.func.name} has {threads} threads "
                f"per block ({dims}); target {t} allows at most "
                f"{t.max_threads_per_block}"
            )
        for i, tag in enumerate(BLOCK_AXES):
            if self.launch.get(tag, 1) > t.max_grid_dims[i]:
                raise BuildError(
                    f"cuda: kernel {self.name} launches {self.launch[tag]} blocks "
                    f"on {tag}; a GPU allows at most {t.max_grid_dims[i]}"
                )

    # statements ---------------------------------------------------------------------------
    def stmt(self, s: Stmt, ctx: _Ctx) -> Stmt:
        if isinstance(s, SeqStmt):
            return seq(*(self.stmt(x, ctx) for x in s.seq))
        if isinstance(s, For):
            return self.loop(s, ctx)
        if isinstance(s, IfThenElse):
            inner = ctx
            if _thread_dependent(s.condition):
                inner = replace(ctx, divergent=ctx.divergent or f"the condition {s.condition}")
            return IfThenElse(
                s.condition,
                self.stmt(s.then_case, inner),
                None if s.else_case is None else self.stmt(s.else_case, inner),
            )
        if isinstance(s, Allocate):
            scope = s.buffer.scope
            if scope == "shared":
                self.shared.append(s.buffer)
                return self.stmt(s.body, ctx)
            if scope == "shared.dyn":
                self.dyn_shared.append(s.buffer)
                return self.stmt(s.body, ctx)
            if scope == "global":
                raise BuildError(
                    f"cuda: global buffer {s.buffer.name} is allocated inside "
                    f"kernel {self.name}: a kernel cannot allocate global memory "
                    f"(set_scope it to 'shared' or 'local', or compute it in a "
                    f"kernel of its own)"
                )
            return Allocate(s.buffer, self.stmt(s.body, ctx))
        if isinstance(s, BufferStore):
            return self.guard_store(s, ctx)
        if isinstance(s, Evaluate):
            return s
        raise BuildError(f"cuda: unsupported statement {type(s).__name__} in {self.func.name}")

    def loop(self, f: For, ctx: _Ctx) -> Stmt:
        tag = f.thread_tag if f.kind == ForKind.THREAD_BINDING else None
        if f.kind == ForKind.PARALLEL:
            raise BuildError(
                f"cuda: loop {_loop_name(f)!r} is parallel: CPU threads do not exist "
                f"in a GPU kernel; bind it to a thread axis instead"
            )
        if tag is not None and tag.startswith("blockIdx"):
            if tag in ctx.blocks:
                raise BuildError(
                    f"cuda: loop {_loop_name(f)!r} is bound to {tag} inside another "
                    f"loop bound to {tag}; fuse them and bind the fused loop once"
                )
            if ctx.bound or ctx.in_loop:
                where = (
                    f"thread axes {', '.join(sorted(ctx.bound))}" if ctx.bound else f"loop {ctx.in_loop!r}"
                )
                raise BuildError(
                    f"cuda: loop {_loop_name(f)!r} bound to {tag} is inside "
                    f"{where}; blockIdx loops must be outermost"
                )
            inner = replace(ctx, blocks=ctx.blocks | {tag})
            return self.stmt(substitute(f.body, {f.loop_var: HW[tag]}), inner)
        if "wmma" in f.annotations:
            if ctx.divergent:
                raise BuildError(
                    f"cuda: the wmma {f.annotations['wmma']} of loop "
                    f"{_loop_name(f)!r} is under {ctx.divergent}: a whole warp "
                    f"executes it, so no thread of the warp may skip it"
                )
            return Wmma(f.annotations["wmma"], f.annotations.get("wmma.layout", "row_major"), f)
        if not ctx.in_reduction:
            red = _find_reduction(f)
            if red is not None:
                return self.reduction(f, red, ctx)
        if tag is None or tag.startswith("vthread"):
            if tag is not None:  # virtual threads: each thread runs them in turn
                f = For(f.loop_var, f.min, f.extent, ForKind.UNROLLED, f.body)
            inner = replace(ctx, in_loop=_loop_name(f))
            return f.with_(body=self.stmt(f.body, inner))
        # threadIdx.* (bound again under a loop of the same axis: the same threads, as in a
        # cooperative fetch under the compute's thread loops)
        ext = cast(E.IntImm, f.extent).value  # thread extents are constant
        hw = HW[tag]
        partial = ext < self.launch[tag]
        inner = replace(
            ctx, bound=ctx.bound | {tag}, divergent=ctx.divergent or (f"{tag} < {ext}" if partial else None)
        )
        out = self.stmt(substitute(f.body, {f.loop_var: hw}), inner)
        if partial:
            out = IfThenElse(E.LT(hw, E.IntImm(ext)), out)
        return out

    def guard_store(self, s: BufferStore, ctx: _Ctx) -> Stmt:
        if s.buffer.scope in PRIVATE_SCOPES:
            return s
        unbound = [t for t in THREAD_AXES if self.launch.get(t, 1) > 1 and t not in ctx.bound]
        if not unbound:
            return s
        cond: E.Expr = E.EQ(HW[unbound[0]], E.IntImm(0))
        for t in unbound[1:]:
            cond = E.And(cond, E.EQ(HW[t], E.IntImm(0)))
        return IfThenElse(cond, s)

    # cross-thread reduction -------------------------------------------------------------------
    def reduction(self, f: For, red: "_Reduction", ctx: _Ctx) -> Stmt:
        """The reduction nest ``f`` (its loops, serial and thread-bound, all reduce into one
        element): each thread accumulates its share in a register, the threads combine them
        (:class:`AllReduce` per reduced axis) and thread 0 stores ``init (+) total``."""
        tags = ", ".join(red.tags)
        if ctx.divergent:
            raise BuildError(
                f"cuda: cross-thread reduction into {red.buffer.name} over {tags} "
                f"(loop {_loop_name(f)!r}) is under {ctx.divergent}, which threads "
                f"may take differently; every thread must reach the reduction"
            )
        dtype = red.buffer.dtype
        acc = Buffer(f"{red.buffer.name}_red{self.n_acc}", (1,), dtype, "local")
        self.n_acc += 1
        zero = (E.IntImm(0),)
        acc_load = E.BufferLoad(acc, zero)

        def rewrite(s: Stmt) -> Optional[Stmt]:
            """X[idx] = X[idx] (+) v  ->  acc = acc (+) v; the init store dropped (its value
            starts the combination below)."""
            if isinstance(s, SeqStmt):
                parts = [x for x in (rewrite(x) for x in s.seq) if x is not None]
                return seq(*parts) if parts else None
            if isinstance(s, For):
                body = rewrite(s.body)
                return None if body is None else s.with_(body=body)
            if isinstance(s, IfThenElse):
                then = rewrite(s.then_case)
                other = None if s.else_case is None else rewrite(s.else_case)
                if then is None and other is None:
                    return None
                if then is None:
                    return IfThenElse(E.Not(s.condition), cast(Stmt, other))  # not both None
                return IfThenElse(s.condition, then, other)
            if isinstance(s, Allocate):
                body = rewrite(s.body)
                return None if body is None else Allocate(s.buffer, body)
            if isinstance(s, BufferStore) and s.buffer is red.buffer:
                value = _combined_value(s, red.op)
                if value is None:
                    return None
                return BufferStore(acc, _combine(red.op, acc_load, value), zero)
            return s

        body = rewrite(f)
        inner = replace(ctx, divergent=None, in_reduction=True)
        local = self.stmt(body, inner) if body is not None else Evaluate(E.IntImm(0))
        start = red.init if red.init is not None else E.BufferLoad(red.buffer, red.indices)
        store = BufferStore(red.buffer, _combine(red.op, start, acc_load), red.indices)
        result: Stmt = store
        if red.buffer.scope not in PRIVATE_SCOPES:
            result = self.guard_store(store, ctx)
        return Allocate(
            acc,
            seq(
                BufferStore(acc, _identity(red.op, dtype), zero),
                local,
                *(AllReduce(acc, red.op, tag) for tag in red.tags),
                result,
            ),
        )


# ------------------------------------------------------------------------------------------
# reductions


@dataclass
class _Reduction:
    buffer: Buffer
    indices: tuple[E.Expr, ...]
    op: str
    init: Optional[E.Expr]
    tags: tuple[str, ...]  # the thread axes reduced over


_OPS: dict[type, str] = {E.Add: "sum", E.Max: "max", E.Min: "min", E.Mul: "prod"}


def _combined_value(s: BufferStore, op: str) -> Optional[E.Expr]:
    """``v`` when ``s`` is ``X[i] = X[i] op v`` (either operand order), else None."""
    if _OPS.get(type(s.value)) != op:
        return None
    v = cast(E.BinaryOp, s.value)  # an _OPS type
    for mine, other in ((v.a, v.b), (v.b, v.a)):
        if (
            isinstance(mine, E.BufferLoad)
            and mine.buffer is s.buffer
            and all(structural_equal(a, b) for a, b in zip(mine.indices, s.indices))
            and not _loads(other, s.buffer)
        ):
            return other
    return None


def _loads(e: E.Expr, buf: Buffer) -> bool:
    return any(isinstance(n, E.BufferLoad) and n.buffer is buf for n in pre_order(e))


def _combine(op: str, a: E.Expr, b: E.Expr) -> E.Expr:
    return {"sum": E.Add, "max": E.Max, "min": E.Min, "prod": E.Mul}[op](a, b)


def _identity(op: str, dtype: str) -> E.Expr:
    if op == "sum":
        return E.const(0, dtype)
    if op == "prod":
        return E.const(1, dtype)
    if E.is_float(dtype):
        return E.FloatImm(float("-inf") if op == "max" else float("inf"), dtype)
    info = dtype_info(dtype)
    return E.IntImm(int(info.min if op == "max" else info.max), dtype)


def _find_reduction(f: For) -> Optional[_Reduction]:
    """The cross-thread reduction loop ``f`` is the top of, if any: its stores into one buffer
    ``X`` are ``X[idx] = X[idx] op v`` (and at most an init ``X[idx] = c``) at an ``idx`` that
    depends on no loop of ``f``, and some of those loops are bound to threadIdx axes."""
    loops = [n for n in pre_order(f) if isinstance(n, For)]
    inner_vars = {n.loop_var for n in loops}
    private = {n.buffer for n in pre_order(f) if isinstance(n, Allocate)}
    found: Optional[_Reduction] = None
    stores = [n for n in pre_order(f.body) if isinstance(n, BufferStore) and n.buffer not in private]
    for s in stores:
        if any(uses_var(i, v) for i in s.indices for v in inner_vars):
            continue
        op = _OPS.get(type(s.value))
        if op is None or _combined_value(s, op) is None:
            continue
        if found is not None and (found.buffer is not s.buffer or found.op != op):
            raise BuildError(
                f"cuda: loop {_loop_name(f)!r} reduces into both "
                f"{found.buffer.name} ({found.op}) and {s.buffer.name} ({op}) "
                f"across threads; one cross-thread reduction per loop nest"
            )
        found = _Reduction(s.buffer, s.indices, op, None, ())
    if found is None:
        return None
    # the axes reduced over: thread loops around the accumulating stores (a thread loop of a
    # cooperative fetch beside them in the nest is not one)
    paths = _thread_paths(f)
    found.tags = tuple(sorted({t for s in stores if s.buffer is found.buffer for t in paths.get(id(s), ())}))
    if not found.tags:
        return None  # a reduction each thread does alone
    for n in loops:
        if (n.thread_tag or "").startswith("blockIdx"):
            raise BuildError(
                f"cuda: loop {_loop_name(n)!r} bound to {n.thread_tag} is inside the "
                f"reduction into {found.buffer.name}; blocks cannot reduce together "
                f"(rfactor the reduction and reduce the partial results in a "
                f"second kernel)"
            )
    for s in stores:
        if s.buffer is found.buffer and _combined_value(s, found.op) is None:
            if not all(structural_equal(a, b) for a, b in zip(s.indices, found.indices)):
                return None  # other elements of X written too: not a plain reduction
            if _loads(s.value, found.buffer) or any(uses_var(s.value, v) for v in inner_vars):
                raise BuildError(
                    f"cuda: cannot reduce across threads into {found.buffer.name}: "
                    f"its initial value {s.value} depends on the threads"
                )
            found.init = s.value
    return found


def _thread_paths(root: Stmt) -> dict[int, frozenset]:
    """id of each store under ``root`` -> the threadIdx axes of the loops around it."""
    out: dict[int, frozenset] = {}

    def walk(s: Stmt, tags: frozenset) -> None:
        if isinstance(s, BufferStore):
            out[id(s)] = tags
            return
        if isinstance(s, For) and s.kind == ForKind.THREAD_BINDING and s.thread_tag in THREAD_AXES:
            tags = tags | {s.thread_tag}
        for name in ("body", "then_case", "else_case"):
            child = getattr(s, name, None)
            if isinstance(child, Stmt):
                walk(child, tags)
        for child in getattr(s, "seq", ()):
            walk(child, tags)

    walk(root, frozenset())
    return out


def _thread_dependent(e: E.Expr) -> bool:
    return any(
        isinstance(n, E.Var) and n.name.startswith("threadIdx") and HW.get(n.name) is n for n in pre_order(e)
    ) or any(isinstance(n, E.BufferLoad) for n in pre_order(e))


# ------------------------------------------------------------------------------------------
# barriers


def _accesses(s: Stmt) -> tuple[set[Buffer], set[Buffer]]:
    """(read, written) shared buffers under ``s``. As in TVM, threads of a block communicate
    through shared memory; a global buffer written by one thread and read by another within one
    kernel is not synchronized (the emulator reports it as a race)."""
    reads, writes = set(), set()
    for n in pre_order(s):
        if isinstance(n, E.BufferLoad) and n.buffer.scope in SHARED_SCOPES:
            reads.add(n.buffer)
        elif isinstance(n, BufferStore) and n.buffer.scope in SHARED_SCOPES:
            writes.add(n.buffer)
    return reads, writes


def insert_barriers(body: Stmt, launch: dict[str, int]) -> Stmt:
    """``body`` with a :class:`Barrier` wherever threads of a block communicate through memory
    (TVM's ThreadSync, at the granularity of the statements of a sequence): before a statement
    that reads what an earlier one wrote since the last barrier (or writes what it read), and
    at the end of a loop body whose start writes what its end reads. Only blocks with more than
    one thread need any."""
    if all(launch.get(t, 1) == 1 for t in THREAD_AXES):
        return body
    written_in_kernel = {n.buffer for n in pre_order(body) if isinstance(n, BufferStore)}
    return _Sync(written_in_kernel).stmt(body)


class _Sync:
    def __init__(self, written: set[Buffer]):
        self.written = written

    def relevant(self, bufs: set[Buffer]) -> set[Buffer]:
        # a global buffer no statement writes is read-only here: no ordering needed
        return {b for b in bufs if b in self.written}

    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, SeqStmt):
            return self.sequence(list(s.seq))
        if isinstance(s, For):
            body = self.stmt(s.body)
            inner = body
            while isinstance(inner, Allocate):
                inner = inner.body
            parts = list(inner.seq) if isinstance(inner, SeqStmt) else [inner]
            if len(parts) > 1 and not isinstance(parts[-1], Barrier):
                # next iteration's first statements against this iteration's later ones
                first_r, first_w = _accesses(parts[0])
                rest_r, rest_w = set(), set()
                for p in parts[1:]:
                    r, w = _accesses(p)
                    rest_r |= r
                    rest_w |= w
                if self.relevant((first_w & rest_r) | (first_r & rest_w) | (first_w & rest_w)):
                    body = seq(body, Barrier())
            return s.with_(body=body)
        if isinstance(s, IfThenElse):
            return IfThenElse(
                s.condition, self.stmt(s.then_case), None if s.else_case is None else self.stmt(s.else_case)
            )
        if isinstance(s, Allocate):
            return Allocate(s.buffer, self.stmt(s.body))
        return s

    def sequence(self, items: list[Stmt]) -> Stmt:
        out: list[Stmt] = []
        pend_r: set[Buffer] = set()
        pend_w: set[Buffer] = set()
        for item in items:
            r, w = _accesses(item)
            r, w = self.relevant(r), self.relevant(w)
            if (r & pend_w) or (w & pend_r) or (w & pend_w):
                if out and not isinstance(out[-1], Barrier):
                    out.append(Barrier())
                pend_r, pend_w = set(), set()
            out.append(self.stmt(item))
            if _has_barrier(out[-1]):  # a barrier inside ends what was pending before it
                pend_r, pend_w = _after_last_barrier(out[-1])
            else:
                pend_r |= r
                pend_w |= w
        return seq(*out)


def _has_barrier(s: Stmt) -> bool:
    return any(isinstance(n, Barrier) for n in pre_order(s))


def _after_last_barrier(s: Stmt) -> tuple[set[Buffer], set[Buffer]]:
    """Accesses that may follow the last barrier inside ``s`` (conservatively: all of them
    when the barrier is inside a loop, since a loop may run again)."""
    return _accesses(s)


def perfect_nest(f: For) -> tuple[list[For], BufferStore]:
    """The loops of a perfect nest (a :class:`Wmma`'s) and the one store inside."""
    loops = [f]
    while isinstance(loops[-1].body, For):
        loops.append(loops[-1].body)
    body = loops[-1].body
    if not isinstance(body, BufferStore):
        raise BuildError(f"cuda: a wmma loop nest must hold one store, got {body}")
    return loops, body


def host_sizes(func: PrimFunc, arrays: Sequence) -> dict:
    """Each size variable of ``func`` -> its value, read from the (checked) arrays."""
    if not func.size_vars:
        return {}
    return {v: int(arrays[k].shape[d]) for v, (k, d) in size_var_sources(func).items()}


def host_count(buf: Buffer, sizes: dict) -> int:
    """Elements of ``buf``, its symbolic size evaluated at ``sizes``."""
    n = buf.alloc_size()
    return n if isinstance(n, int) else int(evaluate(n, sizes))
