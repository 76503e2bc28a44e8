"""Tensor operators of the graph layer, each written in the compute DSL.

An operator is a function ``fcompute(inputs, name, **attrs) -> Tensor`` over DSL tensors plus a
*pattern* that the fusion pass reads (TVM's ``OpPatternKind``):

* ``elemwise`` / ``broadcast``: one output element from the same element of each input
  (relu, add with a bias); they fuse into the group of their producer.
* ``injective``: an index remapping (transpose, concat); fuses with other injective and
  elementwise operators, not after a reduction anchor (TVM's rule).
* ``anchor``: a reduction whose output takes an elementwise epilogue (conv2d, dense, matmul,
  pooling, softmax, layer norm: TVM's ``kOutEWiseFusable`` and ``kCommReduce``).
* ``view``: a reshape of a contiguous array; never a kernel, the executor hands on a numpy view.

Layout is PyTorch's (NCHW activations, OIHW weights), so reshape and flatten keep their meaning;
the importer stores constant weights transposed where a schedule reads them better so (dense
``(K, N)``, conv2d ``(I, H, W, O)``: the operators' ``weight_layout``); the channels-last
workloads of :mod:`workbench.workloads` are the paper's benchmark shapes, not what an imported
model computes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from ..ir import dsl
from ..ir.dsl import Tensor, compute, reduce_axis
from ..workloads.common import named, out_size

PATTERNS = ("elemwise", "broadcast", "injective", "anchor", "view")


@dataclass(frozen=True)
class OpDef:
    name: str
    pattern: str
    fcompute: Optional[Callable[..., Tensor]]  # None for views
    doc: str = ""


OPS: dict[str, OpDef] = {}


def _register(name: str, pattern: str, doc: str = ""):
    def wrap(fn):
        OPS[name] = OpDef(name, pattern, fn, doc)
        return fn

    return wrap


def _axes(n: int) -> list[str]:
    return [f"i{d}" for d in range(n)]


def _cmp(shape: Sequence[int], body: Callable, name: str) -> Tensor:
    return compute(tuple(shape), named(_axes(len(shape)), body), name=name)


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...]:
    """numpy's broadcasting rule; ValueError naming the shapes where it does not apply."""
    nd = max(len(s) for s in shapes)
    out = []
    for d in range(nd):
        sizes = {s[d - nd + len(s)] for s in shapes if d - nd + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {', '.join(map(str, shapes))} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _bcast(t: Tensor, out_shape: Sequence[int], idx: Sequence[Any]) -> Any:
    off = len(out_shape) - t.ndim
    return t[tuple(0 if t.shape[d] == 1 and out_shape[off + d] != 1 else idx[off + d] for d in range(t.ndim))]


# ------------------------------------------------------------------------------------------
# elementwise


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,
    "maximum": dsl.maximum,
    "minimum": dsl.minimum,
}


def _binary(fn_name: str):
    fn = _BINARY[fn_name]

    def fcompute(inputs: Sequence[Tensor], name: str, scalar: Optional[float] = None, reverse: bool = False):
        if scalar is not None:  # tensor (op) python number
            (x,) = inputs
            s = float(scalar)
            return _cmp(x.shape, lambda *i: fn(s, x[i]) if reverse else fn(x[i], s), name)
        a, b = inputs
        shape = broadcast_shape(a.shape, b.shape)
        return _cmp(shape, lambda *i: fn(_bcast(a, shape, i), _bcast(b, shape, i)), name)

    return fcompute


for _n in _BINARY:
    _register(_n, "broadcast", f"numpy-broadcasting {_n}, or with a python number (attr scalar)")(_binary(_n))

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_SQRT_2_PI = math.sqrt(2.0 / math.pi)

_UNARY: dict[str, Callable[..., Any]] = {
    "relu": lambda x: dsl.maximum(x, 0.0),
    "sigmoid": dsl.sigmoid,
    "tanh": dsl.tanh,
    "exp": dsl.exp,
    "sqrt": dsl.sqrt,
    "rsqrt": dsl.rsqrt,
    "negative": lambda x: 0.0 - x,
    "gelu": lambda x: x * 0.5 * (dsl.erf(x * _SQRT1_2) + 1.0),
    "gelu_tanh": lambda x: x * 0.5 * (dsl.tanh((x + x * x * x * 0.044715) * _SQRT_2_PI) + 1.0),
    "silu": lambda x: x * dsl.sigmoid(x),
}


