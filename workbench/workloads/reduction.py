"""Reductions: NRM (TVM ``norm_bmn``) and SFM (TVM ``softmax_mn``, i.e. ``topi.nn.softmax`` over
the last axis).

FLOPs: NRM ``2 * B * M * N`` (square and add; the B square roots are not counted, as in the TVM
anchor). SFM ``5 * M * N``: per element one comparison (max), one subtraction and one ``exp``
(exp counted as one FLOP), one addition (sum) and one division. The TVM anchor reports no
GFLOP/s for SFM, so this count is ours.
"""

from __future__ import annotations

import numpy as np

from ..ir import dsl
from ..ir.dsl import compute, create_func, placeholder, reduce_axis
from .registry import register


def _ref_norm(a, /, **_):
    a64 = a.astype(np.float64)
    return np.sqrt(np.sum(a64 * a64, axis=(1, 2))).astype(np.float32)


@register(
    "NRM",
    reference=_ref_norm,
    small=dict(b=2, m=8, n=16),
    flops=lambda b, m, n: 2 * b * m * n,
    description="Frobenius norm of each matrix of a batch, sqrt(sum(A[b]^2)) (TVM norm_bmn)",
)
def norm_bmn(b=1, m=256, n=256):
    A = placeholder((b, m, n), name="A")
    i, j = reduce_axis(m, name="i"), reduce_axis(n, name="j")
    C = compute((b,), lambda b: dsl.sum(A[b, i, j] * A[b, i, j], axis=[i, j]), name="C")
    D = compute((b,), lambda b: dsl.sqrt(C[b]), name="D")
    return create_func([A, D], name="norm_bmn")


def _ref_softmax(a, /, **_):
    a64 = a.astype(np.float64)
    e = np.exp(a64 - a64.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


@register(
    "SFM",
    reference=_ref_softmax,
    small=dict(m=8, n=16),
    flops=lambda m, n: 5 * m * n,
    description="softmax over the last axis of an (M, N) matrix in four stages: maxelem, "
    "exp, expsum, norm (TVM softmax_mn / topi.nn.softmax)",
)
def softmax_mn(m=256, n=256):
    A = placeholder((m, n), name="A")
    # topi builds these stages with ``lambda *indices``, hence the loop names i0, i1
    k1 = reduce_axis(n, name="k")
    maxelem = compute((m,), lambda i0: dsl.max(A[i0, k1], axis=k1), name="T_softmax_maxelem")
    exp = compute((m, n), lambda i0, i1: dsl.exp(A[i0, i1] - maxelem[i0]), name="T_softmax_exp")
    k2 = reduce_axis(n, name="k")
    expsum = compute((m,), lambda i0: dsl.sum(exp[i0, k2], axis=k2), name="T_softmax_expsum")
    norm = compute((m, n), lambda i0, i1: exp[i0, i1] / expsum[i0], name="T_softmax_norm")
    return create_func([A, norm], name="softmax_mn")
