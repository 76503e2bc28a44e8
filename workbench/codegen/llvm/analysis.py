"""Small static analyses the LLVM emitter needs on lowered IR.

* :func:`flat_offset` — a buffer access as one element offset (``Σ index_d * stride_d``);
* :func:`bounds` — an integer interval for an index expression, from the enclosing loops'
  ranges (to prove a load in bounds, or a dividend non-negative);
* :func:`linear_coeff` — ``c`` when an expression is ``c * v + (terms without v)``: decides
  whether an access in a vectorized loop is contiguous (c = 1), strided, invariant (c = 0) or
  needs a gather (not linear);
* :func:`vector_lanes` — whether a ``vectorized`` loop can be emitted as explicit SIMD code, and
  with how many lanes per machine vector;
* :func:`divisor_split` — the chunk of a ``vectorized`` loop within which its ``// c`` and ``% c``
  are a scalar and an affine function of the lane.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

from ...ir.buffer import Buffer
from ...ir.expr import (
    Add,
    BufferLoad,
    Cast,
    Expr,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Select,
    Sub,
    Var,
    is_int,
)
from ...ir.dtype import dtype_info
from ...ir.functor import pre_order, uses_var
from ...ir.stmt import BufferStore, Evaluate, For, ForKind, IfThenElse, SeqStmt, Stmt

#: inclusive integer interval; None on a side means unbounded
Interval = tuple[Optional[int], Optional[int]]
UNKNOWN: Interval = (None, None)


def flat_offset(buffer: Buffer, indices: Sequence[Expr]) -> Expr:
    """``Σ indices[d] * strides[d]`` as an IR expression, dropping zero terms and unit factors.
    Indices of narrow or unsigned dtypes are widened to int64 first (a stride must not wrap)."""
    terms: list[Expr] = []
    for idx, stride in zip(indices, buffer.strides()):
        if isinstance(idx, IntImm) and idx.value == 0:
            continue
        if idx.dtype not in ("int32", "int64"):
            idx = Cast("int64", idx)
        terms.append(idx if isinstance(stride, int) and stride == 1 else Mul.make(idx, stride))
    if not terms:
        return IntImm(0)
    out = terms[0]
    for t in terms[1:]:
        out = Add.make(out, t)
    return out


def bounds(e: Expr, ranges: Mapping[Var, Interval]) -> Interval:
    """A conservative inclusive interval of the integer expression ``e``."""
    if isinstance(e, IntImm):
        return (e.value, e.value)
    if isinstance(e, Var):
        return ranges.get(e, UNKNOWN)
    if isinstance(e, (Add, Sub)):
        (a0, a1), (b0, b1) = bounds(e.a, ranges), bounds(e.b, ranges)
        if isinstance(e, Sub):
            b0, b1 = (None if b1 is None else -b1), (None if b0 is None else -b0)
        return (None if a0 is None or b0 is None else a0 + b0, None if a1 is None or b1 is None else a1 + b1)
    if isinstance(e, Mul):
        (a0, a1), (b0, b1) = bounds(e.a, ranges), bounds(e.b, ranges)
        if a0 is None or a1 is None or b0 is None or b1 is None:
            return UNKNOWN
        products = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
        return (min(products), max(products))
    if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm) and e.b.value > 0:
        c = e.b.value
        a0, a1 = bounds(e.a, ranges)
        if isinstance(e, FloorMod):
            if a0 is not None and a1 is not None and a0 // c == a1 // c:
                return (a0 % c, a1 % c)
            return (0, c - 1)
        return (None if a0 is None else a0 // c, None if a1 is None else a1 // c)
    if isinstance(e, (Min, Max)):
        (a0, a1), (b0, b1) = bounds(e.a, ranges), bounds(e.b, ranges)
        pick = min if isinstance(e, Min) else max
        lo = None if a0 is None or b0 is None else pick(a0, b0)
        hi = None if a1 is None or b1 is None else pick(a1, b1)
        if isinstance(e, Min):  # min(a, b) <= either upper bound
            hi = a1 if b1 is None else b1 if a1 is None else hi
        else:  # max(a, b) >= either lower bound
            lo = a0 if b0 is None else b0 if a0 is None else lo
        return (lo, hi)
    if isinstance(e, Select):
        (a0, a1), (b0, b1) = bounds(e.true_value, ranges), bounds(e.false_value, ranges)
        return (
            None if a0 is None or b0 is None else min(a0, b0),
            None if a1 is None or b1 is None else max(a1, b1),
        )
    if (
        isinstance(e, Cast)
        and is_int(e.dtype)
        and is_int(e.value.dtype)
        and dtype_info(e.dtype).bits >= dtype_info(e.value.dtype).bits
        and e.dtype.startswith("u") == e.value.dtype.startswith("u")
    ):
        return bounds(e.value, ranges)
    return UNKNOWN


def in_bounds(offset: Expr, buffer: Buffer, ranges: Mapping[Var, Interval]) -> bool:
    """Whether ``offset`` provably stays inside ``buffer``'s allocation."""
    size = buffer.alloc_size()
    if not isinstance(size, int):  # symbolic: not proved here (the access is guarded instead)
        return False
    lo, hi = bounds(offset, ranges)
    return lo is not None and hi is not None and lo >= 0 and hi < size


