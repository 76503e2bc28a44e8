"""Expressions and memory accesses, for scalar code and for SIMD code alike.

Inside a vectorized loop (``self.vec`` set) the loop variable is a :class:`Ramp`; an expression
that does not depend on it stays a scalar, one that does becomes a vector, and operands are
broadcast as they meet. Buffer accesses are classified by how their flattened offset depends on
the vector variable: not at all (one scalar load), ``v + rest`` (one contiguous vector load or
store), anything else (a gather or scatter). ``self.mask`` holds the lanes (or, in scalar code,
the condition) under which the value being emitted matters: reads that cannot be proven in
bounds are then clamped (scalar) or masked (vector), so ``Select(i >= 1, A[i - 1], 0)`` never
reads before ``A``.
"""

from __future__ import annotations

from dataclasses import dataclass
import typing
from typing import Any, Callable, Optional, Union

from llvmlite import ir

from ...errors import BuildError
from ...ir import expr as E
from ...ir.buffer import Buffer
from ...ir.dtype import dtype_info
from ...ir.functor import pre_order, transform, uses_var
from ...ir.stmt import BufferStore
from . import intrinsics as K
from . import vector_math
from ...target import Target
from .analysis import Interval, affine_form, bounds, flat_offset, in_bounds, linear_coeff
from .dtypes import (
    FMF,
    I64,
    PTR,
    cast,
    const,
    from_memory,
    is_float_dtype,
    is_signed,
    lanes_of,
    mem_type,
    reg_type,
    to_memory,
)


#: the largest constant stride (in elements) between lanes read by a wide load and a shuffle
MAX_SHUFFLE_STRIDE = 4
#: the most machine vectors' worth of elements a load may span to feed a shuffle of the lanes
#: (:meth:`ExpressionEmitter._lane_pattern`)
MAX_PATTERN_SPAN = 2


@dataclass
class Ramp:
    """The vector loop variable: ``base + lane`` for each of ``lanes`` lanes."""

    base: ir.Value
    lanes: int