def _unary(fn_name: str):
    fn = _UNARY[fn_name]

    def fcompute(inputs: Sequence[Tensor], name: str):
        (x,) = inputs
        return _cmp(x.shape, lambda *i: fn(x[i]), name)

    return fcompute


for _n in _UNARY:
    _register(_n, "elemwise")(_unary(_n))


@_register("clip", "elemwise", "min(max(x, lo), hi) (ReLU6 is clip(0, 6))")
def clip(inputs, name, lo: float, hi: float):
    (x,) = inputs
    return _cmp(x.shape, lambda *i: dsl.minimum(dsl.maximum(x[i], float(lo)), float(hi)), name)


# ------------------------------------------------------------------------------------------
# index remapping


@_register("transpose", "injective", "out[i] = x[i permuted by perm]")
def transpose(inputs, name, perm: Sequence[int]):
    (x,) = inputs
    shape = [x.shape[p] for p in perm]

    def body(*i):
        src = [None] * x.ndim
        for d, p in enumerate(perm):
            src[p] = i[d]
        return x[tuple(src)]

    return _cmp(shape, body, name)


@_register("concat", "injective", "inputs joined along axis")
def concat(inputs, name, axis: int):
    shape = list(inputs[0].shape)
    offsets = [0]
    for t in inputs:
        offsets.append(offsets[-1] + t.shape[axis])
    shape[axis] = offsets[-1]

    def body(*i):
        def pick(k):
            idx = list(i)
            idx[axis] = i[axis] - offsets[k] if offsets[k] else i[axis]
            value = inputs[k][tuple(idx)]
            if k == len(inputs) - 1:
                return value
            return dsl.if_then_else(i[axis] < offsets[k + 1], value, pick(k + 1))

        return pick(0)

    return _cmp(shape, body, name)


OPS["reshape"] = OpDef("reshape", "view", None, "a view of a contiguous array (attr shape)")


# ------------------------------------------------------------------------------------------
# anchors: convolution, products, pooling, normalization


def _pad(x: Tensor, before: Sequence[int], value: float, name: str) -> Tensor:
    """``x`` padded by ``before`` (and as much after) on each axis with ``value``."""
    shape = [s + 2 * b for s, b in zip(x.shape, before)]

    def body(*i):
        src, conds = [], []
        for d, b in enumerate(before):
            src.append(i[d] - b if b else i[d])
            if b:
                conds += [i[d] >= b, i[d] < b + x.shape[d]]
        return dsl.if_then_else(dsl.all_of(*conds), x[tuple(src)], value) if conds else x[tuple(src)]

    return _cmp(shape, body, name)


def _s(x, factor: int):
    return x * factor if factor != 1 else x


