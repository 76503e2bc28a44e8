"""Import a PyTorch model through ``torch.export``: aten operators to graph operators.

``torch`` is imported here only (the optional extra ``torch``); ``import workbench`` never does.
Parameters and buffers become constants (numpy), user inputs become graph inputs. Batch norm
in inference mode is folded into the convolution before it when that convolution's output feeds
nothing else (TVM's ``FoldScaleAxis`` / PyTorch's ``fuse_conv_bn_eval``), otherwise it becomes
a per-channel multiply and add. An aten operator without a translation raises
:class:`UnsupportedOperator` naming it, the node, the module it came from and the source line.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..errors import WorkbenchError
from .graph import Graph


class UnsupportedOperator(WorkbenchError, NotImplementedError):
    """An operator of the exported model that the graph layer has no translation for."""

    def __init__(self, op: str, node: str, where: str, source: str = "", detail: str = ""):
        self.op, self.node, self.where, self.source = op, node, where, source
        msg = f"unsupported operator {op} (node {node!r}"
        msg += f", in {where})" if where else ")"
        if detail:
            msg += f": {detail}"
        if source:
            msg += f"\n  from: {source}"
        super().__init__(msg)


def _pair(v: Any) -> tuple[int, int]:
    if isinstance(v, (list, tuple)):
        return (int(v[0]), int(v[-1])) if len(v) else (1, 1)
    return int(v), int(v)


def _where(fx_node: Any) -> str:
    stack = fx_node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path, cls = list(stack.values())[-1]
    cls = cls.rsplit(".", 1)[-1] if isinstance(cls, str) else getattr(cls, "__name__", str(cls))
    return f"{path or 'the model'} ({cls})"


def _source(fx_node: Any) -> str:
    trace = fx_node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in trace.strip().splitlines()]
    # the first frame is the model's own forward (later ones are inside torch.nn)
    return " ".join(lines[:2]) if lines else ""


def from_torch(module: Any, example_inputs: Sequence[Any], *, fuse: bool = True) -> Graph:
    """A :class:`Graph` of ``module`` (a ``torch.nn.Module``, in eval mode) exported with
    ``torch.export`` on ``example_inputs`` (shapes are fixed to theirs); fused unless
    ``fuse=False``."""
    try:
        import torch  # optional dependency (extra torch); not imported by `import workbench`
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "from_torch needs PyTorch: pip install 'workbench[torch]' (torch==2.13.0, the CPU build)"
        ) from exc
    module = module.eval()
    with torch.no_grad():
        ep = torch.export.export(module, tuple(example_inputs))
    graph = Graph()
    env: dict[Any, Any] = {}  # fx node -> value name (or tuple of them, or a python constant)
    state = {**ep.state_dict, **getattr(ep, "constants", {})}
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
    from torch.export.graph_signature import InputKind  # optional dependency (extra torch)

    for node in ep.graph.nodes:
        if node.op == "placeholder":
            spec = specs[node.name]
            if spec.kind == InputKind.USER_INPUT:
                val = node.meta["val"]
                env[node] = graph.add_input(node.name, tuple(val.shape), _dtype(val.dtype, node))
            else:
                tensor = state[spec.target]
                env[node] = ("const", spec.target, tensor.detach().cpu().numpy())
        elif node.op == "call_function":
            env[node] = _Translate(graph, env, node).run()
        elif node.op == "output":
            outs = node.args[0]
            graph.set_outputs([_materialize(graph, env[o]) for o in outs])
    _fold_batch_norm(graph)
    _conv_weights_ihwo(graph)
    if fuse:
        graph.fuse()
    return graph


def _dtype(dt: Any, node: Any) -> str:
    s = str(dt).replace("torch.", "")
    if s != "float32":
        raise UnsupportedOperator(
            f"a {s} tensor", node.name, _where(node), _source(node), "only float32 is supported"
        )
    return s


def _materialize(graph: Graph, v: Any) -> str:
    """A value name for ``v``; a parameter becomes a constant the first time it is used."""
    if isinstance(v, tuple) and v and v[0] == "const":
        key = ("const", v[1])
        cache = graph.__dict__.setdefault("_const_of", {})
        if key not in cache:
            arr = v[2]
            if arr.dtype == np.float64:
                arr = arr.astype(np.float32)
            cache[key] = graph.add_constant(v[1], arr)
        return cache[key]
    if not isinstance(v, str):
        raise TypeError(f"not a tensor value: {v!r}")
    return v


class _Translate:
    """One aten node to graph nodes."""

    def __init__(self, graph: Graph, env: dict, node: Any):
        self.g, self.env, self.node = graph, env, node
        self.where = _where(node)

    def arg(self, k: int, default: Any = None) -> Any:
        a = self.node.args[k] if k < len(self.node.args) else default
        return self.env.get(a, a) if _is_fx(a) else a

    def value(self, k: int) -> str:
        return _materialize(self.g, self.arg(k))

    def const(self, k: int) -> np.ndarray:
        v = self.arg(k)
        if isinstance(v, tuple) and v and v[0] == "const":
            return v[2]
        raise self.unsupported(f"argument {k} must be a parameter or buffer of the model")

    def emit(self, op: str, inputs: Sequence[str], **attrs) -> str:
        return self.g.add_node(op, inputs, name=self.node.name, where=self.where, **attrs)

    def unsupported(self, detail: str = "") -> UnsupportedOperator:
        return UnsupportedOperator(
            _opname(self.node.target), self.node.name, self.where, _source(self.node), detail
        )

    def ndim(self, k: int) -> int:
        return len(self.g.values[self.value(k)][0])

    def run(self) -> Any:
        name = _opname(self.node.target)
        fn = _TABLE.get(name)
        if fn is None:
            raise self.unsupported()
        return fn(self)


def _is_fx(a: Any) -> bool:
    return type(a).__name__ == "Node"


def _opname(target: Any) -> str:
    """``aten.conv2d.default`` for an aten overload, ``getitem`` for ``operator.getitem``."""
    ns = getattr(target, "namespace", None)
    name = getattr(target, "__name__", str(target))
    return f"{ns}.{name}" if ns else name


_TABLE: dict[str, Callable[[_Translate], Any]] = {}


def _on(*names: str):
    def wrap(fn):
        for n in names:
            _TABLE[f"aten.{n}" if n != "getitem" else n] = fn
        return fn

    return wrap


def _bias(t: _Translate, out: str, bias: Any, axis: int) -> str:
    """``out + bias`` with the bias along ``axis`` (a broadcast add)."""
    if bias is None:
        return out
    b = _materialize(t.g, bias)
    nd = len(t.g.values[out][0])
    (n,) = t.g.values[b][0]
    if axis != nd - 1:
        shape = (n,) + (1,) * (nd - 1 - axis)
        b = t.g.add_node("reshape", [b], name=f"{b}_bcast", shape=shape)
    return t.g.add_node("add", [out, b], name=f"{t.node.name}_bias", where=t.where)


@_on("conv2d.default", "convolution.default")
def _conv(t: _Translate):
    if t.node.target.__name__.startswith("convolution"):
        x, w, b, stride, padding, dilation, transposed, _, groups = (t.arg(k) for k in range(9))
        if transposed:
            raise t.unsupported("transposed convolution")
    else:
        x, w = t.arg(0), t.arg(1)
        b, stride, padding, dilation, groups = (
            t.arg(k, d) for k, d in ((2, None), (3, 1), (4, 0), (5, 1), (6, 1))
        )
    if isinstance(padding, str):
        raise t.unsupported(f"padding={padding!r} (give the padding as numbers)")
    if t.ndim(0) != 4:
        raise t.unsupported("only 2-D convolution (a 4-D NCHW input) is supported")
    out = t.emit(
        "conv2d",
        [_materialize(t.g, x), _materialize(t.g, w)],
        stride=_pair(stride),
        padding=_pair(padding),
        dilation=_pair(dilation),
        groups=int(groups),
    )
    return _bias(t, out, b, 1)


@_on("linear.default")
def _linear(t: _Translate):
    w = t.arg(1)
    if isinstance(w, tuple) and w and w[0] == "const" and np.ndim(w[2]) == 2:
        # a parameter: stored transposed (K, N), so the output's vector loop along N reads the
        # weight contiguously (PyTorch's (N, K) is N apart by K elements: a gather per lane)
        key = ("const_t", w[1])
        cache = t.g.__dict__.setdefault("_const_of", {})
        if key not in cache:
            cache[key] = t.g.add_constant(f"{w[1]}_t", np.ascontiguousarray(np.asarray(w[2], np.float32).T))
        out = t.emit("dense", [t.value(0), cache[key]], weight_layout="KN")
    else:
        out = t.emit("dense", [t.value(0), t.value(1)])
    return _bias(t, out, t.arg(2), t.ndim(0) - 1)


@_on("addmm.default")
def _addmm(t: _Translate):
    if t.node.kwargs.get("beta", 1) != 1 or t.node.kwargs.get("alpha", 1) != 1:
        raise t.unsupported("addmm with beta or alpha other than 1")
    out = t.emit("matmul", [t.value(1), t.value(2)])
    return t.g.add_node("add", [out, t.value(0)], name=f"{t.node.name}_bias", where=t.where)


@_on("matmul.default", "mm.default", "bmm.default")
def _matmul(t: _Translate):
    if t.ndim(0) < 2 or t.ndim(1) < 2:
        raise t.unsupported("matmul of a 1-D tensor")
    return t.emit("matmul", [t.value(0), t.value(1)])


@_on("batch_norm.default", "_native_batch_norm_legit_no_training.default")
def _batch_norm(t: _Translate):
    if t.node.target.__name__.startswith("batch_norm"):
        x, w, b, mean, var, training, _, eps = (t.arg(k) for k in range(8))
        if training:
            raise t.unsupported("batch norm in training mode (call model.eval())")
    else:
        x, w, b, mean, var, _, eps = (t.arg(k) for k in range(7))
    mean_a, var_a = t.const(3), t.const(4)
    scale = 1.0 / np.sqrt(var_a.astype(np.float64) + eps)
    if w is not None:
        scale = scale * t.const(1)
    shift = -mean_a * scale
    if b is not None:
        shift = shift + t.const(2)
    xv = _materialize(t.g, x)
    nd = len(t.g.values[xv][0])
    shape = (len(scale),) + (1,) * (nd - 2)
    s = t.g.add_constant(f"{t.node.name}_scale", scale.astype(np.float32).reshape(shape))
    h = t.g.add_constant(f"{t.node.name}_shift", shift.astype(np.float32).reshape(shape))
    y = t.g.add_node("multiply", [xv, s], name=f"{t.node.name}_scale", where=t.where)
    out = t.g.add_node("add", [y, h], name=t.node.name, where=t.where)
    t.g.__dict__.setdefault("_bn_pairs", []).append((y, out))
    if not t.node.target.__name__.startswith("batch_norm"):
        return (out, None, None)
    return out


@_on("getitem")
def _getitem(t: _Translate):
    return t.arg(0)[t.arg(1)]


def _unary(op: str):
    return lambda t: t.emit(op, [t.value(0)])


for _aten, _op in {
    "relu.default": "relu",
    "relu_.default": "relu",
    "sigmoid.default": "sigmoid",
    "tanh.default": "tanh",
    "exp.default": "exp",
    "sqrt.default": "sqrt",
    "rsqrt.default": "rsqrt",
    "neg.default": "negative",
    "silu.default": "silu",
}.items():
    _TABLE[f"aten.{_aten}"] = _unary(_op)


@_on("gelu.default")
def _gelu(t: _Translate):
    approx = t.node.kwargs.get("approximate", t.arg(1, "none"))
    return t.emit("gelu" if approx == "none" else "gelu_tanh", [t.value(0)])


@_on("hardtanh.default", "hardtanh_.default", "clamp.default")
def _clip(t: _Translate):
    lo, hi = t.arg(1, -1.0), t.arg(2, 1.0)
    if lo is None or hi is None:
        raise t.unsupported("clamp with one open bound")
    return t.emit("clip", [t.value(0)], lo=float(lo), hi=float(hi))


def _binary(op: str, reverse_op: str = ""):
    def fn(t: _Translate):
        a, b = t.arg(0), t.arg(1)
        alpha = t.node.kwargs.get("alpha", 1)
        if alpha != 1:
            raise t.unsupported(f"alpha={alpha}")
        if isinstance(b, (int, float)):
            return t.emit(op, [_materialize(t.g, a)], scalar=float(b))
        if isinstance(a, (int, float)):
            return t.emit(op, [_materialize(t.g, b)], scalar=float(a), reverse=True)
        return t.emit(op, [_materialize(t.g, a), _materialize(t.g, b)])

    return fn


for _aten, _op in {
    "add.Tensor": "add",
    "add_.Tensor": "add",
    "sub.Tensor": "subtract",
    "mul.Tensor": "multiply",
    "div.Tensor": "divide",
    "maximum.default": "maximum",
    "minimum.default": "minimum",
}.items():
    _TABLE[f"aten.{_aten}"] = _binary(_op)


@_on("max_pool2d.default")
def _max_pool(t: _Translate):
    kernel = _pair(t.arg(1))
    stride = _pair(t.arg(2) or kernel)
    padding, dilation, ceil = _pair(t.arg(3, 0)), _pair(t.arg(4, 1)), t.arg(5, False)
    if ceil:
        raise t.unsupported("ceil_mode=True")
    return t.emit(
        "max_pool2d", [t.value(0)], kernel=kernel, stride=stride, padding=padding, dilation=dilation
    )


@_on("avg_pool2d.default")
def _avg_pool(t: _Translate):
    kernel = _pair(t.arg(1))
    stride = _pair(t.arg(2) or kernel)
    padding, ceil, include, divisor = _pair(t.arg(3, 0)), t.arg(4, False), t.arg(5, True), t.arg(6, None)
    if ceil or divisor is not None or (not include and padding != (0, 0)):
        raise t.unsupported("ceil_mode, divisor_override or count_include_pad=False with padding")
    return t.emit("avg_pool2d", [t.value(0)], kernel=kernel, stride=stride, padding=padding)


@_on("adaptive_avg_pool2d.default")
def _adaptive(t: _Translate):
    shape = t.g.values[t.value(0)][0]
    size = t.arg(1)
    size = tuple(
        s if s is not None else shape[2 + k] for k, s in enumerate(_pair(size) if size is not None else size)
    )
    return t.emit("adaptive_avg_pool2d", [t.value(0)], output_size=size)


@_on("mean.dim")
def _mean(t: _Translate):
    axes = t.arg(1)
    axes = [axes] if isinstance(axes, int) else list(axes)
    keep = t.arg(2, False) or t.node.kwargs.get("keepdim", False)
    x = t.value(0)
    shape = t.g.values[x][0]
    out = t.emit("mean", [x], axes=tuple(a % len(shape) for a in axes))
    if keep:
        kept = tuple(1 if d in [a % len(shape) for a in axes] else s for d, s in enumerate(shape))
        out = t.g.add_node("reshape", [out], name=f"{t.node.name}_keepdim", shape=kept)
    return out


@_on("softmax.int", "_softmax.default")
def _softmax(t: _Translate):
    return t.emit("softmax", [t.value(0)], axis=int(t.arg(1)) % t.ndim(0))


@_on("layer_norm.default")
def _layer_norm(t: _Translate):
    dims = len(t.arg(1))
    inputs = [t.value(0)] + [_materialize(t.g, t.arg(k)) for k in (2, 3) if t.arg(k) is not None]
    if t.arg(2) is None and t.arg(3) is not None:
        raise t.unsupported("layer norm with a bias and no weight")
    return t.emit("layer_norm", inputs, dims=dims, eps=float(t.arg(4, 1e-5)))


def _view_shape(t: _Translate, shape: Sequence[int]) -> tuple[int, ...]:
    size = int(np.prod(t.g.values[t.value(0)][0]))
    shape = [int(s) for s in shape]
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1]))
        shape[shape.index(-1)] = size // known
    return tuple(shape)


@_on("view.default", "reshape.default", "_unsafe_view.default")
def _reshape(t: _Translate):
    return t.emit("reshape", [t.value(0)], shape=_view_shape(t, t.arg(1)))


def _meta_shape(t: _Translate) -> tuple[int, ...]:
    return tuple(int(s) for s in t.node.meta["val"].shape)


@_on("flatten.using_ints", "squeeze.dim", "squeeze.dims", "squeeze.default", "unsqueeze.default")
def _reshape_like(t: _Translate):
    return t.emit("reshape", [t.value(0)], shape=_meta_shape(t))


@_on("transpose.int", "permute.default", "t.default")
def _transpose(t: _Translate):
    nd = t.ndim(0)
    name = t.node.target.__name__
    if name.startswith("permute"):
        perm = [int(p) % nd for p in t.arg(1)]
    else:
        a, b = (int(t.arg(1)) % nd, int(t.arg(2)) % nd) if name.startswith("transpose") else (0, 1)
        perm = list(range(nd))
        perm[a], perm[b] = perm[b], perm[a]
    if perm == list(range(nd)):
        return t.value(0)
    return t.emit("transpose", [t.value(0)], perm=tuple(perm))


@_on("cat.default", "concat.default")
def _cat(t: _Translate):
    values = [_materialize(t.g, t.env.get(a, a)) for a in t.node.args[0]]
    axis = int(t.arg(1, 0)) % len(t.g.values[values[0]][0])
    return t.emit("concat", values, axis=axis)


@_on("dropout.default", "clone.default", "contiguous.default", "alias.default", "detach.default")
def _identity(t: _Translate):
    return t.arg(0)


def _fold_batch_norm(graph: Graph) -> None:
    """Fold ``conv2d [+ bias] -> multiply(scale) -> add(shift)`` (a batch norm) into the
    convolution's weight and bias when the convolution's weight is a constant and each value
    in the chain feeds only the next."""
    pairs = graph.__dict__.pop("_bn_pairs", [])
    graph.__dict__.pop("_const_of", None)
    if not pairs:
        return
    prod = graph.producer()
    users = graph.users()
    removed: dict[str, str] = {}  # value name -> the value that replaces it
    for mul_name, add_name in pairs:
        mul = prod[mul_name]
        x = mul.inputs[0]
        chain_bias = None
        src = prod.get(x)
        if src is not None and src.op == "add" and len(users[x]) == 1:
            conv = prod.get(src.inputs[0])
            bias_val = src.inputs[1]
            chain_bias = src
        else:
            conv, bias_val = src, None
        if (
            conv is None
            or conv.op != "conv2d"
            or conv.inputs[1] not in graph.constants
            or len(users[conv.name]) != 1
            or len(users[x]) != 1
        ):
            continue
        bias = None
        if bias_val is not None:
            bias_prod = prod.get(bias_val)
            base = bias_prod.inputs[0] if bias_prod is not None and bias_prod.op == "reshape" else bias_val
            if base not in graph.constants:
                continue
            bias = graph.constants[base].reshape(-1)
        scale = graph.constants[mul.inputs[1]].reshape(-1)
        shift = graph.constants[prod[add_name].inputs[1]].reshape(-1)
        w = graph.constants[conv.inputs[1]]
        new_w = graph.add_constant(
            f"{conv.inputs[1]}_bn", (w * scale[:, None, None, None]).astype(np.float32)
        )
        new_b = (shift if bias is None else bias * scale + shift).astype(np.float32)
        b = graph.add_constant(f"{conv.name}_bias_bn", new_b.reshape(-1, 1, 1))
        conv.inputs[1] = new_w
        # the add of the batch norm's shift becomes the convolution's bias add
        add = prod[add_name]
        add.inputs = [conv.name, b]
        removed[mul_name] = conv.name
        if chain_bias is not None:
            removed[chain_bias.name] = conv.name
    if not removed:
        return
    graph.nodes = [n for n in graph.nodes if n.name not in removed]
    _drop_unused(graph)


def _conv_weights_ihwo(graph: Graph) -> None:
    """Store each constant weight of a (not grouped) convolution output-channels-last, (I, H, W,
    O), as the importer stores a dense layer's weight (K, N): a vector of output channels then
    reads it contiguously, so a schedule can vectorize over them (PyTorch's OIHW puts them
    I*H*W elements apart: a gather per lane) where the output rows are too short for the
    vector (7 wide in ResNet's last stage: 7 of 16 lanes). After batch-norm folding, which
    scales the weight along O."""
    done: dict[str, str] = {}
    for n in graph.nodes:
        if n.op != "conv2d" or n.attrs.get("groups", 1) != 1:
            continue
        if n.attrs.get("weight_layout", "OIHW") != "OIHW":
            continue
        w = n.inputs[1]
        if w not in graph.constants:
            continue
        if w not in done:
            done[w] = graph.add_constant(f"{w}_ihwo", graph.constants[w].transpose(1, 2, 3, 0))
        n.inputs[1] = done[w]
        n.attrs["weight_layout"] = "IHWO"
    if done:
        _drop_unused(graph)


def _drop_unused(graph: Graph) -> None:
    """Remove nodes and constants nothing reads (after folding)."""
    while True:
        used = set(graph.outputs) | {v for n in graph.nodes for v in n.inputs}
        dead = [n for n in graph.nodes if n.name not in used]
        if not dead:
            break
        graph.nodes = [n for n in graph.nodes if n.name in used]
    for c in [c for c in graph.constants if c not in used]:
        del graph.constants[c]
    for v in [v for v in graph.values if v not in used and v not in graph.inputs]:
        del graph.values[v]
    graph.groups = graph._tasks = None
