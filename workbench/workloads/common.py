"""Pieces shared by the workload definitions: named compute lambdas and TVM's pad stage."""

from __future__ import annotations

import inspect
from typing import Callable, Sequence

from ..ir import dsl
from ..ir.dsl import Tensor


def named(axis_names: Sequence[str], fcompute: Callable) -> Callable:
    """Give a ``fcompute(*indices)`` the parameter names ``axis_names``.

    ``dsl.compute`` names loops and block iterators after the lambda's parameters; workloads
    whose rank depends on a shape parameter (1-D/2-D/3-D convolution) build their lambda with
    ``*indices`` and name the axes here, so the loops read ``n, h, w, co`` as in TVM.
    """
    kind = inspect.Parameter.POSITIONAL_ONLY
    fcompute.__signature__ = inspect.Signature([inspect.Parameter(n, kind) for n in axis_names])
    return fcompute


def out_size(size: int, kernel: int, stride: int, padding: int, dilation: int = 1) -> int:
    """Output extent of a strided, padded, dilated window (TVM's / PyTorch's formula)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def pad(
    data: Tensor, before: Sequence[int], after: Sequence[int] | None = None, name: str = "PadInput"
) -> Tensor:
    """Zero padding as its own stage, like ``topi.nn.pad``.

    ``PadInput[i0, i1, ...] = if_then_else(in bounds, data[i0 - b0, ...], 0)``; keeping it a
    separate block gives ``compute_inline`` and ``decompose_padding`` something to act on.
    A dimension padded by zero on both sides is copied unconditionally.
    """
    after = before if after is None else after
    shape = tuple(s + b + a for s, b, a in zip(data.shape, before, after))

    def body(*idx):
        src, conds = [], []
        for i, s, b, a in zip(idx, data.shape, before, after):
            src.append(i - b if b else i)
            if b:
                conds.append(i >= b)
            if a:
                conds.append(i < b + s)
        value = data[tuple(src)]
        return dsl.if_then_else(dsl.all_of(*conds), value, 0.0) if conds else value

    return dsl.compute(shape, named([f"i{d}" for d in range(len(shape))], body), name=name)
