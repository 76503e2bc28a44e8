"""Helpers shared by the codegen tests."""

import numpy as np

import workbench as wb
from workbench.ir.stmt import Allocate, For
from workbench.testing import check_trace_roundtrip


def allocations(func) -> dict:
    """name -> (buffer, name of the enclosing loop or None) of every Allocate in ``func``."""
    out = {}

    def walk(s, loop):
        if isinstance(s, Allocate):
            out[s.buffer.name] = (s.buffer, loop)
        if isinstance(s, For):
            loop = s.loop_var.name
        for c in (getattr(s, f, None) for f in ("body", "then_case", "else_case")):
            if c is not None:
                walk(c, loop)
        for c in getattr(s, "seq", ()):
            walk(c, loop)

    walk(func.body, None)
    return out


def dep_reference(inputs, weight):
    """The DEP workload (3x3 depthwise, padding 1, 112x112 outputs, NHWC) in float64."""
    inputs, weight = inputs.astype("float64"), weight.astype("float64")
    padded = np.pad(inputs, ((0, 0), (1, 1), (1, 1), (0, 0)))
    return sum(padded[:, i : i + 112, j : j + 112, :] * weight[0, i, j] for i in range(3) for j in range(3))


def check_dep_record(sch, seed: int = 3) -> None:
    """A schedule of the DEP workload (e.g. a TVM record): its trace round-trips and its llvm
    build computes :func:`dep_reference` (every output written: they start as NaN)."""
    check_trace_roundtrip(sch)
    args = [wb.aligned(a) for a in wb.workloads.random_args("DEP", seed=seed)]
    args[-1].fill(np.nan)
    wb.build(sch, "llvm")(*args)
    np.testing.assert_allclose(args[-1], dep_reference(*args[:2]), rtol=1e-4, atol=1e-4)
