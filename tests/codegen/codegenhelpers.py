"""Helpers shared by the codegen tests."""

import numpy as np

from workbench.ir.stmt import Allocate, For


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
