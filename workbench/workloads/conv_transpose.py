"""T2D: transposed 2-D convolution in NHWC, as TVM's ``te_workload.conv2d_transpose_nhwc``.

TVM's formulation, kept here: pad the input by ``ceil((K - 1 - padding) / stride)`` (stage
``PadInput``), then correlate the *virtually* stride-dilated padded input with the flipped
kernel; the dilation is an ``if_then_else`` inside the reduction (zeros between input rows),
not a stage of its own::

    out[n, h, w, co] = sum_{rh, rw, rc} dilated(n, h + rh + border, w + rw + border, rc)
                                       * weight[K - 1 - rh, K - 1 - rw, rc, co]

FLOPs count that loop nest, ``2 * N * OH * OW * CO * K * K * CI``, multiplications by the
inserted zeros included (what TVM's FLOP estimator counts for this definition).
"""

from __future__ import annotations

import numpy as np

from ..ir import dsl
from ..ir.dsl import compute, create_func, placeholder, reduce_axis
from .common import named, pad
from .registry import register


def _out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size - 1) * stride - 2 * padding + kernel


def _ref_conv2d_transpose(x, w, /, *, stride, padding, **_):
    """Scatter form: every input pixel adds ``x @ w[kh, kw]`` at ``stride * i + kh``; crop."""
    n, h, wd, _ci = x.shape
    k, co = w.shape[0], w.shape[3]
    full = np.zeros((n, (h - 1) * stride + k, (wd - 1) * stride + k, co))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    rows, cols = (h - 1) * stride + 1, (wd - 1) * stride + 1
    for kh, kw in np.ndindex(k, k):
        full[:, kh : kh + rows : stride, kw : kw + cols : stride] += x64 @ w64[kh, kw]
    oh, ow = _out(h, k, stride, padding), _out(wd, k, stride, padding)
    return full[:, padding : padding + oh, padding : padding + ow].astype(np.float32)


@register(
    "T2D",
    reference=_ref_conv2d_transpose,
    small=dict(h=3, w=3, ci=2, co=3, kernel=4, stride=2, padding=1),
    flops=lambda n, h, w, ci, co, kernel, stride, padding: (
        2
        * n
        * _out(h, kernel, stride, padding)
        * _out(w, kernel, stride, padding)
        * co
        * kernel
        * kernel
        * ci
    ),
    description="transposed 2-D convolution, NHWC input, (K, K, CI, CO) weight (TVM conv2d_transpose_nhwc)",
)
def conv2d_transpose_nhwc(n=1, h=4, w=4, ci=512, co=256, kernel=4, stride=2, padding=1):
    if padding > kernel - 1:
        raise ValueError(f"T2D: padding={padding} must be at most kernel - 1 = {kernel - 1}")
    inputs = placeholder((n, h, w, ci), name="inputs")
    weight = placeholder((kernel, kernel, ci, co), name="weight")
    # back-padding of the equivalent direct convolution, expressed in input (undilated) rows
    bpad = kernel - 1 - padding
    edge = (bpad + stride - 1) // stride
    padded = pad(inputs, (0, edge, edge, 0))
    # how far the first kept row of the dilated, padded input lies past its first row
    border = (stride - bpad % stride) % stride
    rh, rw = reduce_axis(kernel, name="rh"), reduce_axis(kernel, name="rw")
    rc = reduce_axis(ci, name="rc")

    def dilated(b, y, x, c):
        if stride == 1:
            return padded[b, y, x, c]
        return dsl.if_then_else(
            dsl.all_of(y % stride == 0, x % stride == 0), padded[b, y // stride, x // stride, c], 0.0
        )

    def body(b, y, x, c):
        yy = y + rh.var + border if border else y + rh.var
        xx = x + rw.var + border if border else x + rw.var
        flipped = weight[kernel - 1 - rh.var, kernel - 1 - rw.var, rc, c]
        return dsl.sum(dilated(b, yy, xx, rc.var) * flipped, axis=[rh, rw, rc])

    out = compute(
        (n, _out(h, kernel, stride, padding), _out(w, kernel, stride, padding), co),
        named(("n", "h", "w", "co"), body),
        name="conv2d_transpose_nhwc",
    )
    return create_func([inputs, weight, out], name="conv2d_transpose_nhwc")
