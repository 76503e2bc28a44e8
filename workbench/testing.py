"""Helpers for tests of schedules: numeric checks against the numpy references, trace
round-trips through JSON and Python (DESIGN decisions 4 and 5), and the printed text parsed back."""

from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np

from . import workloads
from .codegen import build
from .ir import dsl
from .ir.expr import Var
from .ir.func import PrimFunc
from .ir.index import index, replace
from .ir.parser import parse
from .ir.stmt import TRUE, BlockRealize, IterVar, make_for, seq
from .ir.structural import assert_structural_equal
from .schedule import Schedule, Trace
from .target import Target

#: the x86 CPUs tests build for: AVX2 + FMA (8 float lanes, ymm registers) and AVX-512 (16
#: lanes, zmm). Code for the ones this host can run (:func:`runs_here`) is run; the others are
#: only compiled, and their assembly inspected.
X86_TARGETS = ("llvm -mcpu=znver3", "llvm -mcpu=skylake-avx512")


def runs_here(target: Any) -> bool:
    """Whether code built for ``target`` can run on this machine (``Target.cannot_run``)."""
    return Target.of(target).cannot_run() is None


def check_numeric(
    sch_or_func: Any,
    name: str,
    seed: int = 0,
    target: str = "python",
    rtol: float = 1e-4,
    atol: float = 1e-4,
    **shape: Any,
) -> None:
    """Build the scheduled function, run it on ``workloads.random_args(name, seed, **shape)``
    and compare the output with the workload's numpy reference (AssertionError otherwise)."""
    func = getattr(sch_or_func, "func", sch_or_func)
    args = workloads.random_args(name, seed=seed, **shape)
    expected = workloads.reference(name, **shape)(*args[:-1])
    build(func, target=target)(*args)
    trace = getattr(sch_or_func, "trace", "")
    np.testing.assert_allclose(
        args[-1], expected, rtol=rtol, atol=atol, err_msg=f"{name} {shape} after:\n{trace}"
    )


def original_func(sch: Schedule) -> PrimFunc:
    """The function a schedule started from."""
    return sch.history[0][1]


def check_trace_roundtrip(sch: Schedule, func: Optional[PrimFunc] = None) -> None:
    """Replay ``sch.trace`` on a fresh schedule of ``func`` (default: the function ``sch``
    started from) through JSON text and through its Python rendering; both must give a
    function structurally equal to ``sch.func`` and render the same trace text."""
    func = original_func(sch) if func is None else func
    text = sch.trace.as_python()

    data = json.loads(json.dumps(sch.trace.as_json()))
    via_json = Schedule(func)
    Trace.from_json(data).apply_to_schedule(via_json)
    assert_structural_equal(via_json.func, sch.func)
    assert via_json.trace.as_python() == text, "JSON replay renders a different trace"
    assert via_json.trace.as_json() == data, "JSON replay serializes differently"

    via_python = Schedule(func)
    exec(compile(text, "<trace>", "exec"), {"sch": via_python})
    assert_structural_equal(via_python.func, sch.func)
    assert via_python.trace.as_python() == text, "Python replay renders a different trace"
    check_text_roundtrip(sch.func)


def check_text_roundtrip(func: Any) -> None:
    """The printed function parses back to a structurally equal one (the printer is the file
    format: ``wb.parse(str(f))`` is ``f``)."""
    func = getattr(func, "func", func)
    assert_structural_equal(parse(str(func)), func)


def small_schedule(name: str, seed: int = 0) -> Schedule:
    """A schedule of workload ``name`` at its small shape (``workloads.small(name)``)."""
    return Schedule(workloads.get(name, **workloads.small(name)), seed=seed)


def check_small(sch: Schedule, name: str) -> None:
    """Numeric check at the small shape plus the trace round-trip: what every test of a
    primitive asserts on a scheduled workload."""
    check_numeric(sch, name, **workloads.small(name))
    check_trace_roundtrip(sch)


# ------------------------------------------------------------------------------------------
# small functions with shapes the DSL does not produce (for must-fail tests of primitives)


def elementwise_func(shape: tuple[int, int] = (4, 8)) -> PrimFunc:
    """``B = A * 2`` then ``C = B + 1``, each stage in its own loop nest ``i, j``."""
    A = dsl.placeholder(shape, "float32", name="A")
    B = dsl.compute(shape, lambda i, j: A[i, j] * 2.0, name="B")
    C = dsl.compute(shape, lambda i, j: B[i, j] + 1.0, name="C")
    return dsl.create_func([A, C], name="elementwise")


def check_elementwise(func: PrimFunc, shape: tuple[int, int] = (4, 8)) -> None:
    """A variant of :func:`elementwise_func` still computes ``C = A * 2 + 1``."""
    a = np.random.default_rng(0).uniform(-1, 1, size=shape).astype("float32")
    out = np.zeros(shape, "float32")
    build(getattr(func, "func", func), target="python")(a, out)
    np.testing.assert_allclose(out, a * 2 + 1, rtol=1e-6)


def shared_loop_func() -> PrimFunc:
    """``for i: {for j: B; for j2: C}``: loop ``i`` holds two loops (not a single branch)."""
    func = elementwise_func()
    idx = index(func)
    i, j, j2 = Var("i"), Var("j"), Var("j2")
    body = make_for(
        i,
        4,
        seq(
            make_for(j, 8, BlockRealize((i, j), TRUE, idx.block("B"))),
            make_for(j2, 8, BlockRealize((i, j2), TRUE, idx.block("C"))),
        ),
    )
    return func.with_body(func.body.with_(block=func.root.with_(body=body)))


def opaque_func() -> PrimFunc:
    """:func:`elementwise_func` with block ``B``'s iterators made opaque."""
    func = elementwise_func()
    block = index(func).block("B")
    ivs = tuple(IterVar(iv.var, iv.dom, "O") for iv in block.iter_vars)
    return replace(func, block, block.with_(iter_vars=ivs))


def triangular_func() -> PrimFunc:
    """:func:`elementwise_func` with ``for j in range(i + 1)`` above block ``B``."""
    func = elementwise_func()
    idx = index(func)
    i, j = idx.loops_above(idx.block("B"))
    return replace(func, j, j.with_(extent=i.loop_var + 1))
