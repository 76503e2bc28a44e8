"""The course's self-checks: ``check_exercise_N(answer)`` says what is right or precisely wrong.

Each check runs the student's answer (builds it, compares it with numpy, inspects its loop nest
or trace) and returns a :class:`Feedback`: shown green or red in a notebook, ``.ok`` and
``.message`` in code. A check never raises on a wrong answer, and an exception inside the
student's code becomes a message saying where it came from. Exercises are numbered through the
whole course (lesson 1 has exercises 1-2, lesson 2 exercise 3, ...); the lessons import from here
(``from checks import *``), the tests import ``tutorials/checks.py`` directly.
"""

from __future__ import annotations

import html
import math
import random
import re
from dataclasses import dataclass

import numpy as np

import workbench as wb
from workbench.ir.stmt import REDUCE, ForKind
from workbench.ir.index import index
from workbench.ir.structural import structural_match
from workbench.space import PostOrderApply, replay

__all__ = [
    "Feedback",
    "matmul",
    "dense_relu",
    "vector_sum",
    "vecmat",
    "NETWORK_A",
    "NETWORK_B",
    "TARGET_3B",
    "loop_nest_diff",
    "check_exercise_3b",
] + [f"check_exercise_{n}" for n in range(1, 16)]


@dataclass(frozen=True)
class Feedback:
    """The verdict on one exercise: ``ok`` and a message a student can act on."""

    exercise: int | str
    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return f"Exercise {self.exercise}: {'correct' if self.ok else 'not yet'}. {self.message}"

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour, mark = ("#1a7f37", "&#10004; correct") if self.ok else ("#cf222e", "&#10008; not yet")
        return (
            f'<div class="wb-feedback wb-feedback-{"ok" if self.ok else "wrong"}" '
            f'style="border-left:6px solid {colour};padding:6px 10px;margin:4px 0;'
            f'background:{colour}14"><b style="color:{colour}">Exercise {self.exercise}: '
            f"{mark}</b><br>{html.escape(self.message)}</div>"
        )


class _Wrong(Exception):
    """What is wrong with an answer (becomes the Feedback's message)."""


def _check(n: int, body) -> Feedback:
    try:
        return Feedback(n, True, body())
    except _Wrong as wrong:
        return Feedback(n, False, str(wrong))


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise _Wrong(message)


def _call(what: str, fn, *args):
    """Run the student's code; an exception becomes a message naming ``what`` raised it."""
    try:
        return fn(*args)
    except _Wrong:
        raise
    except Exception as exc:  # any error of the student's code is feedback, not a crash
        raise _Wrong(f"{what} raised {type(exc).__name__}: {exc}") from None


# -- the course's small computations -----------------------------------------------------------


def matmul(n: int = 64, m: int = 64, k: int = 64) -> wb.PrimFunc:
    """C[i, j] = sum_k A[i, k] * B[k, j]: one block "C"."""
    A = wb.placeholder((n, k), "float32", name="A")
    B = wb.placeholder((k, m), "float32", name="B")
    r = wb.reduce_axis(k, name="k")
    C = wb.compute((n, m), lambda i, j: wb.sum(A[i, r] * B[r, j], axis=r), name="C")
    return wb.create_func([A, B, C], name="matmul")


def dense_relu(n: int = 64, m: int = 64, k: int = 64) -> wb.PrimFunc:
    """relu(A @ B + bias): blocks "matmul", "bias_add", "relu"."""
    A = wb.placeholder((n, k), "float32", name="A")
    B = wb.placeholder((k, m), "float32", name="B")
    bias = wb.placeholder((m,), "float32", name="bias")
    r = wb.reduce_axis(k, name="k")
    mm = wb.compute((n, m), lambda i, j: wb.sum(A[i, r] * B[r, j], axis=r), name="matmul")
    biased = wb.compute((n, m), lambda i, j: mm[i, j] + bias[j], name="bias_add")
    out = wb.compute((n, m), lambda i, j: wb.maximum(biased[i, j], 0.0), name="relu")
    return wb.create_func([A, B, bias, out], name="dense_relu")


def vector_sum(n: int = 4096) -> wb.PrimFunc:
    """S[0] = sum_k A[k]: one reduction block "S" over a long vector."""
    A = wb.placeholder((n,), "float32", name="A")
    r = wb.reduce_axis(n, name="k")
    S = wb.compute((1,), lambda i: wb.sum(A[r], axis=r), name="S")
    return wb.create_func([A, S], name="vector_sum")


def vecmat(k: int = 512, m: int = 1024) -> wb.PrimFunc:
    """y[j] = sum_k x[k] * W[k, j] (a dense layer at batch size 1): one block "y"."""
    x = wb.placeholder((k,), "float32", name="x")
    W = wb.placeholder((k, m), "float32", name="W")
    r = wb.reduce_axis(k, name="k")
    y = wb.compute((m,), lambda j: wb.sum(x[r] * W[r, j], axis=r), name="y")
    return wb.create_func([x, W, y], name="vecmat")


def _run(func_or_sch, inputs, out_shape, target="llvm"):
    kernel = _call("wb.build", wb.build, func_or_sch, target)
    out = np.zeros(out_shape, "float32")
    _call("running the kernel", kernel, *inputs, out)
    return out


def _first_difference(got, expected) -> str:
    bad = np.argwhere(~np.isclose(got, expected, rtol=1e-3, atol=1e-3))
    idx = tuple(int(v) for v in bad[0])
    return f"at index {list(idx)} it computes {got[idx]:.4g}, numpy says {expected[idx]:.4g}"


def _same_as_numpy(got, expected, hint: str = "") -> None:
    if not np.allclose(got, expected, rtol=1e-3, atol=1e-3):
        raise _Wrong("the result is wrong: " + _first_difference(got, expected) + hint)


def _schedule(answer, n: int) -> wb.Schedule:
    _require(isinstance(answer, wb.Schedule), f"pass the Schedule (`sch`), not a {type(answer).__name__}")
    return answer


def _blocks(func: wb.PrimFunc) -> dict:
    return {name: r for name, r in index(func).realizes.items() if name != "root"}


def _loops(func: wb.PrimFunc, block: str) -> list:
    ix = index(func)
    return ix.loops_above(ix.realizes[block])