def loop_interval(loop: For, ranges: Mapping[Var, Interval]) -> Interval:
    """The values ``loop``'s variable takes."""
    lo, hi = bounds(loop.min, ranges)
    ext_hi = bounds(loop.extent, ranges)[1]
    if hi is None or ext_hi is None:
        return (lo, None)
    return (lo, hi + ext_hi - 1)


def linear_coeff(e: Expr, v: Var) -> Optional[int]:
    """``c`` if ``e == c * v + (terms free of v)``, else None. Sums and constant multiples are
    read syntactically, plus one identity: ``k*c*(x // c) + k*(x % c) == k*x``, which is what
    indexing a fused loop's two halves into adjacent dimensions leaves (``A[.., f // 3, f % 3]``
    walks ``A`` contiguously as ``f`` does)."""
    if not uses_var(e, v):
        return 0
    terms = _linear_terms(e)
    if terms is None:
        return None
    coeff = 0
    for k, atom in _merge_div_mod(terms):
        if atom is v:
            coeff += k
        elif uses_var(atom, v):
            return None
    return coeff


def _linear_terms(e: Expr) -> Optional[list[tuple[int, Expr]]]:
    """``e`` as a sum of ``coefficient * atom`` (atoms: anything but +, - and * by a constant)."""
    if isinstance(e, (Add, Sub)):
        a, b = _linear_terms(e.a), _linear_terms(e.b)
        if a is None or b is None:
            return None
        return a + (b if isinstance(e, Add) else [(-k, x) for k, x in b])
    if isinstance(e, Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, IntImm):
                t = _linear_terms(x)
                return None if t is None else [(k * y.value, a) for k, a in t]
    if (
        isinstance(e, Cast)
        and is_int(e.dtype)
        and is_int(e.value.dtype)
        and dtype_info(e.dtype).bits >= dtype_info(e.value.dtype).bits
    ):
        return _linear_terms(e.value)
    if isinstance(e, IntImm):
        return []
    return [(1, e)]


def _merge_div_mod(terms: list[tuple[int, Expr]]) -> list[tuple[int, Expr]]:
    """Replace each pair ``k*c * (x // c)``, ``k * (x % c)`` by ``k * x``."""
    out: list = list(terms)
    for i, (kd, d) in enumerate(out):
        if not (isinstance(d, FloorDiv) and isinstance(d.b, IntImm) and d.b.value > 0):
            continue
        c = d.b.value
        for j, (km, m) in enumerate(out):
            if (
                isinstance(m, FloorMod)
                and m.a is d.a
                and isinstance(m.b, IntImm)
                and m.b.value == c
                and kd == km * c
            ):
                out[i], out[j] = (km, d.a), (0, None)
                break
    return [(k, x) for k, x in out if x is not None]


