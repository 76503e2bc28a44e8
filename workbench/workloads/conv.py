"""Convolutions: C1D, C2D, C3D, DIL, GRP, DEP and CBR (conv2d + bias + batch norm + ReLU).

Definitions follow TVM's ``meta_schedule.testing.te_workload`` so results compare with the TVM
anchor: channels-last inputs (NLC / NHWC / NDHWC), weights ``(*kernel, CI // groups, CO)``, a
separate ``PadInput`` stage, then one reduction block. Two deliberate simplifications of the
index expressions: the input channel is ``rc`` (not ``co // CO * CI + rc``) when ``groups == 1``,
and multiplications by a stride or dilation of 1 are left out.

FLOPs are ``2 * outputs * reduction size`` (one multiply and one add per tap), TVM's formula.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..ir import dsl
from ..ir.dsl import Tensor, compute, create_func, placeholder, reduce_axis
from .common import named, out_size, pad
from .registry import register


def _scaled(x, factor: int):
    return x * factor if factor != 1 else x


def conv_nd(
    inputs: Tensor,
    weight: Tensor,
    *,
    stride: int,
    padding: int,
    dilation: int = 1,
    groups: int = 1,
    name: str,
    axes: Sequence[str],
    raxes: Sequence[str],
    pad_name: str = "PadInput",
) -> Tensor:
    """Channels-last N-d convolution: ``inputs (N, *S, CI)``, ``weight (*K, CI // groups, CO)``.

    ``axes`` names the output axes (batch, spatial..., channel); ``raxes`` the reduce axes
    (kernel spatial..., input channel), in the order the block iterates them.
    """
    nsp = inputs.ndim - 2
    ks, (cig, co) = weight.shape[:nsp], weight.shape[nsp:]
    cog = co // groups
    padded = pad(inputs, (0,) + (padding,) * nsp + (0,), name=pad_name)
    outs = [out_size(s, k, stride, padding, dilation) for s, k in zip(inputs.shape[1:-1], ks)]
    rk = [reduce_axis(k, name=r) for k, r in zip(ks, raxes[:-1])]
    rc = reduce_axis(cig, name=raxes[-1])

    def body(n, *rest):
        *sp, c = rest
        window = [_scaled(o, stride) + _scaled(r.var, dilation) for o, r in zip(sp, rk)]
        channel = rc.var if groups == 1 else c // cog * cig + rc.var
        return dsl.sum(padded[(n, *window, channel)] * weight[(*rk, rc, c)], axis=[*rk, rc])

    return compute((inputs.shape[0], *outs, co), named(axes, body), name=name)


def np_conv(
    x: np.ndarray, w: np.ndarray, /, *, stride: int, padding: int, dilation: int = 1, groups: int = 1, **_
) -> np.ndarray:
    """numpy reference of :func:`conv_nd`: one matmul per kernel tap and group, in float64."""
    nsp = x.ndim - 2
    ks, (cig, co) = w.shape[:nsp], w.shape[nsp:]
    cog = co // groups
    xp = np.pad(x.astype(np.float64), [(0, 0)] + [(padding, padding)] * nsp + [(0, 0)])
    outs = [out_size(s, k, stride, padding, dilation) for s, k in zip(x.shape[1:-1], ks)]
    wg = w.astype(np.float64).reshape(*ks, cig, groups, cog)
    out = np.zeros((x.shape[0], *outs, groups, cog))
    for tap in np.ndindex(*ks):
        window = tuple(
            slice(t * dilation, t * dilation + (o - 1) * stride + 1, stride) for t, o in zip(tap, outs)
        )
        patch = xp[(slice(None), *window)].reshape(x.shape[0], *outs, groups, cig)
        for g in range(groups):
            out[..., g, :] += patch[..., g, :] @ wg[tap][:, g, :]
    return out.reshape(x.shape[0], *outs, co).astype(np.float32)


def _conv_flops(n, sizes, ci, co, kernel, stride, padding, dilation=1, groups=1, **_):
    outs = [out_size(s, kernel, stride, padding, dilation) for s in sizes]
    return 2 * n * math.prod(outs) * co * kernel ** len(sizes) * (ci // groups)


def _conv_func(
    name,
    n,
    sizes,
    ci,
    co,
    kernel,
    stride,
    padding,
    dilation=1,
    groups=1,
    axes=("n", "h", "w", "co"),
    raxes=("rh", "rw", "rc"),
):
    if ci % groups or co % groups:
        raise ValueError(f"{name}: ci={ci} and co={co} must be multiples of groups={groups}")
    inputs = placeholder((n, *sizes, ci), name="inputs")
    weight = placeholder((kernel,) * len(sizes) + (ci // groups, co), name="weight")
    out = conv_nd(
        inputs,
        weight,
        stride=stride,
        padding=padding,
        dilation=dilation,
        groups=groups,
        name=name,
        axes=axes,
        raxes=raxes,
    )
    return create_func([inputs, weight, out], name=name)


@register(
    "C1D",
    reference=np_conv,
    small=dict(l=16, ci=4, co=4),
    flops=lambda n, l, **kw: _conv_flops(n, [l], **kw),
    description="1-D convolution, NLC input, (K, CI, CO) weight (TVM conv1d_nlc)",
)
def conv1d_nlc(n=1, l=256, ci=64, co=128, kernel=3, stride=2, padding=1):  # noqa: E741
    return _conv_func(
        "conv1d_nlc", n, [l], ci, co, kernel, stride, padding, axes=("n", "l", "co"), raxes=("rl", "rc")
    )


@register(
    "C2D",
    reference=np_conv,
    small=dict(h=8, w=8, ci=3, co=4, kernel=3, stride=2, padding=1),
    flops=lambda n, h, w, **kw: _conv_flops(n, [h, w], **kw),
    description="2-D convolution, NHWC input, HWIO weight (TVM conv2d_nhwc)",
)
def conv2d_nhwc(n=1, h=224, w=224, ci=3, co=64, kernel=7, stride=2, padding=3):
    return _conv_func("conv2d_nhwc", n, [h, w], ci, co, kernel, stride, padding)


@register(
    "C3D",
    reference=np_conv,
    small=dict(d=4, h=6, w=6, ci=2, co=4, kernel=3, stride=2, padding=1),
    flops=lambda n, d, h, w, **kw: _conv_flops(n, [d, h, w], **kw),
    description="3-D convolution, NDHWC input, DHWIO weight (TVM conv3d_ndhwc)",
)
def conv3d_ndhwc(n=1, d=16, h=224, w=224, ci=3, co=64, kernel=7, stride=2, padding=3):
    return _conv_func(
        "conv3d_ndhwc",
        n,
        [d, h, w],
        ci,
        co,
        kernel,
        stride,
        padding,
        axes=("n", "d", "h", "w", "co"),
        raxes=("rd", "rh", "rw", "rc"),
    )


@register(
    "DIL",
    reference=np_conv,
    small=dict(h=10, w=10, ci=3, co=4, kernel=3, stride=2, padding=2, dilation=2),
    flops=lambda n, h, w, **kw: _conv_flops(n, [h, w], **kw),
    description="dilated 2-D convolution, NHWC (TVM conv2d_nhwc with dilation)",
)
def dilated_conv2d_nhwc(n=1, h=224, w=224, ci=3, co=64, kernel=7, stride=2, padding=3, dilation=2):
    return _conv_func("conv2d_nhwc", n, [h, w], ci, co, kernel, stride, padding, dilation)


@register(
    "GRP",
    reference=np_conv,
    small=dict(h=8, w=8, ci=8, co=8, kernel=3, stride=2, padding=1, groups=4),
    flops=lambda n, h, w, **kw: _conv_flops(n, [h, w], **kw),
    description="group 2-D convolution, NHWC, weight (K, K, CI/groups, CO) (TVM conv2d_nhwc with groups)",
)
def group_conv2d_nhwc(n=1, h=56, w=56, ci=64, co=128, kernel=3, stride=2, padding=1, groups=4):
    return _conv_func("conv2d_nhwc", n, [h, w], ci, co, kernel, stride, padding, groups=groups)


# ----------------------------------------------------------------------------------------
# depthwise


def _ref_depthwise(x, w, /, *, stride, padding, **_):
    # a depthwise convolution is a group convolution with one input channel per group
    return np_conv(x, w[0][:, :, None, :], stride=stride, padding=padding, groups=x.shape[-1])


@register(
    "DEP",
    reference=_ref_depthwise,
    small=dict(h=8, w=8, c=4),
    flops=lambda n, h, w, c, kernel, stride, padding: (
        2
        * n
        * out_size(h, kernel, stride, padding)
        * out_size(w, kernel, stride, padding)
        * c
        * kernel
        * kernel
    ),
    description="depthwise 2-D convolution, NHWC input, (1, K, K, C) weight (TVM depthwise_conv2d_nhwc)",
)
def depthwise_conv2d_nhwc(n=1, h=112, w=112, c=32, kernel=3, stride=1, padding=1):
    inputs = placeholder((n, h, w, c), name="inputs")
    weight = placeholder((1, kernel, kernel, c), name="weight")
    padded = pad(inputs, (0, padding, padding, 0))
    rh, rw = reduce_axis(kernel, name="rh"), reduce_axis(kernel, name="rw")
    oh, ow = out_size(h, kernel, stride, padding), out_size(w, kernel, stride, padding)
    out = compute(
        (n, oh, ow, c),
        named(
            ("n", "h", "w", "c"),
            lambda b, y, x, ch: dsl.sum(
                padded[b, _scaled(y, stride) + rh.var, _scaled(x, stride) + rw.var, ch]
                * weight[0, rh, rw, ch],
                axis=[rh, rw],
            ),
        ),
        name="depth_conv2d_nhwc",
    )
    return create_func([inputs, weight, out], name="depth_conv2d_nhwc")


# ----------------------------------------------------------------------------------------
# conv2d + bias + batch norm + relu


def _ref_cbr(data, kernel_w, bias, bn_offset, bn_scale, /, *, stride, padding, **_):
    conv = np_conv(data, kernel_w, stride=stride, padding=padding).astype(np.float64)
    out = (conv + bias) * bn_scale + bn_offset
    return np.maximum(out, 0.0).astype(np.float32)


@register(
    "CBR",
    reference=_ref_cbr,
    small=dict(h=8, w=8, ci=3, co=4, kernel=3, stride=2, padding=1),
    # the convolution, then bias add, scale, shift and ReLU: one FLOP each per output
    flops=lambda n, h, w, co, kernel, stride, padding, **kw: (
        _conv_flops(n, [h, w], co=co, kernel=kernel, stride=stride, padding=padding, **kw)
        + 4 * n * out_size(h, kernel, stride, padding) * out_size(w, kernel, stride, padding) * co
    ),
    description="conv2d NHWC + bias + batch-norm scale/shift + ReLU as separate stages "
    "(TVM conv2d_nhwc_bn_relu)",
)
def conv2d_nhwc_bn_relu(n=1, h=224, w=224, ci=3, co=64, kernel=7, stride=2, padding=3):
    data = placeholder((n, h, w, ci), name="data")
    kernel_w = placeholder((kernel, kernel, ci, co), name="kernel")
    bias = placeholder((co,), name="bias")
    bn_offset = placeholder((co,), name="bn_offset")
    bn_scale = placeholder((co,), name="bn_scale")
    conv = conv_nd(
        data,
        kernel_w,
        stride=stride,
        padding=padding,
        name="Conv2dOutput",
        axes=("nn", "yy", "xx", "ff"),
        raxes=("ry", "rx", "rc"),
        pad_name="PaddedInput",
    )
    biased = compute(conv.shape, lambda i, j, k, l: conv[i, j, k, l] + bias[l], name="bias_add")
    scaled = compute(conv.shape, lambda i, j, k, l: biased[i, j, k, l] * bn_scale[l], name="bn_mul")
    shifted = compute(conv.shape, lambda i, j, k, l: scaled[i, j, k, l] + bn_offset[l], name="bn_add")
    # topi.nn.relu leaves its stage unnamed, hence TVM's block name "compute"
    relu = compute(
        conv.shape, named(("i0", "i1", "i2", "i3"), lambda *i: dsl.maximum(shifted[i], 0.0)), name="compute"
    )
    # TVM's parameter order: bn_offset before bn_scale
    return create_func([data, kernel_w, bias, bn_offset, bn_scale, relu], name="conv2d_nhwc_bn_relu")