def _uses(expr, var) -> bool:
    from workbench.ir.expr import Var

    stack = [expr]
    while stack:
        e = stack.pop()
        if e is var:
            return True
        if isinstance(e, Var):
            continue
        stack.extend(v for v in vars(e).values() if hasattr(v, "__dataclass_fields__"))
        for v in vars(e).values():
            if isinstance(v, tuple):
                stack.extend(x for x in v if hasattr(x, "__dataclass_fields__"))
    return False


def _rng(seed=0):
    return np.random.default_rng(seed)


_OOB = re.compile(
    r"(?:reads|writes) (\w+)\[([^\]]*)\] out of bounds: index (.+?) of dimension (\d+) reaches "
    r"(-?\d+), but \w+ has extent (\d+)"
)
_ORDINAL = ["first", "second", "third", "fourth"]


def _student_index(expr: str) -> str:
    """Block variables (vi, vj) are the student's loop variables (i, j)."""
    return re.sub(r"\bv(\w)\b", r"\1", expr)


def _out_of_bounds(err: wb.OutOfBoundsError) -> str:
    """The first problem of ``err`` in a student's words: which index runs past which buffer."""
    for problem in err.problems:
        m = _OOB.search(problem)
        if m is None:
            continue
        buf, indices, idx, dim, reach, extent = m.groups()
        dim, extent = int(dim), int(extent)
        which = _ORDINAL[dim] if dim < len(_ORDINAL) else f"index {dim}"
        idx = _student_index(idx)
        return (
            f"{buf}[{_student_index(indices)}] reads past the end of {buf}: its {which} index is {idx}, "
            f"which goes up to {reach}, but {buf} has only {extent} entries along that axis "
            f"(0..{extent - 1}). Which of your loop variables runs over that axis of {buf}?"
        )
    return str(err)


def _func_from(answer) -> wb.PrimFunc:
    """The student's PrimFunc: given, or made by calling their function (so that an
    out-of-bounds access, refused by ``wb.create_func``, becomes feedback)."""
    if callable(answer) and not isinstance(answer, wb.PrimFunc):
        try:
            answer = answer()
        except wb.OutOfBoundsError as err:
            raise _Wrong(_out_of_bounds(err)) from None
        except Exception as exc:
            raise _Wrong(f"your function raised {type(exc).__name__}: {exc}") from None
    _require(
        isinstance(answer, wb.PrimFunc),
        f"`func` should be a PrimFunc made by wb.create_func, not a {type(answer).__name__}",
    )
    return answer


# -- lesson 1: the IR and loop nests ------------------------------------------------------------


def check_exercise_1(answer) -> Feedback:
    """D[i, j] = A[i, j] + B[j, i] for A of shape (32, 16) and B of shape (16, 32). ``answer``:
    the PrimFunc, or a function without arguments that returns it."""

    def body():
        func = _func_from(answer)
        names = [p.name for p in func.params]
        _require(
            len(func.params) == 3,
            f"the function has {len(func.params)} parameters "
            f"({', '.join(names)}); it needs 3: A, B and the output D, in that order",
        )
        a, b, d = func.params
        _require(
            tuple(a.shape) == (32, 16) and tuple(b.shape) == (16, 32),
            f"A has shape {tuple(a.shape)} and B {tuple(b.shape)}; the exercise asks for A "
            f"(32, 16) and B (16, 32)",
        )
        _require(
            tuple(d.shape) == (32, 16),
            f"the output has shape {tuple(d.shape)}; D[i, j] = A[i, j] + B[j, i] has A's shape (32, 16)",
        )
        x, y = _rng().random((32, 16), "float32"), _rng(1).random((16, 32), "float32")
        got = _run(func, [x, y], (32, 16))
        if np.allclose(got, x - y.T, atol=1e-5):
            raise _Wrong("it computes A - B.T: the exercise adds")
        if np.allclose(got, x * y.T, atol=1e-5):
            raise _Wrong("it computes A * B.T: the exercise adds")
        _same_as_numpy(got, x + y.T)
        return "D = A + B.T, and the loop nest has one block per compute stage."

    return _check(1, body)


def check_exercise_2(answer) -> Feedback:
    """M[i] = max_j A[i, j] for A of shape (32, 16): a reduction with wb.max. ``answer``: the
    PrimFunc, or a function without arguments that returns it."""

    def body():
        func = _func_from(answer)
        _require(
            len(func.params) == 2,
            f"the function has {len(func.params)} parameters; it needs 2: A and the output M",
        )
        out = func.params[-1]
        _require(
            tuple(out.shape) == (32,),
            f"the output has shape {tuple(out.shape)}; the "
            f"maximum of each row of a (32, 16) matrix has shape (32,)",
        )
        blocks = _blocks(func)
        reductions = [n for n, r in blocks.items() if any(iv.iter_type == "R" for iv in r.block.iter_vars)]
        _require(
            reductions,
            "no block has a reduction axis: each M[i] is computed from one element of row i. "
            "A maximum has to visit every column of the row: declare an axis that is reduced "
            "over (section 2 declares one for the matmul's sum) and combine with a maximum "
            "instead of a sum",
        )
        rows = [
            int(iv.dom.extent.value)
            for r in blocks.values()
            for iv in r.block.iter_vars
            if iv.iter_type == "R"
        ]
        _require(
            16 in rows,
            f"the reduction axis has {rows[0]} iterations; a row of A has 16 columns",
        )
        x = _rng().standard_normal((32, 16)).astype("float32")
        got = _run(func, [x], (32,))
        if np.allclose(got, x.sum(axis=1), atol=1e-4):
            raise _Wrong("it computes the row sums: use wb.max instead of wb.sum")
        if np.allclose(got, x.min(axis=1), atol=1e-4):
            raise _Wrong("it computes the row minimum: use wb.max instead of wb.min")
        _same_as_numpy(got, x.max(axis=1))
        return (
            f"M = A.max(axis=1); block {reductions[0]!r} has the reduction axis "
            f"(its T.init() starts each row at -inf)."
        )

    return _check(2, body)


# -- lesson 2: loop transformations -------------------------------------------------------------