def vector_lanes(loop: For, vector_bits: int) -> Optional[int]:
    """Lanes per machine vector if ``loop`` (kind vectorized) can become explicit SIMD code.

    Requirements: a constant extent; a body of stores, ifs, evaluations and inner loops whose
    bounds do not depend on the vector variable (no allocation, no nested vectorized loop); and
    every store's address linear in the vector variable with a non-zero coefficient, so lanes
    write distinct elements. Otherwise None: the caller emits a scalar loop with vectorization
    metadata instead.
    """
    v = loop.loop_var
    if not isinstance(loop.extent, IntImm) or loop.extent.value < 1:
        return None
    widest = 8
    for node in pre_order(loop.body):
        if isinstance(node, Stmt) and not isinstance(node, (BufferStore, SeqStmt, IfThenElse, Evaluate, For)):
            return None  # Allocate (per-lane storage) or anything unexpected
        if isinstance(node, For):
            if node.kind in (ForKind.VECTORIZED, ForKind.THREAD_BINDING):
                return None
            if uses_var(node.min, v) or uses_var(node.extent, v):
                return None
        if isinstance(node, BufferStore):
            c = linear_coeff(flat_offset(node.buffer, node.indices), v)
            if c is None or c == 0:
                return None
        if isinstance(node, (BufferStore, BufferLoad)):
            widest = max(widest, 8 * dtype_info(node.buffer.dtype).nbytes)
        elif isinstance(node, Expr) and node.dtype != "bool" and not isinstance(node, Var):
            widest = max(widest, 8 * dtype_info(node.dtype).nbytes)
    return max(vector_bits // widest, 1)


def divisor_split(loop: For, min_lanes: int) -> tuple[int, list[tuple[Expr, int]]]:
    """Lanes ``L`` per chunk of the ``vectorized`` loop ``loop`` (variable ``v``, constant min
    and extent ``n``) within which each ``(a*v + r) // c`` and ``(a*v + r) % c`` of its body
    stays in one block of ``c``: the quotient is the same for every lane and the remainder is
    ``a * lane`` plus a scalar. With the chunks starting at ``min + k*L``, that holds where
    ``a*L`` divides ``c`` and every term of ``a*min + r`` (their coefficients and constant).

    A fused loop indexing two dimensions by ``f // c`` and ``f % c`` (a depthwise convolution's
    ``w, c`` tile, 64 lanes over two pixels of 32 channels) reads a buffer indexed by ``f % c``
    alone (the weights) at lanes ``0..c-1, 0..c-1``: a gather, one load per lane (a masked
    gather on AVX-512, scalar loads and inserts on AVX2), where chunks of ``c`` lanes read
    contiguous vectors. TVM's build of the same loop gets contiguous loads too: its vectorizer
    leaves such an index to be scalarized per lane, at constant lane offsets, and LLVM merges
    the scalar loads back into vector loads.

    Only divisions whose chunk would keep at least ``min_lanes`` lanes count (splitting a
    vector into narrower ones for ``v // 2`` would cost more than its gather saves), and only
    where one of them indexes an access that is not contiguous or strided as it is (a loop
    whose accesses all pair ``f // c`` and ``f % c`` in adjacent dimensions stays one vector).
    Returns ``(L, nodes)``: the divisions (node, ``a``) rewritable per chunk of ``L`` lanes, or
    ``(n, [])`` when there is none."""
    v = loop.loop_var
    if not isinstance(loop.extent, IntImm) or not isinstance(loop.min, IntImm):
        return (0, [])
    n, lo = loop.extent.value, loop.min.value
    found: list[tuple[Expr, int, int]] = []  # (node, a, largest chunk)
    for node in pre_order(loop.body):
        if not (isinstance(node, (FloorDiv, FloorMod)) and isinstance(node.b, IntImm) and node.b.value > 0):
            continue
        form = affine_form(node.a)
        if form is None:
            continue
        terms, const = form
        a = sum(k for k, x in terms if x is v)
        if a <= 0 or any(x is not v and uses_var(x, v) for k, x in terms):
            continue  # v not in it, or a lane-decreasing or non-affine dividend
        rest = [k for k, x in terms if x is not v] + [const + a * lo]
        block = math.gcd(node.b.value, *rest)
        if block % a == 0 and block // a >= min_lanes:
            found.append((node, a, block // a))
    ids = {id(node) for node, _, _ in found}
    gathered = (  # an access that is not linear in v as a whole (the pairs f // c, f % c of
        # adjacent dimensions are: linear_coeff) and that a rewritten division would make so
        x
        for x in pre_order(loop.body)
        if isinstance(x, (BufferLoad, BufferStore))
        and linear_coeff(flat_offset(x.buffer, x.indices), v) is None
        and any(id(d) in ids for i in x.indices for d in pre_order(i))
    )
    if next(gathered, None) is None:
        return (n, [])
    lanes = math.gcd(n, *(chunk for _, _, chunk in found))
    if lanes < min_lanes:
        return (n, [])
    return (lanes, [(node, a) for node, a, _ in found])


def affine_form(e: Expr) -> Optional[tuple[list[tuple[int, Expr]], int]]:
    """``e`` as ``Σ k * atom + c``: the terms (atoms as :func:`linear_coeff` reads them, in order
    of appearance, the same atom merged) and the constant; None where ``e`` has no such form."""
    if isinstance(e, IntImm):
        return [], e.value
    if isinstance(e, (Add, Sub)):
        a, b = affine_form(e.a), affine_form(e.b)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, Add) else -1
        return _merge_atoms(a[0] + [(sign * k, x) for k, x in b[0]]), a[1] + sign * b[1]
    if isinstance(e, Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, IntImm):
                f = affine_form(x)
                return None if f is None else ([(k * y.value, a) for k, a in f[0]], f[1] * y.value)
    if (
        isinstance(e, Cast)
        and is_int(e.dtype)
        and is_int(e.value.dtype)
        and dtype_info(e.dtype).bits > dtype_info(e.value.dtype).bits
        and not e.value.dtype.startswith("u")  # a signed widening: sext distributes over + (nsw)
    ):
        return affine_form(e.value)  # atoms of the narrower dtype: widened where emitted
    return [(1, e)], 0


def _merge_atoms(terms: list[tuple[int, Expr]]) -> list[tuple[int, Expr]]:
    out: dict[int, list] = {}
    for k, x in terms:
        if id(x) in out:
            out[id(x)][0] += k
        else:
            out[id(x)] = [k, x]
    return [(k, x) for k, x in out.values() if k != 0]


__all__ = [
    "Interval",
    "UNKNOWN",
    "flat_offset",
    "bounds",
    "in_bounds",
    "loop_interval",
    "affine_form",
    "linear_coeff",
    "vector_lanes",
    "divisor_split",
]
