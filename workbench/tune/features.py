"""Features of a candidate for the cost model: Ansor-style, one vector per buffer store, pooled.

The candidate is lowered (:func:`workbench.codegen.lower`); every ``BufferStore`` is described
by its enclosing loops and the accesses of its statement. Counts are multiplied by the trip
count (product of the enclosing loops' extents); every value ``x`` enters as
``log2(1 + |x|)`` so that sizes spanning many orders of magnitude stay comparable.

Per store (:data:`STORE_FEATURES`, in order):

* **arithmetic** (x trip count): float add/sub, mul, div/mod, min/max, math intrinsics (exp,
  sqrt, ...), compare/select; integer add/sub, mul, div/mod (floordiv/floormod), other
  (compare, logic, select) — the index arithmetic that schedules add or remove;
* **loops**: trip count, number of loops, extent of the innermost non-unit loop, vector lanes
  (product of vectorized extents), whether the vectorized loop is the innermost, number of
  vectorized loops, unrolled product and number of unrolled loops, the auto-unroll limit in
  scope (``pragma_auto_unroll_max_step``), the unrolled body (product of the innermost
  serial extents that auto-unrolling flattens: code size), parallel tasks (product of parallel
  extents), number
  of parallel loops, depth of the outermost parallel loop, trip count per parallel task,
  number of enclosing conditions;
* **memory, aggregated** over the statement's accesses (the store and every load): bytes
  accessed (x trip), unique bytes (footprints), arithmetic intensity (float ops per unique
  byte), number of accesses, number with a unit or zero innermost stride, number with a larger
  stride, number not contiguous along the vectorized loop (gathers), the largest innermost
  stride in bytes, bytes of the local buffers allocated around the store;
* **register tile** (the micro-kernel of a reduction: what stays in registers while the
  innermost loop the store does not move along — its reduction loop — turns): the outputs
  updated per step of that loop (the loops inside it; a reduction loop that codegen unrolls is
  part of the step, not the loop), the registers they take (64-byte vectors
  when vectorized, else scalars), whether all of it is flattened into straight-line code
  (unrolled, vectorized, or within the auto-unroll limit: only then can the accumulators live
  in registers), the reduction loop's extent, and per step the loads of other buffers (64-byte
  vector loads along the vectorized loop, scalar or broadcast loads otherwise), the bytes they
  read, and vector multiply-adds per load (accumulator registers x the unrolled reduction steps).
  They tell a float32 8x32 tile (16 vector FMAs per 8
  broadcasts and 2 vector loads) from a 1x64 one (4 per 5) or a 16x16 one (16 per 17), which
  the footprints above, taken over the whole nest, do not; all zero for a store that reads no
  earlier value of its own buffer or has no reduction loop;
* **memory, per access**, for the three accesses with the largest footprint: is a write, the
  footprint over the whole nest, inside one parallel task and along the innermost loop (bytes),
  reuse (accesses per unique element), innermost stride and stride along the vectorized loop
  (elements), cache lines touched.

Footprints are estimated from the strides (``min(product of extents of the loops the index
depends on, span of the index, buffer size)``); strides come from evaluating the flattened
index at neighbouring points, so non-affine indices (fused loops) get their local stride.

The vector of a candidate (:func:`extract`) is the sum and the maximum over stores of each
store feature, then :data:`GLOBAL_FEATURES` (stores, total float ops, parallel regions, bytes
allocated, loops): ``len(FEATURE_NAMES)`` values.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, cast

import numpy as np

from ..codegen.lower import lower
from ..ir import expr as E
from ..ir.func import PrimFunc
from ..ir.functor import children
from ..ir.stmt import Allocate, BufferStore, For, ForKind, IfThenElse, SeqStmt

_ARITH = [
    "f_addsub",
    "f_mul",
    "f_divmod",
    "f_minmax",
    "f_math",
    "f_cmp_select",
    "i_addsub",
    "i_mul",
    "i_divmod",
    "i_other",
]
_LOOPS = [
    "trip",
    "n_loops",
    "inner_extent",
    "vec_lanes",
    "vec_innermost",
    "n_vec",
    "unroll_product",
    "n_unroll",
    "auto_unroll",
    "unrolled_body",
    "par_tasks",
    "n_par",
    "par_depth",
    "work_per_task",
    "n_guards",
]
_MEM = [
    "bytes_accessed",
    "unique_bytes",
    "intensity",
    "n_access",
    "n_contiguous",
    "n_strided",
    "n_vec_strided",
    "max_stride_bytes",
    "alloc_bytes",
]
_REG = [
    "acc_elems",
    "acc_vectors",
    "acc_flat",
    "red_inner",
    "step_loads",
    "step_load_bytes",
    "step_intensity",
]
_ACCESS = ["is_write", "fp_total", "fp_task", "fp_inner", "reuse", "stride", "vec_stride", "lines"]
TOP_ACCESSES = 3

STORE_FEATURES = _ARITH + _LOOPS + _MEM + _REG + [f"acc{k}_{n}" for k in range(TOP_ACCESSES) for n in _ACCESS]
GLOBAL_FEATURES = ["n_stores", "total_flops", "n_par_regions", "total_alloc_bytes", "n_loops"]
FEATURE_NAMES = [f"sum_{n}" for n in STORE_FEATURES] + [f"max_{n}" for n in STORE_FEATURES] + GLOBAL_FEATURES

_AUTO_UNROLL = "pragma_auto_unroll_max_step"
_LINE_BYTES = 64

_F_OPS: dict[type[E.Expr], int] = {
    E.Add: 0,
    E.Sub: 0,
    E.Mul: 1,
    E.Div: 2,
    E.FloorDiv: 2,
    E.FloorMod: 2,
    E.Min: 3,
    E.Max: 3,
    E.Call: 4,
    E.Select: 5,
}
_I_OPS: dict[type[E.Expr], int] = {E.Add: 6, E.Sub: 6, E.Mul: 7, E.FloorDiv: 8, E.FloorMod: 8, E.Div: 8}


def _int(e: Any) -> Optional[int]:
    return e.value if isinstance(e, E.IntImm) else None


def _count_ops(node: E.Expr, counts: list[float], loads: list[E.BufferLoad]) -> None:
    """Operation counts of an expression tree (into ``counts``) and its loads."""
    stack = [node]
    while stack:
        e = stack.pop()
        t = type(e)
        if t is E.BufferLoad:
            ld = cast(E.BufferLoad, e)
            loads.append(ld)
            stack.extend(ld.indices)
            continue
        if isinstance(e, E.BinaryOp) or t in (E.Select, E.Call, E.Not):
            if E.is_float(e.dtype):
                counts[_F_OPS.get(t, 5)] += 1
            elif isinstance(e, E.CmpOp) and E.is_float(e.a.dtype):
                counts[5] += 1
            else:
                counts[_I_OPS.get(t, 9)] += 1
        stack.extend(c for c in children(e) if isinstance(c, E.Expr))


def _eval_index(e: E.Expr, env: dict) -> int:
    """Integer value of an index expression (floor division semantics, as in the IR)."""
    t = type(e)
    if t is E.IntImm:
        return cast(E.IntImm, e).value
    if t is E.Var:
        return env.get(e, 0)
    bo = cast(E.BinaryOp, e)  # read only in the binary-op branches below
    if t is E.Add:
        return _eval_index(bo.a, env) + _eval_index(bo.b, env)
    if t is E.Sub:
        return _eval_index(bo.a, env) - _eval_index(bo.b, env)
    if t is E.Mul:
        return _eval_index(bo.a, env) * _eval_index(bo.b, env)
    if t in (E.FloorDiv, E.Div):
        b = _eval_index(bo.b, env)
        return _eval_index(bo.a, env) // b if b else 0
    if t is E.FloorMod:
        b = _eval_index(bo.b, env)
        return _eval_index(bo.a, env) % b if b else 0
    if t is E.Min:
        return min(_eval_index(bo.a, env), _eval_index(bo.b, env))
    if t is E.Max:
        return max(_eval_index(bo.a, env), _eval_index(bo.b, env))
    if t is E.Cast:
        return _eval_index(cast(E.Cast, e).value, env)
    if t is E.Select:
        return _eval_index(cast(E.Select, e).true_value, env)
    return 0  # a data-dependent index (a load): treat as constant


class _Loop:
    __slots__ = ("var", "extent", "kind", "auto_unroll")

    def __init__(self, loop: For):
        self.var = loop.loop_var
        self.extent = _int(loop.extent) or 1
        self.kind = loop.kind
        self.auto_unroll = loop.annotations.get(_AUTO_UNROLL, 0)


def _coeffs(buffer, indices, loops: list[_Loop]) -> list[int]:
    """Elements the flattened index moves by per step of each loop (0 for unit loops)."""
    flat_terms = list(zip(indices, buffer.strides()))

    def flat(env: dict) -> int:
        return sum(_eval_index(i, env) * s for i, s in flat_terms)

    base = flat({})
    return [flat({lp.var: 1}) - base if lp.extent > 1 else 0 for lp in loops]


def _span(loops: list[_Loop], coeff: list[int], size: int) -> float:
    """Elements an access touches over ``loops`` (its coefficients ``coeff``)."""
    product, span = 1, 1
    for lp, c in zip(loops, coeff):
        if c:
            product *= lp.extent
            span += (lp.extent - 1) * abs(c)
    return float(min(product, span, size))


def _register_tile(store: BufferStore, loads: list, loops: list[_Loop], flops: float) -> list[float]:
    """The :data:`_REG` features of a store (see the module docstring)."""
    if not any(ld.buffer is store.buffer for ld in loads):
        return [0.0] * len(_REG)  # not an update (an init, a copy: no accumulator)
    coeff = _coeffs(store.buffer, store.indices, loops)
    reductions = [k for k in range(len(loops) - 1, -1, -1) if loops[k].extent > 1 and not coeff[k]]
    if not reductions:
        return [0.0] * len(_REG)
    # the loop that carries the accumulators is the innermost reduction loop that stays a loop
    # in the machine code: one that is unrolled (explicitly or by the auto-unroll limit) is part
    # of the straight-line body, and so is what it updates (k = [64, 2] with the 2 unrolled
    # under 8 unrolled rows: a 16-row tile per step of the 64, not a 2-row one)
    flat_from = _flattened_from(loops)
    red = next((k for k in reductions if k < flat_from), reductions[0])
    inner = loops[red + 1 :]
    acc = _span(inner, coeff[red + 1 :], max(1, math.prod(store.buffer.shape)))
    steps = math.prod(lp.extent for lp, c in zip(inner, coeff[red + 1 :]) if lp.extent > 1 and not c)
    vec = next((k for k in range(len(inner) - 1, -1, -1) if inner[k].kind == ForKind.VECTORIZED), None)
    auto = max((lp.auto_unroll for lp in loops[: red + 1]), default=0)
    flat = all(lp.kind in (ForKind.VECTORIZED, ForKind.UNROLLED) or lp.extent == 1 for lp in inner)

    def registers(elems: float, itemsize: int, contiguous: bool) -> float:
        # vectors of a cache line's width (a 512-bit register) when contiguous along the
        # vectorized loop, else one scalar or broadcast per element
        return math.ceil(elems * itemsize / _LINE_BYTES) if contiguous and vec is not None else elems

    loads_n = load_bytes = 0.0
    for ld in loads:
        if ld.buffer is store.buffer:
            continue  # the accumulator itself
        c = _coeffs(ld.buffer, ld.indices, inner)
        fp = _span(inner, c, max(1, math.prod(ld.buffer.shape)))
        itemsize = np.dtype(ld.buffer.dtype).itemsize
        load_bytes += fp * itemsize
        loads_n += registers(fp, itemsize, vec is not None and abs(c[vec]) == 1)
    acc_regs = registers(acc, np.dtype(store.buffer.dtype).itemsize, True)
    return [
        float(acc),
        float(acc_regs),
        float(flat or acc <= auto),
        float(loops[red].extent),
        loads_n,
        load_bytes,
        flops / 2 * acc_regs * steps / max(loads_n, 1.0),
    ]


def _flattened_from(loops: list[_Loop]) -> int:
    """Index of the outermost loop of the innermost run of loops that codegen flattens into
    straight-line code (vectorized, unrolled, unit, or serial within the auto-unroll limit, as
    the emitter's ``_auto_unrolled`` counts: statements, a vector loop one); ``len(loops)`` when
    the innermost loop stays a loop."""
    auto = max((lp.auto_unroll for lp in loops), default=0)
    steps, k = 1, len(loops)
    while k > 0:
        lp = loops[k - 1]
        if lp.kind == ForKind.VECTORIZED or lp.extent == 1:
            pass
        elif lp.kind == ForKind.UNROLLED or (lp.kind == ForKind.SERIAL and steps * lp.extent <= auto):
            steps *= lp.extent
        else:
            break
        k -= 1
    return k


def _access(
    buffer,
    indices,
    loops: list[_Loop],
    is_write: bool,
    trip: int,
    par_at: int,
    inner: Optional[int],
    vec: Optional[int],
) -> tuple[list[float], int, int]:
    """(per-access features, innermost stride in bytes, stride along the vectorized loop in
    elements) of one buffer access."""
    coeff = _coeffs(buffer, indices, loops)
    elem = np.dtype(buffer.dtype).itemsize
    size = max(1, math.prod(buffer.shape))

    def footprint(start: int, stop: int) -> float:
        return _span(loops[start:stop], coeff[start:stop], size)

    fp_total = footprint(0, len(loops))
    fp_task = footprint(par_at + 1, len(loops)) if par_at >= 0 else fp_total
    fp_inner = footprint(inner, inner + 1) if inner is not None else 1.0
    stride = abs(coeff[inner]) if inner is not None else 0
    vec_stride = abs(coeff[vec]) if vec is not None else 0
    lines = fp_total * elem / _LINE_BYTES if stride <= 1 else fp_total
    feats = [
        float(is_write),
        fp_total * elem,
        fp_task * elem,
        fp_inner * elem,
        trip / fp_total,
        float(stride),
        float(vec_stride),
        lines,
    ]
    return feats, stride * elem, vec_stride


def _store_features(store: BufferStore, loops: list[_Loop], guards: int, alloc_bytes: int) -> list[float]:
    trip = math.prod(lp.extent for lp in loops)
    counts = [0.0] * len(_ARITH)
    loads: list[E.BufferLoad] = []
    _count_ops(store.value, counts, loads)
    for idx in store.indices:
        _count_ops(idx, counts, loads)
    arith = [c * trip for c in counts]

    inner = next((k for k in range(len(loops) - 1, -1, -1) if loops[k].extent > 1), None)
    vec_loops = [k for k, lp in enumerate(loops) if lp.kind == ForKind.VECTORIZED]
    unrolled = [lp.extent for lp in loops if lp.kind == ForKind.UNROLLED]
    par = [k for k, lp in enumerate(loops) if lp.kind == ForKind.PARALLEL]
    par_tasks = math.prod(loops[k].extent for k in par) if par else 1
    vec = vec_loops[-1] if vec_loops else None
    auto = max((lp.auto_unroll for lp in loops), default=0)
    body = 1  # what auto-unrolling flattens: innermost serial loops while they fit the limit
    for lp in reversed(loops):
        if lp.kind not in (ForKind.SERIAL, ForKind.UNROLLED) or body * lp.extent > max(auto, 1):
            break
        body *= lp.extent
    loop_feats = [
        trip,
        len(loops),
        loops[inner].extent if inner is not None else 1,
        math.prod(loops[k].extent for k in vec_loops) if vec_loops else 0,
        float(vec is not None and vec >= (inner if inner is not None else 0)),
        len(vec_loops),
        math.prod(unrolled) if unrolled else 0,
        len(unrolled),
        auto,
        body,
        par_tasks if par else 0,
        len(par),
        par[0] + 1 if par else 0,
        trip / par_tasks,
        guards,
    ]

    par_at = par[0] if par else -1
    accesses = [_access(store.buffer, store.indices, loops, True, trip, par_at, inner, vec)]
    accesses += [_access(ld.buffer, ld.indices, loops, False, trip, par_at, inner, vec) for ld in loads]
    elem_bytes = [np.dtype(store.buffer.dtype).itemsize] + [
        np.dtype(ld.buffer.dtype).itemsize for ld in loads
    ]
    unique = sum(a[0][1] for a in accesses)
    flops = sum(arith[:6])
    mem = [
        trip * sum(elem_bytes),
        unique,
        flops / max(unique, 1.0),
        len(accesses),
        sum(1 for _, s, _ in accesses if s <= max(elem_bytes)),
        sum(1 for _, s, _ in accesses if s > max(elem_bytes)),
        sum(1 for _, _, v in accesses if v > 1),
        max(s for _, s, _ in accesses),
        alloc_bytes,
    ]
    reg = _register_tile(store, loads, loops, sum(counts[:6]))
    top = sorted((a[0] for a in accesses), key=lambda f: -f[1])[:TOP_ACCESSES]
    top += [[0.0] * len(_ACCESS)] * (TOP_ACCESSES - len(top))
    return arith + loop_feats + mem + reg + [x for f in top for x in f]


def store_features(func: PrimFunc) -> tuple[np.ndarray, list[float]]:
    """(one raw feature row per store, the global features) of a lowered or scheduled func."""
    func = lower(func)
    rows: list[list[float]] = []
    n_loops = n_par_regions = 0
    total_alloc = 0

    def walk(node, loops: list[_Loop], guards: int, alloc: int, in_par: bool) -> None:
        nonlocal n_loops, n_par_regions, total_alloc
        t = type(node)
        if t is BufferStore:
            rows.append(_store_features(node, loops, guards, alloc))
        elif t is For:
            n_loops += 1
            is_par = node.kind == ForKind.PARALLEL
            n_par_regions += int(is_par and not in_par)
            walk(node.body, loops + [_Loop(node)], guards, alloc, in_par or is_par)
        elif t is SeqStmt:
            for s in node.seq:
                walk(s, loops, guards, alloc, in_par)
        elif t is IfThenElse:
            walk(node.then_case, loops, guards + 1, alloc, in_par)
            if node.else_case is not None:
                walk(node.else_case, loops, guards + 1, alloc, in_par)
        elif t is Allocate:
            size = node.buffer.alloc_size() * np.dtype(node.buffer.dtype).itemsize
            total_alloc += size
            walk(node.body, loops, guards, alloc + size, in_par)
        else:
            for c in children(node):
                if hasattr(c, "__dataclass_fields__") and not isinstance(c, E.Expr):
                    walk(c, loops, guards, alloc, in_par)

    walk(func.body, [], 0, 0, False)
    table = np.array(rows, dtype=np.float64).reshape(len(rows), len(STORE_FEATURES))
    total_flops = float(table[:, :6].sum()) if len(rows) else 0.0
    return table, [len(rows), total_flops, n_par_regions, total_alloc, n_loops]


def extract(func: PrimFunc) -> np.ndarray:
    """The fixed-length feature vector of a candidate (see the module docstring)."""
    table, glob = store_features(func)
    logs = np.log2(1.0 + np.abs(table))
    if len(table):
        pooled = [np.log2(1.0 + np.abs(table).sum(axis=0)), logs.max(axis=0)]
    else:
        pooled = [np.zeros(len(STORE_FEATURES))] * 2
    return np.concatenate(pooled + [np.log2(1.0 + np.abs(np.array(glob, dtype=np.float64)))])


def extract_many(funcs: Sequence[PrimFunc]) -> np.ndarray:
    """Feature matrix, one row per function."""
    if not funcs:
        return np.zeros((0, len(FEATURE_NAMES)))
    return np.stack([extract(f) for f in funcs])