class ExpressionEmitter:
    """Expression and memory-access half of :class:`~.emitter.KernelEmitter` (which owns the
    state used here: ``b``, ``vars``, ``bufs``, ``ranges``, ``vec``, ``mask``)."""

    b: ir.IRBuilder
    vars: dict
    bufs: dict
    ranges: dict[E.Var, Interval]
    vec: Optional[tuple[E.Var, int]]
    vec_align: Optional[tuple[int, int]]
    mask: Optional[ir.Value]
    scalar_index: bool
    target: Target
    check_bounds: bool
    check_access: Callable[..., None]
    #: element offsets of the reads in a branch's sides, evaluated before the branch
    #: (:meth:`_branch_select`), by the read's node
    hoisted: dict[int, ir.Value]

    def store(self, s: BufferStore) -> None:
        buf = s.buffer
        value = self.expr(s.value)
        if s.value.dtype != buf.dtype:
            value = cast(self.b, value, s.value.dtype, buf.dtype)
        value = to_memory(self.b, value, buf.dtype)
        if self.check_bounds:
            self.check_access(buf, s.indices, "writes")
        off = flat_offset(buf, s.indices)
        align = dtype_info(buf.dtype).nbytes
        if self.vec is None:
            self.b.store(value, self._gep(buf, self.offset(off)), align=align)
            return
        var, lanes = self.vec
        value = K.splat(self.b, value, lanes)
        if linear_coeff(off, var) == 1:
            ptr = self._gep(buf, self.index_base(off))
            if self.mask is None:
                self.b.store(value, ptr, align=align)
            else:
                K.masked_store(self.b, value, ptr, self._mask_vector(lanes), align)
            return
        mask = K.all_true(lanes) if self.mask is None else self._mask_vector(lanes)
        K.scatter(self.b, value, self._lane_pointers(buf, off), mask, align)

    # expressions ---------------------------------------------------------------------------
    def expr(self, e: E.Expr) -> ir.Value:
        method = _EXPR.get(type(e))
        if method is None:
            raise BuildError(f"llvm: cannot compile expression {type(e).__name__}: {e}")
        return method(self, e)

    def index_base(self, off: E.Expr) -> ir.Value:
        """The offset ``off`` evaluated at lane 0 of the vector variable (a scalar)."""
        saved, self.scalar_index = self.scalar_index, True
        try:
            return self.offset(off)
        finally:
            self.scalar_index = saved

    def offset(self, off: E.Expr) -> ir.Value:
        """A scalar element offset as ``Σ k * atom + c``, the variables of unrolled loops folded
        into ``c``, the same atoms in the same order in every access.

        The copies of an unrolled body then address one buffer as the same SSA value plus
        different constants, which LLVM's alias analysis separates at once: it forwards stored
        values to later loads and keeps a tile's accumulators in registers across an unrolled
        reduction. Emitted as written, ``(f // 2 * 4 + h) * 3584`` with ``h`` = 0..3 became
        ``or`` forms InstCombine no longer reads as sums, every store may alias every load, and
        the accumulators went through memory (TVM's 6th-best DEP record 3.2x slower than TVM's
        build). ``nsw``: an element offset does not wrap."""
        form = affine_form(off)
        if form is None or not (self.vec is None or self.scalar_index):
            return self.expr(off)
        terms, c = form
        b, ty = self.b, reg_type(off.dtype)
        total: Optional[ir.Value] = None
        for k, atom in terms:
            bound = self.vars.get(atom) if isinstance(atom, E.Var) else None
            if isinstance(bound, ir.Constant):  # an unrolled loop's variable
                c += k * bound.constant
                continue
            v = self.expr(atom)
            if atom.dtype != off.dtype:
                v = cast(b, v, atom.dtype, off.dtype)
            if total is None and k < 0:
                total = b.mul(v, ir.Constant(ty, k), flags=["nsw"])
            elif total is None:
                total = v if k == 1 else b.mul(v, ir.Constant(ty, k), flags=["nsw"])
            elif k in (1, -1):
                total = (b.add if k == 1 else b.sub)(total, v, flags=["nsw"])
            else:
                total = b.add(total, b.mul(v, ir.Constant(ty, k), flags=["nsw"]), flags=["nsw"])
        if total is None:
            return ir.Constant(ty, c)
        return total if c == 0 else b.add(total, ir.Constant(ty, c), flags=["nsw"])

    def _var(self, e: E.Var) -> ir.Value:
        v = self.vars.get(e)
        if v is None:
            raise BuildError(f"llvm: variable {e.name!r} is used outside the loop that binds it")
        if isinstance(v, Ramp):
            if self.scalar_index:
                return v.base
            step = ir.Constant(ir.VectorType(v.base.type, v.lanes), list(range(v.lanes)))
            return self.b.add(K.splat(self.b, v.base, v.lanes), step)
        return v

    def _imm(self, e: Union[E.IntImm, E.FloatImm]) -> ir.Value:
        return const(e.dtype, e.value)

    def _operands(self, e: E.BinaryOp) -> tuple[ir.Value, ir.Value]:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.a.dtype != e.b.dtype:  # defensive: the IR normally unifies operand dtypes
            raise BuildError(f"llvm: operands of {e} have dtypes {e.a.dtype} and {e.b.dtype}")
        n = max(lanes_of(a), lanes_of(b))
        return K.splat(self.b, a, n), K.splat(self.b, b, n)

    def _arith(self, e: E.BinaryOp) -> ir.Value:
        a, b = self._operands(e)
        bld, dt = self.b, e.a.dtype
        if is_float_dtype(dt):
            op = {E.Add: bld.fadd, E.Sub: bld.fsub, E.Mul: bld.fmul, E.Div: bld.fdiv}[type(e)]
            return op(a, b, flags=FMF)
        if isinstance(e, E.Div):
            return self._int_div(e, a, b, "trunc")
        return {E.Add: bld.add, E.Sub: bld.sub, E.Mul: bld.mul}[type(e)](a, b)

    def _floor_div_mod(self, e: E.BinaryOp) -> ir.Value:
        a, b = self._operands(e)
        dt = e.a.dtype
        if is_float_dtype(dt):  # numpy: floor(a / b) and a - floor(a / b) * b
            q = K.call_intrinsic(self.b, "floor", [self.b.fdiv(a, b, flags=FMF)])
            if isinstance(e, E.FloorDiv):
                return q
            return self.b.fsub(a, self.b.fmul(q, b, flags=FMF), flags=FMF)
        return self._int_div(e, a, b, "floor" if isinstance(e, E.FloorDiv) else "mod")

    def _int_div(self, e: E.BinaryOp, a: ir.Value, b: ir.Value, kind: str) -> ir.Value:
        """Integer ``trunc`` division, ``floor`` division or floor ``mod``. Division by zero
        gives 0 (numpy's result) instead of a hardware trap; so does ``MIN // -1``."""
        bld, dt, n = self.b, e.a.dtype, lanes_of(a)
        signed = is_signed(dt)
        c = e.b.value if isinstance(e.b, E.IntImm) else None
        if c is not None and c > 0:
            if signed and kind != "trunc" and c & (c - 1) == 0:  # power of two: shift / mask
                if kind == "floor":
                    return bld.ashr(a, const(dt, c.bit_length() - 1, n))
                return bld.and_(a, const(dt, c - 1, n))
            lo = bounds(e.a, self.ranges)[0]
            if not signed or (lo is not None and lo >= 0):
                return (bld.urem if kind == "mod" else bld.udiv)(a, b)
            q, r = bld.sdiv(a, b), bld.srem(a, b)
            if kind == "trunc":
                return q
            neg = bld.icmp_signed("<", r, const(dt, 0, n))
            if kind == "floor":
                return bld.sub(q, bld.zext(neg, q.type))
            return bld.select(neg, bld.add(r, b), r)
        zero = const(dt, 0, n)
        if not signed:
            is_zero = bld.icmp_unsigned("==", b, zero)
            safe = bld.select(is_zero, const(dt, 1, n), b)
            out = (bld.urem if kind == "mod" else bld.udiv)(a, safe)
            return bld.select(is_zero, zero, out)
        is_zero = bld.icmp_signed("==", b, zero)
        minus1 = bld.icmp_signed("==", b, const(dt, -1, n))
        safe = bld.select(bld.or_(is_zero, minus1), const(dt, 1, n), b)
        q, r = bld.sdiv(a, safe), bld.srem(a, safe)
        if kind != "trunc":  # floor: step toward -inf when the remainder's sign differs
            fix = bld.and_(
                bld.icmp_signed("!=", r, zero),
                bld.icmp_signed("!=", bld.icmp_signed("<", r, zero), bld.icmp_signed("<", safe, zero)),
            )
            q = bld.sub(q, bld.zext(fix, q.type))
            r = bld.select(fix, bld.add(r, safe), r)
        if kind == "mod":
            return bld.select(bld.or_(is_zero, minus1), zero, r)
        return bld.select(is_zero, zero, bld.select(minus1, bld.sub(zero, a), q))

    def _minmax(self, e: E.BinaryOp) -> ir.Value:
        a, b = self._operands(e)
        lt = self._compare("<", a, b, e.a.dtype)
        return self.b.select(lt, a, b) if isinstance(e, E.Min) else self.b.select(lt, b, a)

    def _cmp(self, e: E.CmpOp) -> ir.Value:
        if self.check_bounds and isinstance(e, (E.And, E.Or)):
            # the right side matters only where the left does not decide: its loads are
            # checked only there (``i < n and A[i] > 0``)
            a = self.expr(e.a)
            b = self._guarded(e.b, a if isinstance(e, E.And) else self.b.not_(a))
            return (self.b.and_ if isinstance(e, E.And) else self.b.or_)(a, b)
        if isinstance(e, (E.And, E.Or)):
            a, b = self.expr(e.a), self.expr(e.b)
            for x, y in ((a, b), (b, a)):  # a side the ranges decided (see _decided)
                if isinstance(x, ir.Constant) and x.type == ir.IntType(1):
                    if bool(x.constant) == isinstance(e, E.Or):
                        return x  # ``false and y``, ``true or y``
                    return y
            n = max(lanes_of(a), lanes_of(b))
            a, b = K.splat(self.b, a, n), K.splat(self.b, b, n)
            return (self.b.and_ if isinstance(e, E.And) else self.b.or_)(a, b)
        decided = self._decided(e)
        if decided is not None:
            return ir.Constant(ir.IntType(1), int(decided))
        a, b = self._operands(e)
        return self._compare(e.symbol, a, b, e.a.dtype)

    def _decided(self, e: E.CmpOp) -> Optional[bool]:
        """The outcome of an integer comparison where the loops' ranges decide it (an unrolled
        copy's variable is its constant): ``a - b`` as ``Σ k * atom + c``, bounded atom by atom.

        TVM simplifies the guards of each copy of an unrolled loop in TIR; emitted as written,
        every copy of an unrolled padded row tested ``x >= 1 and x < W + 1`` on its own pixel
        although only the first and the last can fail, and LLVM, which does not know the
        loops' ranges, kept a branch and a clamped address per copy (TVM's 43rd DEP record
        1.6x slower than TVM's build)."""
        if not (E.is_int(e.a.dtype) and e.a.dtype == e.b.dtype and is_signed(e.a.dtype)):
            return None
        form = affine_form(E.Sub(e.a, e.b, e.a.dtype))
        if form is None:
            return None
        terms, lo = form
        hi = lo
        for k, atom in terms:
            a0, a1 = bounds(atom, self.ranges)
            if a0 is None or a1 is None:
                return None
            lo, hi = lo + min(k * a0, k * a1), hi + max(k * a0, k * a1)
        if isinstance(e, E.LT):
            return True if hi < 0 else False if lo >= 0 else None
        if isinstance(e, E.LE):
            return True if hi <= 0 else False if lo > 0 else None
        if isinstance(e, E.GT):
            return True if lo > 0 else False if hi <= 0 else None
        if isinstance(e, E.GE):
            return True if lo >= 0 else False if hi < 0 else None
        if lo == hi == 0:
            return isinstance(e, E.EQ)
        if lo > 0 or hi < 0:
            return isinstance(e, E.NE)
        return None

    def _compare(self, op: str, a: ir.Value, b: ir.Value, dtype: str) -> ir.Value:
        if is_float_dtype(dtype):  # ordered, except != (true when either side is NaN)
            if op == "!=":
                return self.b.fcmp_unordered(op, a, b)
            return self.b.fcmp_ordered(op, a, b)
        if is_signed(dtype):
            return self.b.icmp_signed(op, a, b)
        return self.b.icmp_unsigned(op, a, b)

    def _not(self, e: E.Not) -> ir.Value:
        return self.b.not_(self.expr(e.a))

    def _select(self, e: E.Select) -> ir.Value:
        cond = self.expr(e.condition)
        if isinstance(cond, ir.Constant) and cond.type == ir.IntType(1):  # decided by the ranges
            return self.expr(e.true_value if cond.constant else e.false_value)
        if cond.type == ir.IntType(1) and not self.check_bounds:
            if self.vec is not None:
                # one condition for every lane: a branch where the reads are broadcasts, as
                # TVM's vectorizer leaves a scalar if_then_else
                if self._uniform_guard_branches(e):
                    return self._branch_select(cond, e)
            elif self._clamps_along_inner_loop(e.true_value) or self._clamps_along_inner_loop(e.false_value):
                return self._branch_select(cond, e)
        t = self._guarded(e.true_value, cond)
        f = self._guarded(e.false_value, self.b.not_(cond))
        n = max(lanes_of(cond), lanes_of(t), lanes_of(f))
        t, f = K.splat(self.b, t, n), K.splat(self.b, f, n)
        return self.b.select(cond, t, f)

    def _last_index(self, size: E.Expr) -> ir.Value:
        """``size - 1`` of a symbolic allocation, as an i64 value."""
        v = self.expr(size)
        if v.type != I64:
            v = self.b.sext(v, I64)
        return self.b.sub(v, ir.Constant(I64, 1))

    def _clamp(self, offset: ir.Value, last: Union[int, ir.Value]) -> ir.Value:
        """``offset`` clamped into ``[0, last]``: an address to read where a guard failed."""
        b, zero = self.b, ir.Constant(I64, 0)
        hi = ir.Constant(I64, last) if isinstance(last, int) else last
        offset = b.select(b.icmp_signed("<", offset, zero), zero, offset)
        return b.select(b.icmp_signed(">", offset, hi), hi, offset)

    def _clamped_offset(
        self, buf: Buffer, indices: tuple[E.Expr, ...], keep: Optional[E.Var] = None
    ) -> Optional[E.Expr]:
        """The flat offset of ``buf[indices]`` with each index that may leave its dimension
        clamped into it: an address to read where a guard failed.

        Per dimension, not the flat offset as a whole: an index the loops keep inside its
        dimension (the channel of a padded NHWC input) stays an affine function of its loop,
        so LLVM's loop vectorizer still sees consecutive addresses along that loop (one vector
        load plus a select) where a clamp of the whole offset made every lane's address opaque
        and left it masked gathers (TVM's best DEP record ran 11x slower that way). The clamped
        indices usually depend on outer loops only, so LLVM hoists the clamps out of the inner
        loops too.

        ``keep``: the vector variable of a contiguous vector load, whose lanes read on from the
        offset at lane 0; None when an index that uses it may leave its dimension (clamping it
        at lane 0 would not keep the other lanes inside)."""
        safe = []
        for idx, n in zip(indices, buf.shape):
            if idx.dtype not in ("int32", "int64"):  # as flat_offset: n - 1 must fit
                idx = E.Cast("int64", idx)
            lo, hi = bounds(idx, self.ranges)
            static = isinstance(n, int)  # a symbolic dimension: its last index only at run time
            inside = lo is not None and lo >= 0 and static and hi is not None and hi <= n - 1
            if not inside and keep is not None and uses_var(idx, keep):
                return None
            if lo is None or lo < 0:
                idx = E.Max(idx, E.IntImm(0, idx.dtype))
            if not static:
                last = n if n.dtype == idx.dtype else E.Cast(idx.dtype, n)
                idx = E.Min(idx, E.Sub(last, E.IntImm(1, idx.dtype)))
            elif hi is None or hi > n - 1:
                idx = E.Min(idx, E.IntImm(n - 1, idx.dtype))
            safe.append(idx)
        return flat_offset(buf, safe)

    def _clamps_along_inner_loop(self, e: E.Expr) -> bool:
        """Whether a read in ``e`` has an index that may leave its dimension and moves with the
        innermost loop around it (of more than one iteration, emitted as a loop: not one whose
        body is copied): clamping it would cost a clamp per element of that loop. Indices
        clamped on outer loops only are hoisted by LLVM and leave the inner loop's reads
        consecutive for its loop vectorizer (a padded channel loop)."""
        inner = next(
            (
                v
                for v, (lo, hi) in reversed(self.ranges.items())
                if isinstance(self.vars.get(v), ir.PhiInstr) and (lo is None or hi is None or hi > lo)
            ),
            None,
        )
        if inner is None:
            return False
        for n in pre_order(e):
            if not isinstance(n, E.BufferLoad) or n.buffer not in self.bufs:
                continue
            for idx, size in zip(n.indices, n.buffer.shape):
                if not uses_var(idx, inner):
                    continue
                lo, hi = bounds(idx, self.ranges)
                if not isinstance(size, int) or lo is None or hi is None or lo < 0 or hi >= size:
                    return True
        return False

    def _uniform_guard_branches(self, e: E.Select) -> bool:
        """In SIMD code, with the condition the same for every lane: whether ``e`` becomes a
        branch. Where a side reads outside its buffer and every read is broadcast into the
        vector (none moves with the lanes) and no lane mask is in force: its clamped reads were
        a masked scalar load and a broadcast per element (TVM's C2D record 9 1.3x slower than
        TVM's build, which branches). A contiguous vector read keeps its clamped address, one
        load and a select per vector: as branches, TVM's C2D record 10 (a padding stage's
        3-lane channel loop) ran 1.4x slower, and DEP record 43 gained nothing once each
        unrolled copy's range decides its guard (:meth:`_decided`)."""
        if self.mask is not None or self.vec is None:
            return False
        if not (self._guarded_load(e.true_value) or self._guarded_load(e.false_value)):
            return False
        v = self.vec[0]
        return not any(
            isinstance(n, E.BufferLoad) and any(uses_var(i, v) for i in n.indices)
            for side in (e.true_value, e.false_value)
            for n in pre_order(side)
        )

    def _branch_select(self, cond: ir.Value, e: E.Select) -> ir.Value:
        """Scalar ``Select`` whose side reads outside its buffer where the condition fails (an
        inlined padding): each side in its own block, as TVM lowers ``if_then_else``. The
        reads need no clamped addresses, LLVM unswitches the conditions that depend on outer
        loops only, and a condition along the inner loop is a predicted branch. Clamped
        addresses there (a clamp per index and element, kept live across LLVM's unrolled inner
        loop) made TVM's 57th DEP record 1.8x slower on one thread. In SIMD code too where the
        condition is the same for every lane (a read broadcast into a vector): its clamped
        reads became a mask, a masked scalar load and a broadcast per element, and kept TVM's
        C2D record 9 1.3x slower than TVM's build, which branches."""
        b = self.b
        hoisted = self._hoist_offsets(e)
        fn = b.block.function
        t_block, f_block = fn.append_basic_block("select_true"), fn.append_basic_block("select_false")
        merge = fn.append_basic_block("select_end")
        b.cbranch(cond, t_block, f_block)
        b.position_at_end(t_block)
        t = self.expr(e.true_value)
        t_end = b.block
        b.position_at_end(f_block)
        f = self.expr(e.false_value)
        f_end = b.block
        n = max(lanes_of(t), lanes_of(f))  # in vector code one side may be a scalar (the padding)
        b.position_at_end(t_end)
        t = K.splat(b, t, n)
        b.branch(merge)
        b.position_at_end(f_end)
        f = K.splat(b, f, n)
        b.branch(merge)
        b.position_at_end(merge)
        phi = b.phi(t.type)
        phi.add_incoming(t, t_end)
        phi.add_incoming(f, f_end)
        for key in hoisted:
            self.hoisted.pop(key, None)
        return phi

    def _hoist_offsets(self, e: E.Select) -> list[int]:
        """Evaluate the element offsets of the scalar reads in ``e``'s sides ahead of its branch
        (where they are safe to compute: integer arithmetic that cannot trap); the sides then
        only load. TVM's common-subexpression pass leaves its ``if_then_else`` the same way:
        the index arithmetic in ``let`` bindings before the branches, the branches a load each.

        Inside a side, an offset is computed in a block that no other copy's block dominates,
        so the copies of an unrolled padded reduction (one branch per read) each kept their
        own index arithmetic: ~20 instructions per read that LLVM cannot share, which put the
        loop over LLVM's unswitching cost. TVM's C2D record 47 (a 7 x 3 x 2 unrolled padded
        stride-2 window) then kept a branch per read and its channel loop vectorized with
        masked gathers (1.75x TVM's build); with the offsets shared, LLVM unswitches the
        padding tests on the output row out of the loops, as in TVM's build."""
        if self.vec is not None or self.mask is not None:
            return []
        keys = []
        for side in (e.true_value, e.false_value):
            for n in pre_order(side):
                if not isinstance(n, E.BufferLoad) or n.buffer not in self.bufs or id(n) in self.hoisted:
                    continue
                off = flat_offset(n.buffer, n.indices)
                if not _speculatable(off):
                    continue
                self.hoisted[id(n)] = self.offset(off)
                keys.append(id(n))
        return keys

    def _guarded_load(self, e: E.Expr) -> bool:
        """Whether ``e`` reads a buffer at an element not proven inside it."""
        return any(
            isinstance(n, E.BufferLoad)
            and n.buffer in self.bufs
            and not in_bounds(flat_offset(n.buffer, n.indices), n.buffer, self.ranges)
            for n in pre_order(e)
        )

    def _guarded(self, e: E.Expr, cond: ir.Value) -> ir.Value:
        """Emit ``e`` knowing it only matters where ``cond`` holds (its loads may be guarded)."""
        if not any(isinstance(n, E.BufferLoad) for n in pre_order(e)):
            return self.expr(e)
        outer = self.mask
        self.mask = self._and_mask(outer, cond)
        try:
            return self.expr(e)
        finally:
            self.mask = outer

    def _cast(self, e: E.Cast) -> ir.Value:
        return cast(self.b, self.expr(e.value), e.value.dtype, e.dtype)

    def _call(self, e: E.Call) -> ir.Value:
        args = [self.expr(a) for a in e.args]
        n = max(lanes_of(a) for a in args)
        args = [K.splat(self.b, a, n) for a in args]
        bits = n > 1 and vector_math.register_bits(self.target, e.op, e.dtype)
        if bits:  # whole registers through libmvec instead of one libm call per lane
            return vector_math.call(self.b, e.op, args[0], e.dtype, bits)
        return K.math(self.b, e.op, args, e.dtype)

    def _load(self, e: E.BufferLoad) -> ir.Value:
        buf = e.buffer
        if buf not in self.bufs:
            raise BuildError(f"llvm: buffer {buf.name!r} is read outside its allocation")
        if self.check_bounds:
            self.check_access(buf, e.indices, "reads")
        off = flat_offset(buf, e.indices)
        guarded = self.mask is not None and not in_bounds(off, buf, self.ranges)
        size = buf.alloc_size()  # an int, or an Expr of size variables
        align = dtype_info(buf.dtype).nbytes
        coeff = linear_coeff(off, self.vec[0]) if self.vec is not None else 0
        b = self.b
        if coeff == 0:  # the same element for every lane
            if guarded:  # clamp: the value is discarded where the guard fails
                off = typing.cast(E.Expr, self._clamped_offset(buf, e.indices))
            if self.vec is None:
                o = self.hoisted.get(id(e)) if not guarded else None
                o = self.offset(off) if o is None else o
            else:
                o = self.index_base(off)
            v = b.load(self._gep(buf, o), typ=mem_type(buf.dtype), align=align)
            return from_memory(b, v, buf.dtype)
        lanes = typing.cast("tuple[E.Var, int]", self.vec)[1]  # coeff != 0: a vector loop
        vt = ir.VectorType(mem_type(buf.dtype), lanes)
        if coeff == 1:  # contiguous
            mask = self.mask
            if (
                guarded
                and mask is not None
                and not isinstance(mask.type, ir.VectorType)
                and isinstance(size, int)
                and size >= lanes
            ):
                # a guard the same for every lane (a padding condition on outer loops) comes
                # from a Select, which discards the value where it fails: a plain load from a
                # clamped address instead of a masked one (vmaskmovps is slow on AMD CPUs)
                safe = self._clamped_offset(
                    buf, e.indices, keep=typing.cast("tuple[E.Var, int]", self.vec)[0]
                )
                if safe is not None:  # the lanes' own dimension stays in bounds: clamp the others
                    base = self.index_base(safe)
                else:
                    base = self._clamp(self.index_base(off), size - lanes)
                v = b.load(self._gep(buf, base), typ=vt, align=align)
            elif guarded:
                ptr = self._gep(buf, self.index_base(off), inbounds=False)
                v = K.masked_load(b, ptr, vt, self._mask_vector(lanes), align)
            else:
                v = b.load(self._gep(buf, self.index_base(off)), typ=vt, align=align)
        elif not guarded and isinstance(coeff, int) and 1 < coeff <= MAX_SHUFFLE_STRIDE:
            v = self._strided_load(buf, off, coeff, lanes, align)
        elif not guarded and (pattern := self._lane_pattern(off, lanes)) is not None:
            v = self._pattern_load(buf, off, pattern, lanes, align)
        else:
            mask = self._mask_vector(lanes) if guarded else K.all_true(lanes)
            v = K.gather(b, self._lane_pointers(buf, off), vt, mask, align)
        return from_memory(b, v, buf.dtype)

    def _strided_load(self, buf: Buffer, off: E.Expr, stride: int, lanes: int, align: int) -> ir.Value:
        """Lanes ``stride`` elements apart (a stride-2 convolution's or pooling's input along
        its output x) as one contiguous load of the span and a shuffle that keeps every
        ``stride``-th element, as LLVM's interleaved-access pass emits for its own vector
        loops: a gather is one load per lane (vgatherdps on AVX-512, scalar loads and inserts
        on AVX2). The span ends at the last lane's element, so the load reads nothing that the
        lanes do not cover unless the whole ``stride * lanes`` stays inside the buffer."""
        span = stride * (lanes - 1) + 1
        size = buf.alloc_size()
        hi = bounds(off, self.ranges)[1]  # over every lane
        if isinstance(size, int) and hi is not None and hi + stride - 1 <= size - 1:
            span = stride * lanes  # a whole number of registers where it stays inside
        wide = self.b.load(
            self._gep(buf, self.index_base(off)), typ=ir.VectorType(mem_type(buf.dtype), span), align=align
        )
        keep = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [stride * k for k in range(lanes)])
        return self.b.shuffle_vector(wide, ir.Constant(wide.type, ir.Undefined), keep)

    def _lane_pattern(self, off: E.Expr, lanes: int) -> Optional[list[int]]:
        """Each lane's element offset from lane 0's, where that is a constant within every
        chunk the vector loop emits: ``off`` affine in the vector variable ``v`` and in its
        ``(a*v + r) // c`` and ``(a*v + r) % c``, with ``c`` dividing ``a`` times the step between
        chunks and every coefficient of ``r``. Then ``(a*v + r) % c`` is ``(q + a*lane) % c``
        and ``(a*v + r) // c`` its value at lane 0 plus ``(q + a*lane) // c - q // c``, for the
        constant ``q`` the dividend leaves at lane 0. None elsewhere, or where the lanes'
        elements span more than :data:`MAX_PATTERN_SPAN` machine vectors."""
        if self.vec is None or self.vec_align is None:
            return None
        v = self.vec[0]
        lo, step = self.vec_align
        marks: dict[int, tuple[E.Var, list[int]]] = {}
        for n in pre_order(off):
            if not (isinstance(n, (E.FloorDiv, E.FloorMod)) and isinstance(n.b, E.IntImm) and n.b.value > 0):
                continue
            form = affine_form(n.a)
            if form is None or id(n) in marks:
                continue
            terms, c0 = form
            c = n.b.value
            a = sum(k for k, x in terms if x is v)
            if a == 0 or any(x is not v and (uses_var(x, v) or k % c) for k, x in terms) or (a * step) % c:
                continue
            q = (a * lo + c0) % c
            if isinstance(n, E.FloorMod):
                delta = [(q + a * i) % c - q for i in range(lanes)]
            else:
                delta = [(q + a * i) // c - q // c for i in range(lanes)]
            marks[id(n)] = (E.Var(f"_lane{len(marks)}", n.dtype), delta)
        if not marks:
            return None
        marked = transform(off, lambda n: n, lambda n: marks[id(n)][0] if id(n) in marks else None)
        cv = linear_coeff(marked, v)
        if cv is None:
            return None
        pattern = [cv * i for i in range(lanes)]
        for mark, delta in marks.values():
            k = linear_coeff(marked, mark)
            if k is None:
                return None
            pattern = [p + k * d for p, d in zip(pattern, delta)]
        if max(pattern) - min(pattern) + 1 > MAX_PATTERN_SPAN * lanes:
            return None
        return pattern

    def _pattern_load(self, buf: Buffer, off: E.Expr, pattern: list[int], lanes: int, align: int) -> ir.Value:
        """Lanes at constant offsets ``pattern`` from lane 0's element (see :meth:`_lane_pattern`)
        as one contiguous load of the elements they span and a shuffle: a weight read at
        ``f % 4`` by 16 lanes is a 4-element load repeated four times, ``A[f // 4]`` four
        copies of each of 4 elements, as TVM's build gets them (it scalarizes such an index per
        lane at constant offsets, and LLVM merges the loads), where a gather is one load per
        lane (vgatherdps on AVX-512, scalar loads and inserts on AVX2). Every element between
        the lowest and the highest lane's lies in the buffer: nothing outside is read."""
        first = min(pattern)
        span = max(pattern) - first + 1
        base = self.index_base(off)
        if first:
            base = self.b.add(base, ir.Constant(base.type, first))
        et = mem_type(buf.dtype)
        if span == 1:  # every lane the same element
            return K.splat(self.b, self.b.load(self._gep(buf, base), typ=et, align=align), lanes)
        wide = self.b.load(self._gep(buf, base), typ=ir.VectorType(et, span), align=align)
        keep = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [p - first for p in pattern])
        return self.b.shuffle_vector(wide, ir.Constant(wide.type, ir.Undefined), keep)

    # helpers -------------------------------------------------------------------------------
    def _gep(self, buf: Buffer, offset: ir.Value, inbounds: bool = True) -> ir.Value:
        return self.b.gep(self.bufs[buf], [offset], inbounds=inbounds, source_etype=mem_type(buf.dtype))

    def _lane_pointers(self, buf: Buffer, off: E.Expr) -> ir.Value:
        """A vector of one pointer per lane, for gathers and scatters (in a vector loop)."""
        var, lanes = typing.cast("tuple[E.Var, int]", self.vec)
        coeff = linear_coeff(off, var)
        if coeff is not None:  # strided: base + coeff * lane
            base = K.splat(self.b, self.index_base(off), lanes)
            offs = self.b.add(base, ir.Constant(ir.VectorType(I64, lanes), [coeff * k for k in range(lanes)]))
        else:
            offs = K.splat(self.b, self.expr(off), lanes)
        ptrs = self.b.gep(self.bufs[buf], [offs], source_etype=mem_type(buf.dtype))
        ptrs.type = ir.VectorType(PTR, lanes)  # llvmlite types a vector GEP as a scalar pointer
        return ptrs

    def _and_mask(self, outer: Optional[ir.Value], cond: ir.Value) -> ir.Value:
        if outer is None:
            return cond
        n = max(lanes_of(outer), lanes_of(cond))
        return self.b.and_(K.splat(self.b, outer, n), K.splat(self.b, cond, n))

    def _mask_vector(self, lanes: int) -> ir.Value:
        return K.splat(self.b, self.mask, lanes)


_X = ExpressionEmitter
_EXPR: dict[type, Callable[[ExpressionEmitter, Any], ir.Value]] = {
    E.Var: _X._var,
    E.IntImm: _X._imm,
    E.FloatImm: _X._imm,
    E.Not: _X._not,
    E.Select: _X._select,
    E.Cast: _X._cast,
    E.Call: _X._call,
    E.BufferLoad: _X._load,
    E.Min: _X._minmax,
    E.Max: _X._minmax,
    E.FloorDiv: _X._floor_div_mod,
    E.FloorMod: _X._floor_div_mod,
    **dict.fromkeys((E.Add, E.Sub, E.Mul, E.Div), _X._arith),
    **dict.fromkeys((E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.And, E.Or), _X._cmp),
}


def _speculatable(e: E.Expr) -> bool:
    """Whether ``e`` may be evaluated where its guard fails: integer arithmetic on variables
    and constants (no read, no call, divisors constant and nonzero)."""
    for n in pre_order(e):
        if isinstance(n, (E.BufferLoad, E.Call, E.Select)):
            return False
        if isinstance(n, (E.Div, E.FloorDiv, E.FloorMod)) and not (
            isinstance(n.b, E.IntImm) and n.b.value != 0
        ):
            return False
    return True