def _refused_reduction_loop(err: wb.ScheduleError, element: str = "C[i, j]") -> str | None:
    """parallel / vectorize refused on a loop that runs a reduction: the concept, not the fix."""
    m = re.search(r"loop '(\w+)' feeds reduce iterator", str(err))
    if err.primitive not in ("parallel", "vectorize") or m is None:
        return None
    together = "threads" if err.primitive == "parallel" else "SIMD lanes"
    out = element.split("[")[0]
    return (
        f"{err.primitive} refused: loop {m.group(1)} runs the reduction over k. Its iterations all "
        f"add into the same {element}, so {together} running them at once would race on it; "
        f"{err.primitive} a loop whose iterations write different elements of {out}"
    )


def _feeds_reduction(func: wb.PrimFunc, block: str, loop) -> bool:
    realize = index(func).realizes[block]
    return any(
        iv.iter_type == REDUCE and _uses(v, loop.loop_var)
        for iv, v in zip(realize.block.iter_vars, realize.iter_values)
    )


def _registers(n: int) -> str:
    return "one register" if n == 1 else f"{n} registers"


def check_exercise_3(answer) -> Feedback:
    """vecmat(512, 1024): the outermost loop parallel (more than one iteration, not under the
    reduction loop), the innermost loop vectorized over j, a whole number of registers wide
    (``Target("llvm").vector_lanes("float32")`` lanes or a multiple, at most 64).
    ``answer``: the Schedule, or a function that schedules a fresh ``wb.Schedule(vecmat())``
    (then a refused primitive gets a hint)."""

    def body():
        sch = _applied(answer, 3, vecmat, lambda err: _refused_reduction_loop(err, "y[j]"))
        func = sch.func
        _require("y" in _blocks(func), "there is no block 'y': schedule vecmat(512, 1024)")
        shape = tuple(func.params[-1].shape)
        _require(shape == (1024,), f"the output has shape {shape}: start from vecmat(512, 1024)")
        loops = _loops(func, "y")
        inner, outer = loops[-1], loops[0]
        vectorized = [lp for lp in loops if lp.kind == ForKind.VECTORIZED]
        _require(
            inner.kind == ForKind.VECTORIZED or not vectorized,
            f"loop {vectorized[0].loop_var.name if vectorized else ''} is vectorized, but "
            f"{inner.loop_var.name} runs inside it: only the innermost loop becomes SIMD "
            f"instructions, each vector must be one step of the innermost loop",
        )
        if inner.kind != ForKind.VECTORIZED and _feeds_reduction(func, "y", inner):
            raise _Wrong(
                f"the innermost loop {inner.loop_var.name} is {inner.kind.value}: nothing runs as "
                f"SIMD instructions yet. It runs the reduction over k, whose steps all add into "
                f"the same y[j]: they cannot be the lanes of one vector. Which loop's iterations "
                f"write consecutive floats?"
            )
        _require(
            inner.kind == ForKind.VECTORIZED,
            f"the innermost loop {inner.loop_var.name} is {inner.kind.value}: nothing runs as SIMD "
            f"instructions yet",
        )
        lanes, width = wb.Target("llvm").vector_lanes("float32"), int(inner.extent.value)
        _require(
            width <= 64,
            f"the vectorized loop has {width} iterations: that is {width // lanes} registers per "
            f"step, more than the CPU has to spare; make the vector part of the loop register-sized",
        )
        _require(
            width % lanes == 0,
            f"the vectorized loop has {width} lanes, but a SIMD register of this CPU holds {lanes} "
            f"floats (target.vector_lanes('float32')): "
            + (
                f"each vector instruction would run with {lanes - width} of its lanes idle"
                if width < lanes
                else f"{width} is not a whole number of registers, the last one runs part empty"
            ),
        )
        _require(
            not _feeds_reduction(func, "y", outer),
            f"the outermost loop {outer.loop_var.name} runs the reduction over k, and the threads "
            f"work inside it: they are started and joined again for each of its "
            f"{int(outer.extent.value)} iterations. The parallel loop should be outermost",
        )
        _require(
            outer.kind == ForKind.PARALLEL,
            f"the outermost loop {outer.loop_var.name} is {outer.kind.value}: all the work runs on one core",
        )
        _require(
            int(outer.extent.value) > 1,
            f"the parallel loop {outer.loop_var.name} has 1 iteration: one thread gets all the "
            f"work. Parallelize a loop with at least as many iterations as you have cores",
        )
        rng = _rng()
        x, w = rng.random(512, "float32"), _rng(1).random((512, 1024), "float32")
        _same_as_numpy(_run(sch, [x, w], (1024,)), x @ w)
        return (
            f"parallel {outer.loop_var.name} ({outer.extent.value} iterations), vectorized "
            f"{inner.loop_var.name} ({width} lanes over j, {_registers(width // lanes)}), the "
            f"reduction between them; y = x @ W."
        )

    return _check(3, body)


TARGET_3B = """\
@T.prim_func
def matmul(
    A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")
):
    for i_0_j_0_fused in T.parallel(64):
        for k, i_1 in T.grid(64, 8):
            for j_1 in T.vectorized(8):
                with T.block("C"):
                    vi = T.axis.spatial(64, i_0_j_0_fused // 8 * 8 + i_1)
                    vj = T.axis.spatial(64, i_0_j_0_fused % 8 * 8 + j_1)
                    vk = T.axis.reduce(64, k)
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def _axes_fed(func: wb.PrimFunc, block: str, loop) -> str:
    """The block iterators a loop feeds, in the student's words ("i", "j and k", "nothing")."""
    realize = index(func).realizes[block]
    fed = [
        iv.var.name.removeprefix("v")
        for iv, v in zip(realize.block.iter_vars, realize.iter_values)
        if _uses(v, loop.loop_var)
    ]
    return " and ".join(fed) or "no axis"


def _describe_loop(func: wb.PrimFunc, block: str, loop) -> str:
    kind = loop.kind.value if loop.kind != ForKind.THREAD_BINDING else f"bound to {loop.thread_tag}"
    return f"a {kind} loop of {int(loop.extent.value)} iterations over {_axes_fed(func, block, loop)}"


