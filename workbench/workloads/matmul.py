"""Matrix multiplies: GMM (batched, TVM ``batch_matmul_nkkm``) and TBG (transpose + batch matmul,
TVM ``transpose_batch_matmul``: attention scores from ``[batch, seq, head, dim]`` tensors).

FLOPs: ``2 * batch * N * M * K`` (the transposes are data movement, counted as zero).
"""

from __future__ import annotations

import numpy as np

from ..ir import dsl
from ..ir.dsl import compute, create_func, placeholder, reduce_axis
from .registry import register


def _ref_gmm(x, y, /, **_):
    return np.matmul(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)


@register(
    "GMM",
    reference=_ref_gmm,
    small=dict(n=16, m=16, k=16),
    flops=lambda b, n, m, k: 2 * b * n * m * k,
    description="batched matrix multiply Z[b] = X[b] @ Y[b], X (B, N, K), Y (B, K, M) "
    "(TVM batch_matmul_nkkm)",
)
def batch_matmul_nkkm(b=1, n=128, m=128, k=128):
    X = placeholder((b, n, k), name="X")
    Y = placeholder((b, k, m), name="Y")
    rk = reduce_axis(k, name="k")
    Z = compute((b, n, m), lambda b, i, j: dsl.sum(X[b, i, rk] * Y[b, rk, j], axis=rk), name="Z")
    return create_func([X, Y, Z], name="batch_matmul_nkkm")


def _ref_tbg(query, value, /, **_):
    q = query.astype(np.float64).transpose(0, 2, 1, 3)  # [b, head, seq, dim]
    v = value.astype(np.float64).transpose(0, 2, 3, 1)  # [b, head, dim, seq]
    return np.matmul(q, v).astype(np.float32)


@register(
    "TBG",
    reference=_ref_tbg,
    small=dict(seq=8, head=2, dim=8),
    flops=lambda b, seq, head, dim: 2 * b * head * seq * seq * dim,
    description="transpose [b, seq, head, dim] query/value to [b, head, ...] then batch "
    "matmul over dim (TVM transpose_batch_matmul)",
)
def transpose_batch_matmul(b=1, seq=128, head=12, dim=64):
    # TVM names the second operand "value" although attention would call it the key
    query = placeholder((b, seq, head, dim), name="query")
    value = placeholder((b, seq, head, dim), name="value")
    query_T = compute((b, head, seq, dim), lambda b, h, l, d: query[b, l, h, d], name="query_T")
    value_T = compute((b, head, dim, seq), lambda b, h, d, l: value[b, l, h, d], name="value_T")
    k = reduce_axis(dim, name="k")
    C = compute(
        (b, head, seq, seq),
        lambda b, h, i, j: dsl.sum(query_T[b, h, i, k] * value_T[b, h, k, j], axis=k),
        name="C",
    )
    return create_func([query, value, C], name="transpose_batch_matmul")


def _ref_gmm_fp16(a, b, /, **_):
    return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)


@register(
    "GMM-FP16",
    reference=_ref_gmm_fp16,
    small=dict(n=32, m=32, k=32),
    flops=lambda n, m, k: 2 * n * m * k,
    description="matrix multiply C = A @ B with fp16 inputs A (N, K), B (K, M) and an fp32 "
    "output: the tensor-core (wmma) workload",
)
def matmul_fp16(n=128, m=128, k=128):
    A = placeholder((n, k), "float16", name="A")
    B = placeholder((k, m), "float16", name="B")
    rk = reduce_axis(k, name="k")
    C = compute(
        (n, m),
        lambda i, j: dsl.sum(dsl.cast("float32", A[i, rk]) * dsl.cast("float32", B[rk, j]), axis=rk),
        name="C",
    )
    return create_func([A, B, C], name="matmul_fp16")
