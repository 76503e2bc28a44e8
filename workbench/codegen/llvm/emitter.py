"""Emit LLVM IR (through ``llvmlite.ir``) for a function in lowered form.

The module holds::

    i32 @<name>(ptr noalias %A, ptr noalias %B, ..., i64 %n, ...)
                                                       ; the kernel: buffers, then the size
                                                       ; variables (func.size_vars order);
                                                       ; returns 0, or 1 when a heap
                                                       ; allocation failed
    i32 @<name>_packed(ptr %args)                      ; C ABI entry: args is a void*[]
                                                       ; (a size variable's slot holds its value)
    void @<name>_par<k>(ptr %closure)                  ; one per parallel loop (parallel.py)

Statements are translated here (expressions and memory accesses in :mod:`.expressions`): loops
become bottom-tested ``phi`` loops over i64 counters, ``unrolled`` loops are copied, ``parallel``
ones are outlined onto the thread pool, and a ``vectorized`` loop whose body allows it becomes
explicit SIMD code (:meth:`KernelEmitter.vector_loop`), otherwise a scalar loop carrying
``llvm.loop.vectorize`` metadata. Intermediate buffers are allocated in the entry block of the
function being emitted, once per call (or per parallel task), whatever loop they sit in; one of
a symbolic size is always on the heap, its byte count computed from the size variables there.

``check_bounds=True`` emits the debug build of ``wb.build(..., check_bounds=True)``: every loop
is serial scalar code (no SIMD, no thread pool), every load and store first checks each index
against its dimension's extent (a load under an ``if_then_else`` only where the guard holds) and
on the first violation records ``[access id + 1, index...]`` in the global ``@<name>_oob`` and
returns 2; intermediate buffers are filled with a poison value where they are allocated.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Callable, Optional, Union, cast

from llvmlite import ir

from ...errors import BuildError
from ...ir import expr as E
from ...ir.buffer import Buffer
from ...ir.dtype import dtype_info, poison
from ...ir.func import PrimFunc
from ...ir.functor import children, pre_order, substitute, transform
from ...ir.stmt import Allocate, BufferStore, Evaluate, For, ForKind, IfThenElse, SeqStmt, Stmt, make_for
from ...target import Target
from . import intrinsics as K
from .analysis import Interval, divisor_split, flat_offset, linear_coeff, loop_interval, vector_lanes
from .dtypes import I1, I32, I64, PTR, const, is_float_dtype, lanes_of, mem_type, to_memory
from .expressions import ExpressionEmitter, Ramp
from .function import FunctionState, alloca
from . import pool
from .parallel import emit_parallel


#: Intermediate buffers up to these sizes live on the stack; larger ones are heap-allocated once
#: per call (or per parallel task) at function entry, never per iteration. Two bounds:
#:
#: * a *tile*, a buffer allocated inside a loop (compacted under a ``compute_at``): up to 1 KB,
#:   TVM's ``kMaxStackAlloca``, for TVM's reason: LLVM's SROA splits a stack buffer whose
#:   accesses all have constant offsets (accumulators under unrolled loops) into one SSA value
#:   per vector, live across the whole reduction. A 32 x 64 float tile (128 zmm) then spilled
#:   ~700 times per iteration of its reduction loop (TVM's 17th-best C1D record ran 2x slower
#:   than TVM's build). On the heap it stays in memory, as TVM's workspace buffers do, and LLVM
#:   keeps in registers what a loop small enough for LICM reuses, unless that is more than the
#:   registers hold (:meth:`KernelEmitter._register_overflow`). Up to 1 KB (16 zmm, 32 ymm) a
#:   promoted tile mostly fits the register file.
#: * a stage's whole buffer, at function level: up to 64 KB. Its indices follow the loops, so
#:   SROA leaves it alone; on the heap it costs: softmax's 32 KB and 8 KB rfactor buffers
#:   there made TVM's SFM records 1.4-2.3x slower than on the stack.
#:   Or the register file where it is larger: AVX-512's 32 zmm hold a 2 KB tile (ResNet's
#:   default conv schedule keeps 28 accumulators, 1792 B, in registers).
TILE_STACK_BYTES = 1024
STACK_BYTES = 64 * 1024


def vector_registers(target: Target) -> int:
    """The vector registers of ``target``: 32 with AVX-512, 16 below it."""
    return 32 if target.vector_width_bits >= 512 else 16


def tile_stack_bytes(target: Target) -> int:
    """The stack bound of a tile for ``target``: :data:`TILE_STACK_BYTES`, or its vector
    register file where that is larger."""
    return max(TILE_STACK_BYTES, vector_registers(target) * target.vector_width_bits // 8)


#: LLVM's LICM promotes nothing in a loop of more memory accesses than this
#: (``-licm-mssa-max-acc-promotion``): there the emitter need not keep a tile in memory itself,
#: and does not: its opaque pointer would also stop LLVM's own unrolling and store-to-load
#: forwarding across iterations (TVM's C1D record 23, 16 KB of accumulators in a loop of ~600
#: accesses, ran 1.6x slower with it)
LICM_PROMOTION_CAP = 250

#: ``unrolled`` loops are copied in the IR while extent x body size stays under this many nodes;
#: beyond it (or for a non-constant extent) the loop carries ``llvm.loop.unroll.enable``
#: metadata: LLVM unrolls it by a factor it chooses rather than bloating the code.
UNROLL_BUDGET = 20000
#: loop annotations of MetaSchedule's unroll decision (TVM's names): unroll every serial loop
#: below whose unrolled body stays under this many statements; explicitly (IR copies) or not
#: (``llvm.loop.unroll.full`` metadata)
AUTO_UNROLL_KEY = "pragma_auto_unroll_max_step"
UNROLL_EXPLICIT_KEY = "pragma_unroll_explicit"
#: a vectorized loop of up to this many whole machine vectors becomes a single wide vector
#: (LLVM splits it into registers); others loop over machine-vector chunks.
MAX_VECTORS_PER_CHUNK = 4


class _LoopID(ir.values.MDValue):
    """Loop metadata ``!0 = !{!0, props...}``: self-referential, hence unique per loop."""

    def __init__(self, module: ir.Module, props: list):
        super().__init__(module, [], name=str(len(module.metadata)))
        self.operands = (self,) + tuple(props)

    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other


class KernelEmitter(ExpressionEmitter):
    """Translate one lowered ``PrimFunc`` into an ``ir.Module`` (see the module docstring)."""

    def __init__(self, func: PrimFunc, target: Target, check_bounds: bool = False):
        self.func = func
        self.check_bounds = check_bounds
        #: check_bounds: per checked access, (verb, buffer) ; the record's global and exit block
        self.accesses: list[tuple[str, Buffer]] = []
        self.oob_record: Optional[ir.GlobalVariable] = None
        self.oob_exit: Optional[ir.Block] = None
        self.target = target
        self.name = re.sub(r"\W", "_", func.name) or "kernel"
        self.module = ir.Module(name=self.name)
        self.vars: dict[E.Var, Union[ir.Value, Ramp]] = {}
        self.bufs: dict[Buffer, ir.Value] = {}
        self.ranges: dict[E.Var, Interval] = {}
        self.vec: Optional[tuple[E.Var, int]] = None  # (vector var, lanes) inside SIMD code
        #: (lo, step): the vector variable at lane 0 is ``lo + k * step`` for some k; None: unknown
        self.vec_align: Optional[tuple[int, int]] = None
        self.mask: Optional[ir.Value] = None  # lanes/iterations a guard lets through
        self.hoisted: dict[int, ir.Value] = {}  # offsets evaluated ahead of a branch (by read)
        self.scalar_index = False  # evaluate the ramp at lane 0
        self.in_parallel = False
        self.auto_unroll: tuple[float, bool] = (0, True)  # (max steps, explicit) in scope
        self.fs: FunctionState
        self.status: ir.Value  # i32 slot: nonzero = allocation failed
        self.n_parallel = 0
        self.sizes: dict[Stmt, int] = {}  # statements counted once: unrolled bodies repeat
        self.allocated: set[Buffer] = set()  # intermediate buffers in scope

    @property
    def b(self) -> ir.IRBuilder:
        return self.fs.builder

    # module --------------------------------------------------------------------------------
    def emit(self) -> ir.Module:
        params = self.func.params
        sizes = self.func.size_vars  # int32 and int64 alike live in i64 registers
        fn = ir.Function(
            self.module, ir.FunctionType(I32, [PTR] * len(params) + [I64] * len(sizes)), name=self.name
        )
        for arg, buf in zip(fn.args, params):
            arg.name = buf.name
            arg.add_attribute("noalias")
            self.bufs[buf] = arg
        for arg, v in zip(fn.args[len(params) :], sizes):
            arg.name = v.name
            self.vars[v] = arg
        fn.attributes.add("nounwind")
        fn.attributes.add("noinline")  # compiled once, not again inlined into the entry
        self.fs = FunctionState(fn)
        self.status = alloca(self.fs.entry, I32, "status")
        self.fs.entry.store(ir.Constant(I32, 0), self.status)
        self.stmt(self.func.body)
        if self.oob_exit is not None:  # every heap buffer is known now: free them there too
            _move_to_end(fn, self.oob_exit)
            oob = ir.IRBuilder(self.oob_exit)
            self.fs.free_heap(oob)
            oob.ret(ir.Constant(I32, OUT_OF_BOUNDS))
        self.fs.finish(lambda b: b.ret(ir.Constant(I32, 1)), lambda b: b.ret(b.load(self.status)))
        self._packed_entry(fn)
        return self.module

    def _packed_entry(self, kernel: ir.Function) -> None:
        fn = ir.Function(self.module, ir.FunctionType(I32, [PTR]), name=self.name + "_packed")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        args = [
            b.load(b.gep(fn.args[0], [ir.Constant(I64, i)], source_etype=PTR), typ=arg.type)
            for i, arg in enumerate(kernel.args)
        ]
        b.ret(b.call(kernel, args))

    # statements ----------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, BufferStore):
            self.store(s)
        elif isinstance(s, For):
            self.for_(s)
        elif isinstance(s, IfThenElse):
            self.if_(s)
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, Evaluate):
            self.expr(s.value)
        else:
            raise BuildError(
                f"llvm: {type(s).__name__} is not in lowered form "
                f"(expected loops, stores, ifs and allocations)"
            )

    def for_(self, s: For) -> None:
        if s.kind == ForKind.THREAD_BINDING:
            raise BuildError(
                f"llvm: loop {s.loop_var.name} is bound to {s.thread_tag}; "
                f"thread bindings need a GPU target such as 'cuda'"
            )
        self.ranges[s.loop_var] = loop_interval(s, self.ranges)
        outer_auto = self.auto_unroll
        if AUTO_UNROLL_KEY in s.annotations:
            self.auto_unroll = (
                _int(s.annotations[AUTO_UNROLL_KEY]),
                bool(_int(s.annotations.get(UNROLL_EXPLICIT_KEY, 1))),
            )
        try:
            ext = s.extent.value if isinstance(s.extent, E.IntImm) else None
            if self.check_bounds and s.kind in (ForKind.PARALLEL, ForKind.VECTORIZED):
                self.serial(s)  # the debug build: scalar code in one thread
            elif s.kind == ForKind.SERIAL and self._auto_unrolled(s):
                if self.auto_unroll[1]:
                    self.unrolled(s)
                else:
                    self.serial(s, [("llvm.loop.unroll.full",)])
            elif s.kind == ForKind.PARALLEL and self._can_fork(ext):
                emit_parallel(self, s)
            elif s.kind == ForKind.VECTORIZED and self.vec is None and (split := self._split_at_divisors(s)):
                self.stmt(split)
            elif s.kind == ForKind.VECTORIZED and self.vec is None:
                lanes = vector_lanes(s, self.target.vector_width_bits)
                if lanes is not None:
                    self.vector_loop(s, lanes)
                else:  # not expressible as SIMD here: ask LLVM's loop vectorizer
                    lanes = self.target.vector_width_bits // _widest(s)
                    self.serial(
                        s,
                        [
                            ("llvm.loop.vectorize.enable", ir.Constant(I1, 1)),
                            ("llvm.loop.vectorize.width", ir.Constant(I32, lanes)),
                        ],
                    )
            elif s.kind == ForKind.UNROLLED:
                if ext is not None and ext * self.size(s.body) <= UNROLL_BUDGET:
                    self.unrolled(s)
                elif ext is None:  # a symbolic trip count: LLVM warns where it cannot unroll
                    self.serial(s)
                else:
                    self.serial(s, [("llvm.loop.unroll.enable",)])
            elif _contiguous_reduction_nest(s):  # (before: strided in `s` alone, not in the nest)
                self.flattened(s, cast(For, s.body))
            else:
                props: list[tuple] = []
                if _strided_float_reduction(s) or _scattered_float_store(s):
                    props.append(("llvm.loop.vectorize.enable", ir.Constant(I1, 0)))
                if _vector_accumulation(s):
                    props.append(("llvm.loop.unroll.disable",))
                self.serial(s, props or None)
        finally:
            self.vars.pop(s.loop_var, None)
            self.ranges.pop(s.loop_var, None)
            self.auto_unroll = outer_auto

    def unrolled(self, s: For) -> None:
        """One copy of the body per iteration (constant extent)."""
        lo = self.expr(s.min)
        for k in range(cast(E.IntImm, s.extent).value):
            # a constant where the start is one: offsets fold it (ExpressionEmitter.offset), and
            # each copy's own range decides the guards it can (ExpressionEmitter._decided): the
            # middle copies of an unrolled padded row need no padding test
            if isinstance(lo, ir.Constant):
                self.vars[s.loop_var] = ir.Constant(lo.type, lo.constant + k)
                self.ranges[s.loop_var] = (lo.constant + k, lo.constant + k)
            else:
                self.vars[s.loop_var] = self.b.add(lo, ir.Constant(lo.type, k))
            self.stmt(s.body)

    def flattened(self, outer: For, inner: For) -> None:
        """``outer`` and ``inner`` (see :func:`_contiguous_reduction_nest`) as one loop over
        ``k``: ``outer``'s variable is ``k >> log2(n)``, ``inner``'s ``k & (n - 1)`` for
        ``inner``'s extent ``n``, and the addresses they make fold back into ``k``."""
        n = cast(E.IntImm, inner.extent).value
        count = cast(E.IntImm, outer.extent).value * n
        self.ranges[inner.loop_var] = (0, n - 1)
        shift = n.bit_length() - 1
        spilled = self._register_overflow({outer.loop_var, inner.loop_var}, inner.body)

        def body(k: ir.Value) -> None:
            self.vars[outer.loop_var] = self.b.lshr(k, ir.Constant(k.type, shift))
            self.vars[inner.loop_var] = self.b.and_(k, ir.Constant(k.type, n - 1))
            with self._in_memory(spilled, k):
                self.stmt(inner.body)

        try:
            self.loop(
                ir.Constant(I64, 0),
                count,
                body,
                FLAT_REDUCTION_LOOP,
                name=f"{outer.loop_var.name}_{inner.loop_var.name}",
            )
        finally:
            self.vars.pop(inner.loop_var, None)
            self.ranges.pop(inner.loop_var, None)

    def size(self, s: Stmt) -> int:
        """Nodes under ``s``, counted once per statement (an unrolled loop's body is emitted once
        per iteration, and each copy would count its inner loops again)."""
        if s not in self.sizes:
            self.sizes[s] = sum(1 for _ in pre_order(s))
        return self.sizes[s]

    def _auto_unrolled(self, s: For) -> bool:
        """Under ``pragma_auto_unroll_max_step = N`` (MetaSchedule's unroll annotation), a
        serial loop is unrolled when its fully unrolled body has at most N statements."""
        max_step = self.auto_unroll[0]
        if max_step <= 0:
            return False
        steps = _unrolled_steps(s, max_step)
        return steps is not None and steps <= max_step

    def _can_fork(self, extent: Optional[int]) -> bool:
        return (
            not self.in_parallel
            and self.vec is None
            and self.target.num_cores > 1
            and extent != 1
            and pool.available()
        )

    def serial(self, s: For, props: Optional[list] = None) -> None:
        lo = self.expr(s.min)
        extent = s.extent.value if isinstance(s.extent, E.IntImm) else self.expr(s.extent)
        spilled = [] if extent == 1 else self._register_overflow({s.loop_var}, s.body)

        def body(i: ir.Value) -> None:
            self.vars[s.loop_var] = i
            with self._in_memory(spilled, i):
                self.stmt(s.body)

        self.loop(lo, extent, body, props, name=s.loop_var.name)

    def _register_overflow(self, loop_vars: set, body: Stmt) -> list[Buffer]:
        """The intermediate buffers whose elements that ``body`` reuses on every iteration of
        the loop over ``loop_vars`` (accesses at addresses the loop does not change, under
        unrolled and vectorized loops only) need more vector registers than the target has,
        or twice as many where each is stored once per iteration: those stay in memory in
        this loop (:meth:`_in_memory`).

        LLVM's LICM promotes such accesses to values carried across the loop (so does SROA for
        a stack buffer whose offsets are all constant) whatever their number. An accumulator
        the register allocator then spills costs a reload and a store per update: TVM's C2D
        record 9 carried 56 accumulators updated 3 times per iteration (866 vector moves for
        168 FMAs; 1.8x slower than TVM's build). Updated once, a spill costs what memory
        would and the rest stay in registers: up to twice the registers, promotion wins (an
        AVX2 matmul tile of 32 ymm: 0.74 ms promoted, 0.94 in memory), beyond it memory does
        (40 to 56 ymm: 1.3 ms against 1.5-1.9; Zen 5, znver3 code). TVM's build escapes
        promotion by accident: its loop holds more memory accesses than LICM's limit (250)."""
        candidates = [b for b in self.allocated if b in self.bufs]
        if not candidates or self.check_bounds:
            return []
        vector_bytes = self.target.vector_width_bits // 8
        need: dict[Buffer, int] = {}  # registers its carried elements take
        updates: dict[Buffer, int] = {}  # stores to each of them per iteration
        read: set[Buffer] = set()  # read at such addresses too
        patterns: dict[tuple, int] = {}  # every access in the loop: the copies unrolling makes

        def counted(buf: Buffer, indices, unrolled: dict, store: bool) -> None:
            used = {v for i in indices for v in pre_order(i) if isinstance(v, E.Var)}
            copies = 1
            for v, n in unrolled.items():
                if v in used:
                    copies *= n
            patterns[(buf, store, tuple(str(i) for i in indices))] = copies

        def access(buf: Buffer, indices, unrolled: dict, vec, store: bool = False) -> None:
            counted(buf, indices, unrolled, store)
            if buf not in candidates:
                return
            used = {v for i in indices for v in pre_order(i) if isinstance(v, E.Var)}
            if used & loop_vars:  # streamed through by the loop: nothing to carry
                return
            count = reuse = 1
            nbytes = dtype_info(buf.dtype).nbytes
            vector = vec is not None and vec[0] in used
            offset = flat_offset(buf, indices)
            for v, n in unrolled.items():
                if v not in used:
                    reuse *= n
                elif not vector and linear_coeff(offset, v) == 1:
                    # consecutive scalars: LLVM's SLP vectorizer packs them into registers (a
                    # depthwise record's 112 scalar accumulators, 8 per row, took 14 ymm; kept in
                    # memory it ran 8x slower)
                    count *= -(-n * nbytes // vector_bytes)
                else:
                    count *= n
            if vector:
                count *= -(-cast("tuple[E.Var, int]", vec)[1] * nbytes // vector_bytes)
            need[buf] = max(need.get(buf, 0), count)
            if store:
                updates[buf] = max(updates.get(buf, 1), reuse)
            else:
                read.add(buf)

        def loads(e, unrolled, vec) -> None:
            for n in pre_order(e):
                if isinstance(n, E.BufferLoad):
                    access(n.buffer, n.indices, unrolled, vec)

        def visit(x: Stmt, unrolled: dict, vec, auto: tuple) -> None:
            if isinstance(x, SeqStmt):
                for y in x.seq:
                    visit(y, unrolled, vec, auto)
            elif isinstance(x, BufferStore):
                access(x.buffer, x.indices, unrolled, vec, store=True)
                loads(x.value, unrolled, vec)
                for i in x.indices:
                    loads(i, unrolled, vec)
            elif isinstance(x, IfThenElse):
                loads(x.condition, unrolled, vec)
                for case in (x.then_case, x.else_case):
                    if case is not None:
                        visit(case, unrolled, vec, auto)
            elif isinstance(x, Allocate):
                visit(x.body, unrolled, vec, auto)
            elif isinstance(x, Evaluate):
                loads(x.value, unrolled, vec)
            elif isinstance(x, For) and isinstance(x.extent, E.IntImm):
                if AUTO_UNROLL_KEY in x.annotations:
                    auto = (_int(x.annotations[AUTO_UNROLL_KEY]),)
                n = x.extent.value
                if x.kind == ForKind.VECTORIZED and vec is None:
                    visit(x.body, unrolled, (x.loop_var, n), auto)
                elif x.kind == ForKind.UNROLLED or (
                    x.kind == ForKind.SERIAL
                    and auto[0] > 0
                    and (steps := _unrolled_steps(x, auto[0])) is not None
                    and steps <= auto[0]
                ):
                    visit(x.body, {**unrolled, x.loop_var: n}, vec, auto)
            # any other loop stays a loop: what it carries is decided there

        visit(body, {}, None, (self.auto_unroll[0],))
        if sum(patterns.values()) > LICM_PROMOTION_CAP:
            return []  # LICM leaves this loop's memory alone, and it is best left to LLVM
        registers = vector_registers(self.target)
        # only what the body reads and stores there is carried: an invariant read alone is
        # hoisted (hiding a read-only buffer blocked the loop vectorizer: TVM's C2D record 11 ran
        # 10x slower), stores alone are sunk (hiding a tile's initialization, in a loop of one
        # iteration around the whole reduction, left C2D record 57 1.25x slower)
        return [
            b
            for b, n in need.items()
            if b in updates and b in read and n > (registers if updates[b] > 1 else 2 * registers)
        ]

    @contextmanager
    def _in_memory(self, bufs: list[Buffer], counter: ir.Value):
        """Address ``bufs`` inside one iteration of a loop (counter ``counter``) through a
        pointer LLVM cannot prove the same on every iteration: an empty inline asm returning
        the buffer's pointer, given the counter too. Their accesses are then not loop-invariant,
        so neither LICM nor SROA carries them across iterations in registers; within the
        iteration they are still forwarded. The asm touches no memory (``readnone``): it hides
        no other access from LLVM's alias analysis, and costs no instruction."""
        saved = {b: self.bufs[b] for b in bufs}
        for b in bufs:
            hide = ir.InlineAsm(ir.FunctionType(PTR, [PTR, counter.type]), "", "=r,0,r")
            name = b.name + "_in_memory"
            self.bufs[b] = self.b.call(hide, [saved[b], counter], name=name, attrs=("readnone",))
        try:
            yield
        finally:
            self.bufs.update(saved)

    def loop(
        self,
        lo: ir.Value,
        count: Union[int, ir.Value],
        body: Callable[[ir.Value], None],
        props: Optional[list] = None,
        name: str = "i",
    ) -> None:
        """``for i in [lo, lo + count): body(i)`` as a bottom-tested loop (LLVM's canonical
        rotated form), guarded when ``count`` is not a positive constant."""
        b = self.b
        if isinstance(count, int):
            if count <= 0:
                return
            end = b.add(lo, ir.Constant(lo.type, count))
        else:
            end = b.add(lo, count)
        fn = self.fs.fn
        head = fn.append_basic_block(f"for_{name}")
        exit_ = fn.append_basic_block(f"for_{name}_end")
        pre = b.block
        if isinstance(count, int):
            b.branch(head)
        else:
            b.cbranch(b.icmp_signed("<", lo, end), head, exit_)
        b.position_at_end(head)
        i = b.phi(lo.type, name=name)
        i.add_incoming(lo, pre)
        body(i)
        b = self.b
        nxt = b.add(i, ir.Constant(lo.type, 1))
        i.add_incoming(nxt, b.block)
        br = b.cbranch(b.icmp_signed("<", nxt, end), head, exit_)
        if props:
            br.set_metadata(
                "llvm.loop", _LoopID(self.module, [self.module.add_metadata(list(p)) for p in props])
            )
        _move_to_end(fn, exit_)
        b.position_at_end(exit_)

    def if_(self, s: IfThenElse) -> None:
        cond = self.expr(s.condition)
        if lanes_of(cond) > 1:  # varies across lanes: run both sides under masks
            outer = self.mask
            self.mask = self._and_mask(outer, cond)
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.mask = self._and_mask(outer, self.b.not_(cond))
                self.stmt(s.else_case)
            self.mask = outer
            return
        b = self.b
        fn = self.fs.fn
        then_bb = fn.append_basic_block("then")
        else_bb = fn.append_basic_block("else") if s.else_case is not None else None
        end_bb = fn.append_basic_block("endif")
        b.cbranch(cond, then_bb, else_bb or end_bb)
        b.position_at_end(then_bb)
        self.stmt(s.then_case)
        self.b.branch(end_bb)
        if else_bb is not None:
            _move_to_end(fn, else_bb)
            self.b.position_at_end(else_bb)
            self.stmt(cast(Stmt, s.else_case))  # else_bb exists only with an else case
            self.b.branch(end_bb)
        _move_to_end(fn, end_bb)
        self.b.position_at_end(end_bb)

    def allocate(self, s: Allocate) -> None:
        buf = s.buffer
        entry = self.fs.entry
        if buf.is_symbolic:
            ptr = self._heap_alloc(buf)
        elif buf.alloc_size() * dtype_info(buf.dtype).nbytes <= (
            tile_stack_bytes(self.target) if self.ranges else STACK_BYTES  # inside a loop: a tile
        ):
            ptr = alloca(entry, ir.ArrayType(mem_type(buf.dtype), buf.alloc_size()), buf.name)
        else:
            alloc = K.declare(self.module, "aligned_alloc", PTR, [I64, I64])
            nbytes = buf.alloc_size() * dtype_info(buf.dtype).nbytes
            size = (nbytes + 63) // 64 * 64  # aligned_alloc wants a multiple of the alignment
            ptr = entry.call(alloc, [ir.Constant(I64, 64), ir.Constant(I64, size)], name=buf.name)
            self.fs.heap.append(ptr)
        self.bufs[buf] = ptr
        self.allocated.add(buf)
        if self.check_bounds and buf.dtype != "bool":
            self._poison(buf, ptr)
        try:
            self.stmt(s.body)
        finally:
            del self.bufs[buf]
            self.allocated.discard(buf)

    def _heap_alloc(self, buf: Buffer) -> ir.Value:
        """A buffer of symbolic size: its byte count from the size variables, computed in the
        entry block (they are arguments there), rounded up to a multiple of 64, at least 64."""
        entry = self.fs.entry
        saved, self.fs.builder = self.fs.builder, entry
        try:
            count = self.size_value(buf.alloc_size())
        finally:
            self.fs.builder = saved
        nbytes = entry.mul(count, ir.Constant(I64, dtype_info(buf.dtype).nbytes))
        rounded = entry.and_(entry.add(nbytes, ir.Constant(I64, 63)), ir.Constant(I64, -64))
        small = entry.icmp_signed("<", rounded, ir.Constant(I64, 64))
        rounded = entry.select(small, ir.Constant(I64, 64), rounded)
        alloc = K.declare(self.module, "aligned_alloc", PTR, [I64, I64])
        ptr = entry.call(alloc, [ir.Constant(I64, 64), rounded], name=buf.name)
        self.fs.heap.append(ptr)
        return ptr

    def size_value(self, size: Union[int, E.Expr]) -> ir.Value:
        """An element count (an int, or an expression of size variables) as an i64 value."""
        if isinstance(size, int):
            return ir.Constant(I64, size)
        v = self.expr(size)
        return v if v.type == I64 else self.b.sext(v, I64)

    # check_bounds --------------------------------------------------------------------------
    def _poison(self, buf: Buffer, ptr: ir.Value) -> None:
        """Fill ``buf`` with :func:`~workbench.ir.dtype.poison` (each time its
        ``Allocate`` runs, as the python target does)."""
        value = to_memory(self.b, const(buf.dtype, poison(buf.dtype)), buf.dtype)
        align = dtype_info(buf.dtype).nbytes

        def fill(i: ir.Value) -> None:
            self.b.store(value, self.b.gep(ptr, [i], source_etype=mem_type(buf.dtype)), align=align)

        size = buf.alloc_size()
        count = size if isinstance(size, int) else self.size_value(size)
        self.loop(ir.Constant(I64, 0), count, fill, name=buf.name + "_poison")

    def check_access(self, buf: Buffer, indices: tuple[E.Expr, ...], verb: str) -> None:
        """Leave for the out-of-bounds exit unless every index is inside its dimension (only
        where ``self.mask`` holds: a load under an ``if_then_else``). Scalar code only."""
        if not indices:
            return
        b = self.b
        values = [self.expr(i if i.dtype in ("int32", "int64") else E.Cast("int64", i)) for i in indices]
        ok = None
        for v, n in zip(values, buf.shape):
            limit = ir.Constant(I64, n) if isinstance(n, int) else self.size_value(n)
            inside = b.icmp_unsigned("<", v, limit)  # unsigned: negatives fail too
            ok = inside if ok is None else b.and_(ok, inside)
        bad = b.not_(ok)
        if self.mask is not None:
            bad = b.and_(bad, self.mask)
        if self.oob_record is None:
            width = 1 + max((x.buffer.ndim for x in pre_order(self.func.body) if _is_access(x)), default=1)
            self.oob_record = ir.GlobalVariable(self.module, ir.ArrayType(I64, width), self.name + "_oob")
            self.oob_record.initializer = ir.Constant(ir.ArrayType(I64, width), [0] * width)
            self.oob_record.type = PTR  # as alloca(): llvmlite's typed pointer fails store checks
            self.oob_exit = self.fs.fn.append_basic_block("out_of_bounds")
        self.accesses.append((verb, buf))
        fn = self.fs.fn
        fail = fn.append_basic_block("oob")
        cont = fn.append_basic_block("in_bounds")
        b.cbranch(bad, fail, cont)
        b.position_at_end(fail)
        for k, v in enumerate([ir.Constant(I64, len(self.accesses))] + values):
            b.store(v, b.gep(self.oob_record, [ir.Constant(I64, k)], source_etype=I64))
        b.branch(cast(ir.Block, self.oob_exit))
        b.position_at_end(cont)

    # vector loops --------------------------------------------------------------------------
    def vector_loop(self, s: For, lanes: int) -> None:
        """Explicit SIMD code for vectorized loop ``s`` (constant extent ``n``): one vector of
        ``n`` lanes when ``n`` is below a machine vector or a few whole machine vectors (LLVM
        splits it into registers), else a loop over chunks of ``lanes`` plus one narrower
        vector for the remainder."""
        n = cast(E.IntImm, s.extent).value
        lo = self.expr(s.min)
        start = lo.constant if isinstance(lo, ir.Constant) else None
        if n < lanes or (n % lanes == 0 and n <= MAX_VECTORS_PER_CHUNK * lanes):
            self._vector_chunk(s, lo, n, None if start is None else (start, 0))
            return
        full, rest = divmod(n, lanes)
        align = None if start is None else (start, lanes)
        self.loop(
            ir.Constant(I64, 0),
            full,
            lambda c: self._vector_chunk(
                s, self.b.add(lo, self.b.mul(c, ir.Constant(I64, lanes))), lanes, align
            ),
            name=s.loop_var.name + "_chunk",
        )
        if rest:
            self._vector_chunk(s, self.b.add(lo, ir.Constant(I64, full * lanes)), rest, align)

    def _split_at_divisors(self, s: For) -> Optional[For]:
        """``s`` (vectorized, ``v`` in ``[min, min + n)``) as ``for o in range(n // L): for i in
        vectorized(L)`` with ``v = min + o*L + i`` where that makes the ``// c`` and ``% c`` of
        ``v`` in its body a scalar and ``a*i`` plus a scalar per chunk (see
        :func:`~.analysis.divisor_split`): their accesses become contiguous vectors instead of
        gathers. None where no division qualifies."""
        # chunks of half a machine vector still beat a gather per vector; narrower ones need not
        lanes, nodes = divisor_split(s, max(self.target.vector_width_bits // _widest(s) // 2, 2))
        if not nodes:
            return None
        v = s.loop_var
        o, i = E.Var(v.name + "_o", v.dtype), E.Var(v.name + "_i", v.dtype)
        chunk = E.Add.make(s.min, E.Mul.make(o, lanes))  # v at lane 0 of the chunk
        coeffs = {id(node): a for node, a in nodes}

        def pre(n):
            if n is v:
                return E.Add.make(chunk, i)
            if id(n) not in coeffs:
                return None
            at_chunk = substitute(n.a, {v: chunk})
            if isinstance(n, E.FloorDiv):
                return E.FloorDiv(at_chunk, n.b, n.dtype)
            lane = i if i.dtype == n.dtype else E.Cast(n.dtype, i)
            return E.Add.make(E.FloorMod(at_chunk, n.b, n.dtype), E.Mul.make(lane, coeffs[id(n)]))

        body = transform(s.body, lambda n: n, pre)
        count = cast(E.IntImm, s.extent).value // lanes
        inner = make_for(i, E.IntImm(lanes, v.dtype), body, ForKind.VECTORIZED, E.IntImm(0, v.dtype))
        kind = ForKind.UNROLLED if count <= MAX_VECTORS_PER_CHUNK else ForKind.SERIAL
        return make_for(o, E.IntImm(count, v.dtype), inner, kind, E.IntImm(0, v.dtype))

    def _vector_chunk(self, s: For, base: ir.Value, lanes: int, align: Optional[tuple[int, int]]) -> None:
        outer = self.vec, self.vec_align
        if lanes == 1:  # a single lane is scalar code (LLVM has no use for <1 x T>)
            self.vec, self.vars[s.loop_var] = None, base
        else:
            self.vec, self.vars[s.loop_var] = (s.loop_var, lanes), Ramp(base, lanes)
        self.vec_align = align
        try:
            self.stmt(s.body)
        finally:
            self.vec, self.vec_align = outer


#: what a kernel built with check_bounds returns when an access was out of bounds
OUT_OF_BOUNDS = 2


def _is_access(node: object) -> bool:
    return isinstance(node, (BufferStore, E.BufferLoad))


def _move_to_end(fn: ir.Function, block: ir.Block) -> None:
    """Keep blocks in source order in the printed IR (a loop's exit after its body)."""
    fn.blocks.remove(block)
    fn.blocks.append(block)


def _unrolled_steps(s: Stmt, max_step: float) -> Optional[int]:
    """Statements ``s`` becomes once its loops are unrolled (a vectorized loop counts as one
    pass of its body); None when a loop in it must stay a loop or the count exceeds max_step."""
    if isinstance(s, SeqStmt):
        total = 0
        for x in s.seq:
            n = _unrolled_steps(x, max_step)
            if n is None:
                return None
            total += n
        return total
    if isinstance(s, For):
        if not isinstance(s.extent, E.IntImm) or s.kind in (ForKind.PARALLEL, ForKind.THREAD_BINDING):
            return None
        inner = _unrolled_steps(s.body, max_step)
        if inner is None:
            return None
        steps = inner if s.kind == ForKind.VECTORIZED else inner * s.extent.value
        return steps if steps <= max_step else None
    if isinstance(s, IfThenElse):
        parts = [_unrolled_steps(x, max_step) for x in (s.then_case, s.else_case) if x]
        return None if None in parts else sum(cast("list[int]", parts))
    if isinstance(s, Allocate):
        return _unrolled_steps(s.body, max_step)
    return 1


def _strided_float_reduction(loop: For) -> bool:
    """Whether LLVM's loop vectorizer, left free on ``loop``, would vectorize a float
    accumulation with gathers: the loop updates a float element in place (a store reading its
    own element) and either that element moves with the loop at a stride other than 1 (the
    accumulators would be gathered and scattered) or it stays put while some float read moves
    at a stride other than 0 or 1 (a reduction across the iterations, gathering the reads).

    LLVM takes those paths after fully unrolling the small loops inside ``loop``; the spatial
    copies of the tile the body computes are then no longer vectorized side by side (SLP, or a
    contiguous inner loop), which is what TVM's build of the same schedule gets: it sets no
    reassociation flags, so the reduction path is closed to LLVM there, and its unrolling
    leaves the contiguous loop in place. TVM's best C1D and C2D records ran 2-7x slower in ours
    with masked gathers. Contiguous accumulations (a GEMM tile's row, softmax's and a norm's
    sums) keep the vectorizer."""
    v = loop.loop_var
    reduction = False
    for node in pre_order(loop.body):
        if (
            isinstance(node, BufferStore)
            and is_float_dtype(node.buffer.dtype)
            and any(isinstance(n, E.BufferLoad) and n.buffer is node.buffer for n in pre_order(node.value))
        ):
            coeff = linear_coeff(flat_offset(node.buffer, node.indices), v)
            if coeff not in (0, 1):
                return True
            reduction = reduction or coeff == 0
    if not reduction:
        return False
    return any(
        isinstance(node, E.BufferLoad)
        and is_float_dtype(node.buffer.dtype)
        and linear_coeff(flat_offset(node.buffer, node.indices), v) not in (0, 1)
        for node in pre_order(loop.body)
    )


#: the widest store group LLVM's loop vectorizer writes as shuffles and whole vector stores
#: (an interleaved group: every element between two iterations' first ones stored)
MAX_INTERLEAVE = 4


def _scattered_float_store(loop: For) -> bool:
    """Whether LLVM's loop vectorizer, left free on ``loop``, would store floats with scatters:
    a float store whose element moves with the loop at a stride other than 0 or 1, unless the
    inner loops around it fill the elements in between (an interleaved group of at most
    :data:`MAX_INTERLEAVE`, written with shuffles and whole vector stores).

    The case: a padding stage computed inside a convolution's reduction loops, a small tile
    ``P[i1, i2] = Select(guard, A[.., i1 + h, i2 + w, c], 0)`` whose inner loop is unrolled;
    LLVM then vectorizes the outer loop across the tile's rows (13 of 16 lanes), gathering the
    input (the addresses clamped per lane) and scattering into the tile, on AVX-512. Scatters
    are microcoded on Zen 4 (an element every few cycles), and the tile is refilled at every
    reduction step: TVM's C2D #32 record ran 2.8x slower than TVM's build of it, which keeps
    the copy scalar (its ``if_then_else`` is a branch around the load, which LLVM does not
    vectorize). Stores inside an inner vectorized loop are already vectors: LLVM's loop
    vectorizer leaves such a loop alone."""
    v = loop.loop_var

    def scattered(s: Stmt, inner: list[tuple[E.Var, int]]) -> bool:
        if isinstance(s, For):
            if s.kind == ForKind.VECTORIZED:
                return False
            if isinstance(s.extent, E.IntImm):
                inner = inner + [(s.loop_var, s.extent.value)]
            return scattered(s.body, inner)
        if isinstance(s, BufferStore):
            if not is_float_dtype(s.buffer.dtype):
                return False
            offset = flat_offset(s.buffer, s.indices)
            stride = linear_coeff(offset, v)
            if stride in (0, 1):
                return False
            return stride is None or not _fills_group(offset, abs(stride), inner)
        return any(scattered(c, inner) for c in children(s) if isinstance(c, Stmt))

    return scattered(loop.body, [])


def _fills_group(offset: E.Expr, stride: int, inner: list[tuple[E.Var, int]]) -> bool:
    """Whether the loops ``inner`` (constant extents, enclosing a store at ``offset``) walk the
    ``stride`` elements from one iteration's first to the next densely: coefficients 1, e1,
    e1 * e2, ... up to ``stride`` (at most :data:`MAX_INTERLEAVE`)."""
    if stride > MAX_INTERLEAVE:
        return False
    steps = []
    for u, n in inner:
        c = linear_coeff(offset, u)
        if c is None or c < 0:
            return False
        if c:
            steps.append((c, n))
    span = 1
    for c, n in sorted(steps, key=lambda t: t[0]):
        if c != span:
            return False
        span *= n
    return span == stride


#: the flattened reduction's loop metadata: four vector accumulators (LLVM's own interleave count
#: here), and no unrolling after it: LLVM's unroller then copies the vector body 8 times (32
#: loads in flight, issued out of address order), and the 256 KB norm ran 2.07 us against 1.50
#: us as four loads per iteration (Zen 5; interleave 8, 16 or 4 x unroll 3: 1.50-1.53 us).
#: Without an explicit count, ``unroll.disable`` leaves LLVM one accumulator (4.05 us).
FLAT_REDUCTION_LOOP = [
    ("llvm.loop.interleave.count", ir.Constant(I32, 4)),
    ("llvm.loop.unroll.disable",),
]


def _contiguous_reduction_nest(loop: For) -> bool:
    """Whether ``loop`` and the loop it holds alone sum floats into one element, reading memory
    contiguously across both: ``for i, j: C[x] += f(A[.., i * n + j])`` (serial, from 0,
    constant extents, ``n`` a power of two). Emitted as one loop (:meth:`flattened`), LLVM's
    loop vectorizer makes it a single vector reduction with several accumulators; left nested,
    it vectorizes only ``j`` and reduces the vector to a scalar once per ``i``. A norm's
    unscheduled (or unrfactored) sum over a 256 x 256 matrix: 5.7 us nested, 1.2 us flattened,
    where the rfactor schedules with explicit vectors run 2.1 us (TVM's best, in both builds:
    a chain of FMAs through two or four registers)."""
    inner = loop.body
    if not (
        isinstance(inner, For)
        and loop.kind == inner.kind == ForKind.SERIAL
        and not loop.annotations
        and not inner.annotations
        and all(isinstance(x, E.IntImm) for x in (loop.min, loop.extent, inner.min, inner.extent))
        and isinstance(inner.body, BufferStore)
    ):
        return False
    n = cast(E.IntImm, inner.extent).value
    starts = (cast(E.IntImm, loop.min).value, cast(E.IntImm, inner.min).value)
    if starts != (0, 0) or n < 2 or n & (n - 1):
        return False
    store = inner.body
    i, j = loop.loop_var, inner.loop_var
    if not is_float_dtype(store.buffer.dtype):
        return False
    dst = flat_offset(store.buffer, store.indices)
    if linear_coeff(dst, i) != 0 or linear_coeff(dst, j) != 0:
        return False
    loads = [x for x in pre_order(store.value) if isinstance(x, E.BufferLoad)]
    if not any(x.buffer is store.buffer for x in loads):
        return False
    for x in loads:
        off = flat_offset(x.buffer, x.indices)
        ci, cj = linear_coeff(off, i), linear_coeff(off, j)
        if (ci, cj) not in ((0, 0), (n, 1)) or (x.buffer is store.buffer and (ci, cj) != (0, 0)):
            return False
    return True


def _vector_accumulation(loop: For) -> bool:
    """Whether ``loop`` only adds into a vector of floats that stays put across it: its body a
    vectorized loop ``for v: C[.., v] = C[.., v] + f(..)`` with ``C``'s element free of
    ``loop`` (an rfactor's partial sums: the accumulators live in registers). LLVM's unroller
    would copy such a small body 8 times; it is left as one copy, as the flattened sum of
    :func:`_contiguous_reduction_nest`: NRM's rfactor record with 64 lanes (four AVX-512
    accumulators) ran 2.10 us unrolled, 1.50 us not (Zen 5; unrolled twice: 1.50 us). With
    fewer accumulators than the FMA latency needs, the chain sets the time either way."""
    inner = loop.body
    if not (
        isinstance(inner, For) and inner.kind == ForKind.VECTORIZED and isinstance(inner.body, BufferStore)
    ):
        return False
    store = inner.body
    if not is_float_dtype(store.buffer.dtype):
        return False
    dst = flat_offset(store.buffer, store.indices)
    return (
        linear_coeff(dst, loop.loop_var) == 0
        and linear_coeff(dst, inner.loop_var) == 1
        and any(isinstance(n, E.BufferLoad) and n.buffer is store.buffer for n in pre_order(store.value))
    )


def _int(value) -> int | float:
    return value.value if isinstance(value, (E.IntImm, E.FloatImm)) else int(value)


def _widest(s: For) -> int:
    bits = [
        8 * dtype_info(n.buffer.dtype).nbytes
        for n in pre_order(s.body)
        if isinstance(n, (BufferStore, E.BufferLoad))
    ]
    return max(bits, default=32)