def loop_nest_diff(got: wb.PrimFunc, want: wb.PrimFunc) -> str:
    """Where ``got``'s loop nest first departs from ``want``'s, in words: which block, which loop
    (counted from the outside), what each has there; then the block's bindings; "" when equal."""
    if wb.structural_equal(got, want):
        return ""
    have, need = _blocks(got), _blocks(want)
    for name in need:
        if name not in have:
            return f"the target has a block {name!r}, yours has {sorted(have) or 'none'}"
    for name in have:
        if name not in need:
            return f"your function has a block {name!r} that the target does not have"
    for name in need:
        mine, theirs = _loops(got, name), _loops(want, name)
        for depth, (a, b) in enumerate(zip(mine, theirs), 1):
            da, db = _describe_loop(got, name, a), _describe_loop(want, name, b)
            if da != db:
                return (
                    f"above block {name!r}, loop {depth} (counting from the outside) is {da} "
                    f"({a.loop_var.name}) in yours, {db} in the target"
                )
        if len(mine) != len(theirs):
            more, fewer = ("yours", "the target") if len(mine) > len(theirs) else ("the target", "yours")
            return (
                f"block {name!r} has {max(len(mine), len(theirs))} loops above it in {more}, "
                f"{min(len(mine), len(theirs))} in {fewer}; the first "
                f"{min(len(mine), len(theirs))} agree"
            )
    for name in need:
        a, b = index(got).realizes[name], index(want).realizes[name]
        for iv, va, vb in zip(a.block.iter_vars, a.iter_values, b.iter_values):
            if not wb.structural_equal(va, vb):
                return (
                    f"the loops match, but block {name!r} computes {iv.var.name} from them "
                    f"differently: {va} in yours, {vb} in the target (the order of the loops "
                    f"you fused, or of a split's factors, decides it)"
                )
    mismatch = structural_match(got, want).mismatch
    return f"the loop nests match; the first other difference: {mismatch}"


def check_exercise_3b(answer) -> Feedback:
    """matmul(64, 64, 64) scheduled into exactly ``TARGET_3B`` (the MLC course's exercise form:
    reach a given TVMScript). ``answer``: the Schedule, or a function that schedules a fresh
    ``wb.Schedule(matmul(64, 64, 64))``."""

    def body():
        sch = _applied(answer, "3b", lambda: matmul(64, 64, 64), _refused_reduction_loop)
        target = wb.parse(TARGET_3B)
        diff = loop_nest_diff(sch.func, target)
        _require(not diff, f"not the target yet: {diff}")
        x, y = _rng().random((64, 64), "float32"), _rng(1).random((64, 64), "float32")
        _same_as_numpy(_run(sch, [x, y], (64, 64)), x @ y)
        return "structurally equal to the target: the same loops, kinds and bindings."

    return _check("3b", body)


# -- lesson 3: blocks, compute_at, inlining -----------------------------------------------------


def _dense_inputs():
    return (
        _rng().standard_normal((64, 64)).astype("float32"),
        _rng(1).standard_normal((64, 64)).astype("float32"),
        _rng(2).standard_normal(64).astype("float32"),
    )


def _dense_expected(x, y, bias):
    return np.maximum(x @ y + bias, 0)


def _applied(answer, n: int, make=None, refused=None) -> wb.Schedule:
    """A Schedule: given, or ``answer(sch)`` applied to a fresh schedule of ``make()`` (lesson 3's
    ``dense_relu()`` by default), so that a refused primitive becomes feedback with a hint
    (``refused(err)``, else ``_refused``)."""
    if isinstance(answer, wb.Schedule) or not callable(answer):
        return _schedule(answer, n)
    sch = wb.Schedule((make or dense_relu)())
    try:
        answer(sch)
    except wb.ScheduleError as err:
        raise _Wrong((refused and refused(err)) or _refused(err)) from None
    except Exception as exc:
        raise _Wrong(f"your function raised {type(exc).__name__}: {exc}") from None
    return sch


def _refused(err: wb.ScheduleError) -> str:
    """A refused primitive of lesson 3, with what the student probably meant."""
    msg = f"{err.primitive} refused: {err.short}"
    if err.primitive == "compute_at" and "output block" in str(err):
        return (
            f"{msg}. compute_at moves a *producer* under the loops of the block that reads it; "
            f"the epilogue is the matmul's *consumer*, so it needs the primitive that moves a "
            f"consumer under its producer's loops (section 3)"
        )
    if err.primitive == "compute_inline" and "output" in str(err):
        return (
            f"{msg}. compute_inline folds a block into the blocks that read it, and nobody reads the "
            f"output: go the other way, fold the consumer into its producer (section 2)"
        )
    if err.primitive in ("compute_inline", "reverse_compute_inline") and "matmul" in str(err):
        return f"{msg}. The matmul is a reduction: it stays a block; inline the elementwise stages"
    return msg


def check_exercise_4(answer) -> Feedback:
    """dense_relu(): two blocks left, the matmul and ``bias_add``, the ReLU folded into it.
    ``answer``: the Schedule, or a function that schedules a fresh ``wb.Schedule(dense_relu())``."""

    def body():
        sch = _applied(answer, 4)
        blocks = sorted(_blocks(sch.func))
        _require(
            "matmul" in blocks,
            "the block 'matmul' is gone: a reduction cannot be inlined; inline the elementwise blocks",
        )
        _require(
            len(blocks) < 3,
            f"there are {len(blocks)} blocks ({', '.join(blocks)}): the ReLU is still a stage of its "
            f"own. It writes the output, so it cannot be folded into a consumer (it has none); which "
            f"primitive folds a consumer into its producer?",
        )
        _require(
            "bias_add" in blocks,
            f"blocks {blocks}: that is section 2's demo (bias_add folded into relu). This time keep "
            f"'bias_add' and make the ReLU part of it: the other direction",
        )
        x, y, bias = _dense_inputs()
        _same_as_numpy(_run(sch, [x, y, bias], (64, 64)), _dense_expected(x, y, bias))
        return (
            "blocks ['bias_add', 'matmul']: the ReLU is computed inside 'bias_add', whose buffer is now "
            "the output; the intermediate 'relu' stage is gone."
        )

    return _check(4, body)


def _feeds(func: wb.PrimFunc, block: str, loop, axis: int) -> bool:
    return _uses(index(func).realizes[block].iter_values[axis], loop.loop_var)