@_register(
    "conv2d",
    "anchor",
    "NCHW input; OIHW weight, or weight_layout='IHWO': stored (I, H, W, O), as the importer stores a "
    "parameter (the output channels read it contiguously); stride, padding, dilation, groups",
)
def conv2d(inputs, name, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, weight_layout="OIHW"):
    x, w = inputs
    if weight_layout not in ("OIHW", "IHWO"):
        raise ValueError(f"conv2d: weight_layout must be 'OIHW' or 'IHWO', not {weight_layout!r}")
    n, c, h, wd = x.shape
    if weight_layout == "OIHW":
        o, cg, kh, kw = w.shape
    else:
        cg, kh, kw, o = w.shape
    if c != cg * groups or o % groups:
        raise ValueError(
            f"conv2d: {c} input channels, weight {w.shape} ({weight_layout}), groups={groups} do not match"
        )
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    oh, ow = out_size(h, kh, sh, ph, dh), out_size(wd, kw, sw, pw, dw)
    xp = _pad(x, (0, 0, ph, pw), 0.0, f"{name}_pad") if ph or pw else x
    rc, ry, rx = reduce_axis(cg, "rc"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx")
    og = o // groups

    def body(nn, oc, y, xx):
        ch = rc.var if groups == 1 else oc // og * cg + rc.var
        wv = w[oc, rc, ry, rx] if weight_layout == "OIHW" else w[rc, ry, rx, oc]
        return dsl.sum(
            xp[nn, ch, _s(y, sh) + _s(ry.var, dh), _s(xx, sw) + _s(rx.var, dw)] * wv,
            axis=[rc, ry, rx],
        )

    return compute((n, o, oh, ow), named(["nn", "oc", "y", "x"], body), name=name)


@_register(
    "dense",
    "anchor",
    "x (..., K) times weight (N, K) transposed: PyTorch's linear; weight_layout='KN': the weight "
    "stored (K, N), as the importer stores a parameter (the output's last axis reads it contiguously)",
)
def dense(inputs, name, weight_layout: str = "NK"):
    x, w = inputs
    if weight_layout not in ("NK", "KN"):
        raise ValueError(f"dense: weight_layout must be 'NK' or 'KN', not {weight_layout!r}")
    kdim, ndim = (1, 0) if weight_layout == "NK" else (0, 1)
    k = reduce_axis(x.shape[-1], "k")
    if w.shape[kdim] != x.shape[-1]:
        raise ValueError(f"dense: input {x.shape} and weight {w.shape} ({weight_layout}) do not match")

    def body(*i):
        wk = w[i[-1], k] if weight_layout == "NK" else w[k, i[-1]]
        return dsl.sum(x[(*i[:-1], k)] * wk, axis=k)

    return _cmp((*x.shape[:-1], w.shape[ndim]), body, name)


@_register("matmul", "anchor", "(..., M, K) @ (..., K, N), batch dimensions broadcast")
def matmul(inputs, name):
    a, b = inputs
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not multiply")
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    shape = (*batch, a.shape[-2], b.shape[-1])
    k = reduce_axis(a.shape[-1], "k")

    def batch_index(t: Tensor, bi: Sequence[Any]) -> list:
        off = len(batch) - (t.ndim - 2)
        return [0 if t.shape[d] == 1 and batch[off + d] != 1 else bi[off + d] for d in range(t.ndim - 2)]

    def body(*i):
        bi = i[:-2]
        return dsl.sum(a[(*batch_index(a, bi), i[-2], k)] * b[(*batch_index(b, bi), k, i[-1])], axis=k)

    return _cmp(shape, body, name)


def _window(x: Tensor, name: str, kernel, stride, padding, dilation, fill: float, reducer, scale=None):
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    oh, ow = out_size(h, kh, sh, ph, dh), out_size(w, kw, sw, pw, dw)
    xp = _pad(x, (0, 0, ph, pw), fill, f"{name}_pad") if ph or pw else x
    ry, rx = reduce_axis(kh, "ry"), reduce_axis(kw, "rx")

    def body(nn, cc, y, xx):
        return reducer(xp[nn, cc, _s(y, sh) + _s(ry.var, dh), _s(xx, sw) + _s(rx.var, dw)], axis=[ry, rx])

    pooled = compute(
        (n, c, oh, ow), named(["nn", "c", "y", "x"], body), name=name if scale is None else f"{name}_sum"
    )
    if scale is None:
        return pooled
    return _cmp(pooled.shape, lambda *i: pooled[i] * scale, name)


@_register("max_pool2d", "anchor", "NCHW max pooling (padding counts as -inf)")
def max_pool2d(inputs, name, kernel, stride, padding=(0, 0), dilation=(1, 1)):
    (x,) = inputs
    return _window(x, name, kernel, stride, padding, dilation, -3.4028234663852886e38, dsl.max)


@_register("avg_pool2d", "anchor", "NCHW average pooling, padding counted in the divisor")
def avg_pool2d(inputs, name, kernel, stride, padding=(0, 0)):
    (x,) = inputs
    return _window(x, name, kernel, stride, padding, (1, 1), 0.0, dsl.sum, 1.0 / (kernel[0] * kernel[1]))


@_register("adaptive_avg_pool2d", "anchor", "PyTorch's adaptive average pooling to output_size")
def adaptive_avg_pool2d(inputs, name, output_size):
    (x,) = inputs
    n, c, h, w = x.shape
    oh, ow = output_size
    if h % oh == 0 and w % ow == 0:  # equal windows: an ordinary pooling
        return avg_pool2d(inputs, name, kernel=(h // oh, w // ow), stride=(h // oh, w // ow))
    # windows [floor(i*H/O), ceil((i+1)*H/O)) of varying size: the widest, masked
    kh = max(-(-(i + 1) * h // oh) - i * h // oh for i in range(oh))
    kw = max(-(-(i + 1) * w // ow) - i * w // ow for i in range(ow))
    ry, rx = reduce_axis(kh, "ry"), reduce_axis(kw, "rx")

    def bounds(i, size, out):
        return i * size // out, ((i + 1) * size + out - 1) // out

    def body(nn, cc, y, xx):
        (y0, y1), (x0, x1) = bounds(y, h, oh), bounds(xx, w, ow)
        inside = dsl.all_of(y0 + ry.var < y1, x0 + rx.var < x1)
        value = x[nn, cc, dsl.minimum(y0 + ry.var, h - 1), dsl.minimum(x0 + rx.var, w - 1)]
        return dsl.sum(dsl.if_then_else(inside, value, 0.0), axis=[ry, rx])

    total = compute((n, c, oh, ow), named(["nn", "c", "y", "x"], body), name=f"{name}_sum")

    def mean(nn, cc, y, xx):
        (y0, y1), (x0, x1) = bounds(y, h, oh), bounds(xx, w, ow)
        return total[nn, cc, y, xx] / dsl.cast("float32", (y1 - y0) * (x1 - x0))

    return compute(total.shape, named(["nn", "c", "y", "x"], mean), name=name)


def _without(i: Sequence[Any], axes: Sequence[int]) -> tuple:
    return tuple(v for d, v in enumerate(i) if d not in axes)


def _with(i: Sequence[Any], axes: Sequence[int], values: Sequence[Any]) -> tuple:
    out, it = [], iter(values)
    for d in range(len(i) + len(axes)):
        out.append(next(it) if d in axes else None)
    rest = iter(i)
    return tuple(v if v is not None else next(rest) for v in out)


@_register("mean", "anchor", "mean over axes (keepdims false)")
def mean(inputs, name, axes: Sequence[int]):
    (x,) = inputs
    axes = sorted(a % x.ndim for a in axes)
    rs = [reduce_axis(x.shape[a], f"r{a}") for a in axes]
    count = math.prod(x.shape[a] for a in axes)
    shape = _without(x.shape, axes)
    total = _cmp(shape, lambda *i: dsl.sum(x[_with(i, axes, rs)], axis=rs), f"{name}_sum")
    return _cmp(shape, lambda *i: total[i] * (1.0 / count), name)


@_register("softmax", "anchor", "exp(x - max) / sum along axis")
def softmax(inputs, name, axis: int):
    (x,) = inputs
    axis %= x.ndim
    red = _without(x.shape, [axis])
    k1, k2 = reduce_axis(x.shape[axis], "k"), reduce_axis(x.shape[axis], "k")
    mx = _cmp(red, lambda *i: dsl.max(x[_with(i, [axis], [k1])], axis=k1), f"{name}_max")
    ex = _cmp(x.shape, lambda *i: dsl.exp(x[i] - mx[_without(i, [axis])]), f"{name}_exp")
    sm = _cmp(red, lambda *i: dsl.sum(ex[_with(i, [axis], [k2])], axis=k2), f"{name}_sum")
    return _cmp(x.shape, lambda *i: ex[i] / sm[_without(i, [axis])], name)


@_register("layer_norm", "anchor", "normalized over the last `dims` axes, then weight and bias")
def layer_norm(inputs, name, dims: int, eps: float):
    x, *affine = inputs
    axes = list(range(x.ndim - dims, x.ndim))
    red = _without(x.shape, axes)
    inv = 1.0 / math.prod(x.shape[a] for a in axes)
    r1 = [reduce_axis(x.shape[a], f"r{a}") for a in axes]
    r2 = [reduce_axis(x.shape[a], f"r{a}") for a in axes]
    # a reduction is a whole block's value: the divisions by the count come in the readers
    total = _cmp(red, lambda *i: dsl.sum(x[_with(i, axes, r1)], axis=r1), f"{name}_sum")

    def sq(*i):
        d = x[_with(i, axes, r2)] - total[i] * inv
        return dsl.sum(d * d, axis=r2)

    var = _cmp(red, sq, f"{name}_var")

    def body(*i):
        outer = _without(i, axes)
        y = (x[i] - total[outer] * inv) * dsl.rsqrt(var[outer] * inv + float(eps))
        if affine:
            inner = tuple(i[a] for a in axes)
            y = y * affine[0][inner]
            if len(affine) > 1:
                y = y + affine[1][inner]
        return y

    return _cmp(x.shape, body, name)


def infer(op: str, shapes: Sequence[tuple[Sequence[int], str]], attrs: dict) -> tuple[tuple[int, ...], str]:
    """The output shape and dtype of ``op`` on inputs of ``shapes`` ((shape, dtype) pairs)."""
    if op == "reshape":
        return tuple(attrs["shape"]), shapes[0][1]
    ts = [dsl.placeholder(tuple(s), d, name=f"p{k}") for k, (s, d) in enumerate(shapes)]
    out = OPS[op].fcompute(ts, op, **attrs)
    return tuple(int(s) for s in out.shape), out.dtype