def check_exercise_5(answer) -> Feedback:
    """dense_relu() tiled in 8 x 16 tiles of (i, j): the epilogue finishes each tile right after
    its reduction, i.e. under the tile loops of both i and j and outside the reduction loop.
    ``answer``: the Schedule, or a function that schedules a fresh ``wb.Schedule(dense_relu())``."""

    def body():
        sch = _applied(answer, 5)
        func = sch.func
        blocks = _blocks(func)
        epilogue = [n for n in blocks if n != "matmul"]
        _require(
            "matmul" in blocks and epilogue,
            f"blocks {sorted(blocks)}: keep the matmul and at least one epilogue block",
        )
        mm_loops = _loops(func, "matmul")
        for name in epilogue:
            shared = [lp for lp in _loops(func, name) if lp in mm_loops]
            _require(
                shared,
                f"block {name!r} is still in its own loop nest after the whole matmul: move it "
                f"into the matmul's loop nest, under the loop after which a tile is finished",
            )
            under_k = [lp for lp in shared if _feeds(func, "matmul", lp, 2)]
            if under_k:
                raise _Wrong(
                    f"block {name!r} sits under loop {under_k[0].loop_var.name}, which runs the matmul's "
                    f"reduction over k: it runs {int(under_k[0].extent.value)} times per tile, on "
                    f"partial sums (only the last pass sees the finished sum, so the numbers come out "
                    f"right, but every earlier pass is wasted work). Move it to a loop outside the "
                    f"reduction, so it runs once per finished tile"
                )
            over_i = any(_feeds(func, "matmul", lp, 0) for lp in shared)
            over_j = any(_feeds(func, "matmul", lp, 1) for lp in shared)
            _require(
                over_i and over_j,
                f"block {name!r} runs once per {'row strip' if over_i else 'column strip'} "
                f"(under loop(s) {[lp.loop_var.name for lp in shared]}), after several tiles: the "
                f"exercise finishes each 8 x 16 tile, so it belongs under the tile loops of both i "
                f"and j",
            )
        x, y, bias = _dense_inputs()
        _same_as_numpy(_run(sch, [x, y, bias], (64, 64)), _dense_expected(x, y, bias))
        return (
            "each 8 x 16 tile gets its bias and ReLU once, right after its last k, while it is still "
            "in the cache."
        )

    return _check(5, body)


# -- lesson 4: reductions and rfactor -----------------------------------------------------------


def check_exercise_6(sch) -> Feedback:
    """vector_sum(4096): rfactor into a few partial sums, computed in parallel, each a serial
    sum of its part (so the write-back adds only a few numbers)."""

    def body():
        _schedule(sch, 6)
        blocks = _blocks(sch.func)
        rf = [n for n in blocks if n.endswith("_rf")]
        _require(
            rf,
            f"blocks {sorted(blocks)}: no rfactor block. A single sum is one chain of additions, "
            f"each waiting for the last: nothing can run in parallel until the sum is cut into "
            f"independent partial sums (section 3)",
        )
        loops = _loops(sch.func, rf[0])
        rf_block = index(sch.func).realizes[rf[0]]
        reducing = [
            lp
            for lp in loops
            if any(
                iv.iter_type == "R" and _uses(v, lp.loop_var)
                for iv, v in zip(rf_block.block.iter_vars, rf_block.iter_values)
            )
        ]
        par = [lp for lp in loops if lp.kind == ForKind.PARALLEL]
        _require(
            par,
            f"the partial sums of block {rf[0]!r} run serially (loops "
            f"{[lp.loop_var.name for lp in loops]}): no loop of it is parallel",
        )
        _require(
            par[0].extent.value > 1,
            f"the parallel loop {par[0].loop_var.name} has one iteration, so one thread does all "
            f"the work. Which loop of {rf[0]!r} counts the partial sums?",
        )
        outer_r = [lp for lp in reducing if loops.index(lp) < loops.index(par[0])]
        _require(
            not outer_r,
            f"the parallel loop {par[0].loop_var.name} sits inside the serial reduction loop "
            f"{outer_r[0].loop_var.name if outer_r else ''}: the threads are started and joined "
            f"again on every one of its {int(outer_r[0].extent.value) if outer_r else 0} "
            f"iterations, each doing one addition. The parallel loop belongs outside the "
            f"additions it shares out",
        )
        write_back = [
            int(iv.dom.extent.value)
            for n, r in blocks.items()
            if n not in rf
            for iv in r.block.iter_vars
            if iv.iter_type == "R"
        ]
        many = max(write_back, default=0)
        _require(
            many <= 64,
            f"the write-back block adds {many} partial sums one after another: as many serial "
            f"additions as the original sum, so nothing was gained. Cut k into a few large parts "
            f"(about one per core), not into many small ones",
        )
        x = _rng().random(4096, "float32")
        _same_as_numpy(_run(sch, [x], (1,)), np.array([x.sum(dtype=np.float64)], "float32"))
        return (
            f"block {rf[0]!r} computes {par[0].extent.value} partial sums in parallel, "
            f"the write-back block adds them up."
        )

    return _check(6, body)


# -- lesson 5: caching and layout ---------------------------------------------------------------


def check_exercise_7(sch) -> Feedback:
    """matmul(128, 128, 128): B copied into a cache under C's tile loop over j, once per tile:
    not under a loop that the tile of B does not depend on (i), which would copy it again and
    again."""

    def body():
        _schedule(sch, 7)
        blocks = _blocks(sch.func)
        cached = [n for n in blocks if n != "C"]
        _require(
            cached,
            "there is only block 'C': no cache stage was added (section 1 adds one with cache_read)",
        )
        writes_c = [n for n in cached if any(w.buffer.name == "C" for w in blocks[n].block.writes)]
        sources = {n: [r.buffer.name for r in blocks[n].block.reads] for n in cached}
        if not any("B" in reads for reads in sources.values()):
            if writes_c:
                raise _Wrong(
                    f"{writes_c[0]!r} is a write cache: C is computed in it and copied out. The "
                    f"exercise copies an input, B, before C reads it"
                )
            raise _Wrong(
                f"the cache copies {sorted({b for r in sources.values() for b in r})}, not B. "
                f"The read index counts the buffers in block C's T.reads(...), in the order "
                f"printed there (a reduction block's reads do not list its own output)"
            )
        name = next(n for n, reads in sources.items() if "B" in reads)
        c_loops = _loops(sch.func, "C")
        shared = [lp for lp in _loops(sch.func, name) if lp in c_loops]
        _require(
            shared,
            f"the copy {name!r} still copies all of B before the multiply starts: move it under "
            f"one of C's loops so that it copies only what that loop's iteration reads",
        )
        c_block = index(sch.func).realizes["C"]
        redundant = [lp for lp in shared if _uses(c_block.iter_values[0], lp.loop_var)]
        if redundant:
            lp = redundant[0]
            raise _Wrong(
                f"the copy {name!r} sits under loop {lp.loop_var.name}, which runs over the rows i "
                f"of C, but B[k, j] does not depend on i: the same tile of B is copied again on "
                f"each of its {int(lp.extent.value)} iterations. Place it under a loop whose "
                f"iterations need a different part of B"
            )
        x, y = _rng().random((128, 128), "float32"), _rng(1).random((128, 128), "float32")
        _same_as_numpy(_run(sch, [x, y], (128, 128)), x @ y)
        return (
            f"{name!r} copies each tile of B once, in the iteration of {shared[-1].loop_var.name} "
            f"that needs it."
        )

    return _check(7, body)


# -- lesson 6: probabilistic schedules and traces -----------------------------------------------


def check_exercise_8(sch, trace) -> Feedback:
    """``sch``: ``trace`` replayed with loop j's tiling changed to [8, 2, 1, 4]."""

    def body():
        _schedule(sch, 8)
        new = sch.trace
        before = [i.decision for i in trace if i.kind.is_sampling]
        after = [i.decision for i in new if i.kind.is_sampling]
        _require(
            len(before) == len(after),
            f"the new trace has {len(after)} sampling "
            f"instructions, the given one {len(before)}: a replay keeps the trace's sampling "
            f"instructions; change a decision of the given trace instead of writing the splits anew",
        )
        changed = [(a, b) for a, b in zip(before, after) if a != b]
        _require(
            changed,
            "no decision changed: the schedule replays the given trace as it was recorded. A trace "
            "is never modified in place: which trace did you apply?",
        )
        _require(
            len(changed) == 1,
            f"{len(changed)} decisions changed ({changed}); change only the tiling of loop j",
        )
        _require(
            before[0] == after[0],
            "you changed the tiling of loop i: that sample_perfect_tile's result is what the "
            "split of i uses. Which sampling instruction's result does the split of j use?",
        )
        _require(
            [8, 2, 1, 4] in [list(b) if isinstance(b, (list, tuple)) else b for _, b in changed],
            f"the tiling of j is now {changed[0][1]}: the levels are listed outermost first, and "
            f"the exercise asks for [8, 2, 1, 4]",
        )
        x, y = _rng().random((64, 64), "float32"), _rng(1).random((64, 64), "float32")
        _same_as_numpy(_run(sch, [x, y], (64, 64)), x @ y)
        return "one decision changed, every other step replayed as recorded."

    return _check(8, body)


def _ordinal(n: int) -> str:
    return _ORDINAL[n] if n < len(_ORDINAL) else f"{n + 1}th"


def check_exercise_9(decisions, replayed, record) -> Feedback:
    """``decisions``: the decisions of ``record.trace``'s sampling instructions, in order;
    ``replayed``: a fresh Schedule on which ``record.trace`` was applied."""

    def body():
        sampling = [inst for inst in record.trace if inst.kind.is_sampling]
        _require(
            isinstance(decisions, (list, tuple)),
            f"`decisions` should be a list, not a {type(decisions).__name__}",
        )
        _require(
            len(decisions) == len(sampling),
            f"you listed {len(decisions)} decisions; the trace has {len(sampling)} sampling "
            f"instructions ({', '.join(i.kind.name for i in sampling)}), one decision each",
        )
        for n, (inst, got) in enumerate(zip(sampling, decisions)):
            want = inst.decision
            _require(
                list(got) == list(want) if isinstance(want, (list, tuple)) else got == want,
                f"decision {n} (of the {_ordinal(n)} sampling instruction, a {inst.kind.name}) is "
                f"not {got!r} in the trace: read that instruction's decision in the printed trace "
                f"(`decision=` for a tiling, the index of the chosen candidate for a categorical)",
            )
        _schedule(replayed, 9)
        _require(
            wb.structural_equal(replayed.func, record.schedule().func),
            "the replayed function differs from the record's: a replay applies the record's own "
            "trace, every decision as recorded, to a schedule of the unscheduled function",
        )
        _require(
            len(replayed.trace) == len(record.trace),
            f"the replayed schedule's trace has {len(replayed.trace)} instructions, the "
            f"record's {len(record.trace)}: start from a fresh wb.Schedule(func)",
        )
        return (
            f"{len(sampling)} decisions read; the replay gives the same function, "
            f"instruction for instruction: traces are deterministic."
        )

    return _check(9, body)


# -- lesson 7: design spaces and transformation modules ----------------------------------------


def _is_pow2(v) -> bool:
    return isinstance(v, int) and v > 0 and v & (v - 1) == 0


def check_exercise_10(rule) -> Feedback:
    """A ScheduleRule tiling matmul's spatial loops by a sampled power of two."""

    def body():
        _require(
            isinstance(rule, wb.space.ScheduleRule),
            f"pass an instance of your ScheduleRule subclass, not a {type(rule).__name__}",
        )
        func = matmul(64, 64, 64)
        space = PostOrderApply(rules=[rule], postprocs=[])
        sketches = _call(
            f"generating the space with {type(rule).__name__}",
            wb.generate_design_space,
            func,
            "llvm",
            0,
            space,
        )
        _require(sketches, "the space is empty")
        sch = sketches[0]
        splits = [i for i in sch.trace if i.kind.name == "split"]
        _require(splits, "the rule did not split any loop of block 'C'")
        samples = [i for i in sch.trace if i.kind.is_sampling]
        _require(
            samples,
            "the tile factors are constants: the search could never change "
            "them; draw each with sch.sample_categorical(candidates=[2, 4, ...], probs=...)",
        )
        for inst in samples:
            cands = inst.args.get("candidates", [])
            _require(all(_is_pow2(c) for c in cands), f"the candidates {cands} are not all powers of two")
            _require(
                max(cands, default=0) <= 64,
                f"the candidates {cands} include factors above 64, the extent of every loop of "
                f"matmul(64, 64, 64): a factor larger than its loop leaves an outer loop of one "
                f"iteration and an inner loop with a guard (T.where), never a tiling",
            )
        c_block = index(sch.func).realizes["C"]
        k = c_block.iter_values[2]
        split_k = [lp.loop_var.name for lp in _loops(sch.func, "C") if _uses(k, lp.loop_var)]
        _require(
            len(split_k) == 1,
            f"the reduction loop k was split too (into {split_k}): this rule tiles the spatial "
            f"loops only; leave the reduction loops as they are",
        )
        x, y = _rng().random((64, 64), "float32"), _rng(1).random((64, 64), "float32")
        _same_as_numpy(_run(sch, [x, y], (64, 64)), x @ y)
        draws = {
            str([i.decision for i in s.trace if i.kind.is_sampling])
            for s in (wb.generate_design_space(func, "llvm", seed, space)[0] for seed in range(6))
        }
        _require(
            len(draws) > 1,
            "six seeds all drew the same factors: sample with probabilities that allow every candidate",
        )
        return (
            f"{len(splits)} split(s) by sampled powers of two; {len(draws)} different programs from 6 seeds."
        )

    return _check(10, body)


def check_exercise_11(mutator) -> Feedback:
    """A Mutator moving a factor of 2 between two levels of a sampled tiling."""

    def body():
        _require(
            isinstance(mutator, wb.space.Mutator),
            f"pass an instance of your Mutator subclass, not a {type(mutator).__name__}",
        )
        func = matmul(64, 64, 64)
        space = PostOrderApply()
        sketch = wb.generate_design_space(func, "llvm", 0, space)[0]
        trace = sketch.trace
        results = [
            _call(f"{type(mutator).__name__}.apply", mutator.apply, trace, random.Random(seed))
            for seed in range(8)
        ]
        _require(
            any(r is not None for r in results),
            "apply returned None 8 times out of 8: it never found an instruction. Kind "
            "names are workbench's ('sample_perfect_tile'); compare with "
            "inst.kind.matches('SamplePerfectTile') rather than inst.kind.name == ...",
        )
        for new in (r for r in results if r is not None):
            _require(
                isinstance(new, wb.Trace),
                f"apply returned a {type(new).__name__}; "
                f"return trace.with_decision(inst, factors, remove_postproc=True)",
            )
            pairs = [(o, n) for o, n in zip(trace, new) if o.kind.is_sampling]
            changed = [(o, n) for o, n in pairs if o.decision != n.decision]
            _require(
                changed,
                "the returned trace has every decision of the given one: nothing was mutated. "
                "trace.decisions and inst.decision are read-only copies; a trace with a changed "
                "decision is a new trace (section 3)",
            )
            _require(len(changed) == 1, f"{len(changed)} decisions changed; a mutation changes one")
            old, cur = changed[0]
            _require(
                old.kind.name == "sample_perfect_tile",
                f"it changed a {old.kind.name}; this mutator changes tilings",
            )
            _require(
                math.prod(cur.decision) == math.prod(old.decision),
                f"{old.decision} became {cur.decision}: the product changed from "
                f"{math.prod(old.decision)} to {math.prod(cur.decision)}, it must stay the "
                f"loop's extent (halve one level, double another)",
            )
            cand, why = replay(func, new, space.postprocs)
            _require(why is None, f"the mutant {cur.decision} does not replay: {why}")
        x, y = _rng().random((64, 64), "float32"), _rng(1).random((64, 64), "float32")
        _same_as_numpy(_run(cand, [x, y], (64, 64)), x @ y)
        return "each mutant changes one tiling, keeps its product and replays into a valid program."

    return _check(11, body)


# -- lesson 8: cost models and evolutionary search ----------------------------------------------


def _trials_to_reach(latencies, fraction=0.9):
    finite = [x for x in latencies if x is not None and math.isfinite(x)]
    if not finite:
        return None
    target = min(finite) / fraction
    best = math.inf
    for n, x in enumerate(latencies, 1):
        if x is not None and math.isfinite(x):
            best = min(best, x)
        if best <= target:
            return n
    return None


_TRIALS_CASES = [
    ([5.0, 4.0, 1.0], 0.9),
    ([1.0, 2.0, 3.0], 0.9),
    ([4.0, 1.05, 3.0, 1.0], 0.9),
    ([4.0, 1.2, 3.0, 1.0], 0.9),
    ([3.0, math.inf, 2.0, 1.0], 0.5),
    ([math.inf, 2.0, 1.9], 0.9),
    ([math.inf, math.inf], 0.9),
]


def check_exercise_12(trials_to_reach) -> Feedback:
    """``trials_to_reach(latencies, fraction)``: the first trial (1-based) whose best latency so
    far is within ``fraction`` of the final best (best_so_far <= best / fraction); failed trials
    are ``inf``; None when every trial failed."""

    def body():
        _require(callable(trials_to_reach), "pass your function itself")
        for lat, frac in _TRIALS_CASES:
            want = _trials_to_reach(lat, frac)
            got = _call(f"trials_to_reach({lat}, {frac})", trials_to_reach, list(lat), frac)
            _require(
                got == want,
                f"trials_to_reach({lat}, fraction={frac}) returned {got!r}; "
                f"expected {want!r}" + _trials_hint(lat, frac, got),
            )
        return f"all {len(_TRIALS_CASES)} cases agree, failed trials (inf) included."

    return _check(12, body)


def _trials_hint(lat, frac, got) -> str:
    if got is not None and isinstance(got, int) and got == _trials_to_reach(lat, frac) - 1:
        return " (trials count from 1)"
    if all(not math.isfinite(x) for x in lat):
        return " (every trial failed: there is no best to reach)"
    return f" (the best is {min(lat)}; the first best-so-far <= {min(lat) / frac:.4g} counts)"


# -- lesson 9: GPUs ---------------------------------------------------------------------------


def check_exercise_13(sch) -> Feedback:
    """matmul(64, 64, 64) bound to a GPU grid: blockIdx.x outside threadIdx.x, k not bound;
    run by the CUDA emulator (which also reports data races)."""

    def body():
        _schedule(sch, 13)
        loops = _loops(sch.func, "C")
        bound = [(lp.thread_tag, lp) for lp in loops if lp.kind == ForKind.THREAD_BINDING]
        tags = [t for t, _ in bound]
        _require("blockIdx.x" in tags, f"no loop is bound to blockIdx.x (bound: {tags or 'none'})")
        _require("threadIdx.x" in tags, f"no loop is bound to threadIdx.x (bound: {tags})")
        _require(
            tags.index("blockIdx.x") < tags.index("threadIdx.x"),
            "threadIdx.x is bound outside blockIdx.x: the grid of blocks is the outer loop",
        )
        threads = next(lp for t, lp in bound if t == "threadIdx.x")
        n = int(threads.extent.value)
        _require(n <= 1024, f"{n} threads per block: a CUDA block has at most 1024")
        _require(
            n % 32 == 0,
            f"{n} threads per block is not a multiple of 32: a warp is 32 "
            f"threads, the last one would run partly empty",
        )
        block = index(sch.func).realizes["C"]
        k = block.iter_values[2]
        for tag, lp in bound:
            _require(
                not _uses(k, lp.loop_var),
                f"the reduction loop is bound to {tag}: that is "
                f"a cross-thread reduction (the threads add up one C[i, j] together); this "
                f"exercise wants one thread per C[i, j]: bind spatial loops only",
            )
        x, y = _rng().random((64, 64), "float32"), _rng(1).random((64, 64), "float32")
        _same_as_numpy(_run(sch, [x, y], (64, 64), target="cuda-emulate"), x @ y)
        blocks = next(lp for t, lp in bound if t == "blockIdx.x")
        return f"{blocks.extent.value} blocks of {n} threads, each thread one or more C[i, j]."

    return _check(13, body)


# -- lesson 10: the capstone --------------------------------------------------------------------

CONV = dict(h=16, w=16, ci=8, co=16, kernel=3, stride=1, padding=1)
NETWORK_A = {
    "conv": ("CBR", CONV),
    "dense": ("GMM", dict(n=64, m=64, k=64)),
    "softmax": ("SFM", dict(m=64, n=64)),
}
NETWORK_B = {
    "conv": ("CBR", CONV),
    "dense": ("GMM", dict(n=64, m=32, k=64)),
    "softmax": ("SFM", dict(m=64, n=64)),
}


def check_exercise_14(hits) -> Feedback:
    """The operators of NETWORK_B whose workload is already in NETWORK_A's database."""

    def body():
        _require(
            isinstance(hits, (set, list, tuple, frozenset)),
            f"answer with a set of operator names, not a {type(hits).__name__}",
        )
        want = {op for op, spec in NETWORK_B.items() if spec in NETWORK_A.values()}
        got = set(hits)
        unknown = got - set(NETWORK_B)
        _require(not unknown, f"{sorted(unknown)} are not operators of NETWORK_B ({sorted(NETWORK_B)})")
        extra, missing = sorted(got - want), sorted(want - got)
        for op in extra:
            raise _Wrong(
                f"{op!r} misses: NETWORK_B's {op} is {NETWORK_B[op]}, network A's is "
                f"{NETWORK_A[op]}; a record matches only the same workload and shape "
                f"(its structural hash)"
            )
        for op in missing:
            raise _Wrong(f"{op!r} hits too: the same workload and shape {NETWORK_B[op]} is in network A")
        return f"{sorted(want)} reuse A's records; the other operators have new shapes."

    return _check(14, body)


def _workload(task) -> str:
    """A task as a student reads it in the lesson's table: name, input and output shapes."""
    shapes = [tuple(int(getattr(d, "value", d)) for d in p.shape) for p in task.func.params]
    return f"{task.name} {shapes[0]} -> {shapes[-1]}"


def check_exercise_15(hits, resnet18, resnet34, database) -> Feedback:
    """The numbers (positions in ``resnet34.task_list()``) of ResNet-34's tasks that find a
    record in ``database``, the database a small budget tuned ResNet-18 into."""

    def body():
        tasks34, tasks18 = resnet34.task_list(), resnet18.task_list()
        numbered = "the # column of ResNet-34's table, 0 to " + str(len(tasks34) - 1)
        _require(
            isinstance(hits, (set, list, tuple, frozenset)),
            f"answer with a set of task numbers ({numbered}), not a {type(hits).__name__}",
        )
        names = sorted({h for h in hits if isinstance(h, str)})
        for name in names:
            where = [k for k, t in enumerate(tasks34) if t.name == name]
            raise _Wrong(
                f"answer with task numbers, not names: {name!r} is "
                + (f"the name of tasks {where}" if where else "the name of no ResNet-34 task")
                + " (tasks with one name differ by shape, and only the same shape hits)"
            )
        bad = sorted((h for h in hits if not isinstance(h, int) or not 0 <= h < len(tasks34)), key=repr)
        _require(not bad, f"{bad} are not task numbers ({numbered})")
        recorded = {t.key for t in tasks18 if database.best(t.func, "llvm") is not None}
        keys18 = {t.key: t for t in tasks18}
        want = {k for k, t in enumerate(tasks34) if t.key in recorded}
        got = set(hits)
        for k in sorted(got - want):
            t = tasks34[k]
            if t.key not in keys18:
                raise _Wrong(
                    f"task {k} ({_workload(t)}) misses: no ResNet-18 task has this workload "
                    f"(same name, other shapes: a record matches only the same computation on the "
                    f"same shapes, its structural hash)"
                )
            raise _Wrong(
                f"task {k} ({_workload(t)}) misses: ResNet-18 has the same workload, but its "
                f"tuning never measured it (the budget ran out first), so the database holds no "
                f"record for it; a hit needs a record, not only a shared workload"
            )
        for k in sorted(want - got):
            t = tasks34[k]
            t18 = keys18[t.key]
            runs = (
                f"; ResNet-34 runs it {t.weight} times and ResNet-18 {t18.weight}: one record serves "
                f"every occurrence"
                if t.weight != t18.weight
                else ""
            )
            raise _Wrong(
                f"task {k} ({_workload(t)}) hits too: ResNet-18's tuning left a record for the "
                f"same workload{runs}"
            )
        return (
            f"{len(want)} of ResNet-34's {len(tasks34)} tasks reuse ResNet-18's records; the others "
            f"are shared but never measured, or new shapes."
        )

    return _check(15, body)
