"""The paper's twelve workloads: TVM-compatible definitions, numpy references, the registry."""

import numpy as np
import pytest

from workbench import workloads as wl
from workbench.ir import BufferLoad, Select

PAPER = ["C1D", "C2D", "C3D", "DEP", "DIL", "GMM", "GRP", "T2D", "CBR", "TBG", "NRM", "SFM"]


def test_names_are_the_paper_workloads_in_order():
    assert wl.names()[:12] == PAPER


# ----------------------------------------------------------------------------------------
# definitions match TVM's te_workload (shapes, parameter and block names)

PAPER_PARAMS = {
    "C1D": [("inputs", (1, 256, 64)), ("weight", (3, 64, 128)), ("conv1d_nlc", (1, 128, 128))],
    "C2D": [("inputs", (1, 224, 224, 3)), ("weight", (7, 7, 3, 64)), ("conv2d_nhwc", (1, 112, 112, 64))],
    "C3D": [
        ("inputs", (1, 16, 224, 224, 3)),
        ("weight", (7, 7, 7, 3, 64)),
        ("conv3d_ndhwc", (1, 8, 112, 112, 64)),
    ],
    "DEP": [
        ("inputs", (1, 112, 112, 32)),
        ("weight", (1, 3, 3, 32)),
        ("depth_conv2d_nhwc", (1, 112, 112, 32)),
    ],
    "DIL": [("inputs", (1, 224, 224, 3)), ("weight", (7, 7, 3, 64)), ("conv2d_nhwc", (1, 109, 109, 64))],
    "GMM": [("X", (1, 128, 128)), ("Y", (1, 128, 128)), ("Z", (1, 128, 128))],
    "GRP": [("inputs", (1, 56, 56, 64)), ("weight", (3, 3, 16, 128)), ("conv2d_nhwc", (1, 28, 28, 128))],
    "T2D": [
        ("inputs", (1, 4, 4, 512)),
        ("weight", (4, 4, 512, 256)),
        ("conv2d_transpose_nhwc", (1, 8, 8, 256)),
    ],
    "CBR": [
        ("data", (1, 224, 224, 3)),
        ("kernel", (7, 7, 3, 64)),
        ("bias", (64,)),
        ("bn_offset", (64,)),
        ("bn_scale", (64,)),
        ("compute", (1, 112, 112, 64)),
    ],
    "TBG": [("query", (1, 128, 12, 64)), ("value", (1, 128, 12, 64)), ("C", (1, 12, 128, 128))],
    "NRM": [("A", (1, 256, 256)), ("D", (1,))],
    "SFM": [("A", (256, 256)), ("T_softmax_norm", (256, 256))],
}

BLOCKS = {
    "C1D": ["PadInput", "conv1d_nlc"],
    "C2D": ["PadInput", "conv2d_nhwc"],
    "C3D": ["PadInput", "conv3d_ndhwc"],
    "DEP": ["PadInput", "depth_conv2d_nhwc"],
    "DIL": ["PadInput", "conv2d_nhwc"],
    "GMM": ["Z"],
    "GRP": ["PadInput", "conv2d_nhwc"],
    "T2D": ["PadInput", "conv2d_transpose_nhwc"],
    "CBR": ["PaddedInput", "Conv2dOutput", "bias_add", "bn_mul", "bn_add", "compute"],
    "TBG": ["query_T", "value_T", "C"],
    "NRM": ["C", "D"],
    "SFM": ["T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"],
}


@pytest.mark.parametrize("name", PAPER)
def test_paper_shapes_params_and_blocks(name):
    func = wl.get(name)
    assert [(b.name, b.shape, b.dtype) for b in func.params] == [
        (n, s, "float32") for n, s in PAPER_PARAMS[name]
    ]
    assert [b.name for b in func.blocks()] == ["root"] + BLOCKS[name]
    # the output is the last parameter, and the only one written
    assert wl.output_params(func) == [len(func.params) - 1]


def test_conv_block_iterates_spatial_then_reduce_axes_in_tvm_order():
    block = wl.get("C2D").block("conv2d_nhwc")
    assert [(iv.var.name, iv.iter_type) for iv in block.iter_vars] == [
        ("vn", "S"),
        ("vh", "S"),
        ("vw", "S"),
        ("vco", "S"),
        ("vrh", "R"),
        ("vrw", "R"),
        ("vrc", "R"),
    ]
    extents = [iv.dom.extent.value for iv in block.iter_vars]
    assert extents == [1, 112, 112, 64, 7, 7, 3]


def test_pad_stage_is_a_guarded_copy_unless_padding_is_zero():
    padded = wl.get("C2D", h=14, w=14).block("PadInput")
    assert isinstance(padded.body.value, Select)
    assert padded.body.buffer.shape == (1, 20, 20, 3)
    unpadded = wl.get("C2D", h=14, w=14, kernel=1, padding=0).block("PadInput")
    assert isinstance(unpadded.body.value, BufferLoad)


def test_shape_override_and_unknown_keywords():
    func = wl.get("C2D", h=14, w=14)
    assert func.params[-1].shape == (1, 7, 7, 64)
    with pytest.raises(TypeError, match="unknown shape parameter.*'height'.*known: n, h, w"):
        wl.get("C2D", height=14)
    with pytest.raises(KeyError, match="no workload named 'C4D'; known: C1D, C2D"):
        wl.get("C4D")
    assert wl.get("gmm", n=4, m=4, k=4).params[-1].shape == (1, 4, 4)  # case-insensitive


def test_describe_names_the_paper_shape():
    line = wl.describe("C2D")
    assert line.startswith("C2D: 2-D convolution") and "h=224" in line and "\n" not in line


# ----------------------------------------------------------------------------------------
# FLOPs: the TVM anchor's formulas


def test_flops_match_the_tvm_anchor_formulas():
    assert wl.flops("GMM") == 2 * 128 * 128 * 128
    assert wl.flops("C1D") == 2 * 128 * 128 * 3 * 64
    assert wl.flops("C2D") == 2 * 112 * 112 * 64 * 7 * 7 * 3
    assert wl.flops("DEP") == 2 * 112 * 112 * 32 * 9
    assert wl.flops("NRM") == 2 * 256 * 256
    assert wl.flops("GRP") == 2 * 28 * 28 * 128 * 9 * 16
    assert wl.flops("T2D") == 2 * 8 * 8 * 256 * 16 * 512
    assert wl.flops("TBG") == 2 * 12 * 128 * 128 * 64
    assert wl.flops("SFM") == 5 * 256 * 256
    assert wl.flops("CBR") == wl.flops("C2D") + 4 * 112 * 112 * 64
    assert wl.flops("C2D", h=14, w=14) == 2 * 7 * 7 * 64 * 49 * 3


# ----------------------------------------------------------------------------------------
# random arguments


@pytest.mark.parametrize("name", PAPER)
def test_random_args_follow_params_and_seed(name):
    shape = wl.small(name)
    func = wl.get(name, **shape)
    args = wl.random_args(name, seed=3, **shape)
    assert [(a.shape, str(a.dtype)) for a in args] == [(b.shape, b.dtype) for b in func.params]
    assert not args[-1].any()
    for a in args[:-1]:
        assert a.min() >= -1.0 and a.max() < 1.0 and np.unique(a).size > 1
    again = wl.random_args(name, seed=3, **shape)
    other = wl.random_args(name, seed=4, **shape)
    assert all(np.array_equal(a, b) for a, b in zip(args, again))
    assert not np.array_equal(args[0], other[0])
    expected = wl.reference(name, **shape)(*args[:-1])
    assert expected.shape == args[-1].shape and expected.dtype == np.float32


# ----------------------------------------------------------------------------------------
# references against naive loops written from TVM's compute definitions


def _naive_conv2d_nhwc(x, w, stride, padding, dilation=1, groups=1):
    n, h, wd, ci = x.shape
    kh, kw, cig, co = w.shape
    cog = co // groups
    xp = np.pad(x.astype(np.float64), [(0, 0), (padding, padding), (padding, padding), (0, 0)])
    oh = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, oh, ow, co))
    for b, y, x_, c in np.ndindex(n, oh, ow, co):
        for ry, rx, rc in np.ndindex(kh, kw, cig):
            out[b, y, x_, c] += (
                xp[b, y * stride + ry * dilation, x_ * stride + rx * dilation, c // cog * cig + rc]
                * w[ry, rx, rc, c]
            )
    return out


def _naive_conv2d_transpose_tvm(x, w, stride, padding):
    """TVM's formula: flipped kernel over the stride-dilated, padded input."""
    n, h, wd, ci = x.shape
    k, co = w.shape[0], w.shape[3]
    bpad = k - 1 - padding
    edge = -(-bpad // stride)
    border = (stride - bpad % stride) % stride
    xp = np.pad(x.astype(np.float64), [(0, 0), (edge, edge), (edge, edge), (0, 0)])
    oh, ow = (h - 1) * stride - 2 * padding + k, (wd - 1) * stride - 2 * padding + k
    out = np.zeros((n, oh, ow, co))
    for b, y, x_, c in np.ndindex(n, oh, ow, co):
        for rh, rw, rc in np.ndindex(k, k, ci):
            q, r = y + rh + border, x_ + rw + border
            if q % stride == 0 and r % stride == 0:
                out[b, y, x_, c] += xp[b, q // stride, r // stride, rc] * w[k - 1 - rh, k - 1 - rw, rc, c]
    return out


def _check(name, naive, **shape):
    shape = {**wl.small(name), **shape}
    args = wl.random_args(name, seed=1, **shape)
    np.testing.assert_allclose(
        wl.reference(name, **shape)(*args[:-1]), naive(*args[:-1]), rtol=1e-5, atol=1e-5
    )


def test_reference_grouped_strided_conv_matches_naive_loops():
    s = wl.small("GRP")
    _check("GRP", lambda x, w: _naive_conv2d_nhwc(x, w, s["stride"], s["padding"], groups=s["groups"]))


def test_reference_dilated_conv_matches_naive_loops():
    s = wl.small("DIL")
    _check("DIL", lambda x, w: _naive_conv2d_nhwc(x, w, s["stride"], s["padding"], s["dilation"]))


def test_reference_conv1d_and_conv3d_agree_with_conv2d_loops():
    s = wl.small("C1D")
    # a 1-D convolution is a 2-D one over a height-1 image with a height-1 kernel (no h padding)
    args = wl.random_args("C1D", seed=2, **s)
    x, w = args[0][:, None], args[1][None]
    xp = np.pad(x, [(0, 0), (0, 0), (s["padding"], s["padding"]), (0, 0)])
    np.testing.assert_allclose(
        wl.reference("C1D", **s)(*args[:-1]),
        _naive_conv2d_nhwc(xp, w, s["stride"], 0)[:, 0],
        rtol=1e-5,
        atol=1e-5,
    )
    # a 3-D convolution with a depth-1 input and kernel is the 2-D one
    c3 = dict(d=1, h=6, w=6, ci=2, co=3, kernel=3, stride=2, padding=1)
    args = wl.random_args("C3D", seed=2, **c3)
    weight = args[1][1:2]  # the middle depth tap only
    weight3 = np.zeros_like(args[1])
    weight3[1] = weight[0]
    np.testing.assert_allclose(
        wl.reference("C3D", **c3)(args[0], weight3)[:, 0],
        _naive_conv2d_nhwc(args[0][:, 0], weight[0], 2, 1),
        rtol=1e-5,
        atol=1e-5,
    )


def test_reference_depthwise_matches_naive_loops():
    s = wl.small("DEP")
    _check(
        "DEP",
        lambda x, w: _naive_conv2d_nhwc(x, w[0][:, :, None, :], s["stride"], s["padding"], groups=s["c"]),
    )


@pytest.mark.parametrize("kernel,stride,padding", [(4, 2, 1), (3, 2, 0), (4, 3, 2), (3, 1, 1)])
def test_reference_conv2d_transpose_matches_tvm_formula(kernel, stride, padding):
    _check(
        "T2D",
        lambda x, w: _naive_conv2d_transpose_tvm(x, w, stride, padding),
        kernel=kernel,
        stride=stride,
        padding=padding,
    )


def test_reference_elementwise_and_reduction_workloads():
    s = wl.small("CBR")
    data, kernel, bias, offset, scale, _ = wl.random_args("CBR", seed=5, **s)
    conv = _naive_conv2d_nhwc(data, kernel, s["stride"], s["padding"])
    np.testing.assert_allclose(
        wl.reference("CBR", **s)(data, kernel, bias, offset, scale),
        np.maximum((conv + bias) * scale + offset, 0),
        rtol=1e-5,
        atol=1e-5,
    )
    q, v, _ = wl.random_args("TBG", seed=5, **wl.small("TBG"))
    np.testing.assert_allclose(
        wl.reference("TBG", **wl.small("TBG"))(q, v), np.einsum("bihd,bjhd->bhij", q, v), rtol=1e-5, atol=1e-5
    )
    a, _ = wl.random_args("NRM", seed=5, **wl.small("NRM"))
    np.testing.assert_allclose(
        wl.reference("NRM", **wl.small("NRM"))(a), [np.linalg.norm(m) for m in a], rtol=1e-5
    )
    a, _ = wl.random_args("SFM", seed=5, **wl.small("SFM"))
    soft = wl.reference("SFM", **wl.small("SFM"))(a * 50)  # large inputs: max subtraction matters
    np.testing.assert_allclose(soft.sum(axis=1), 1.0, rtol=1e-5)
    assert np.array_equal(soft.argmax(axis=1), a.argmax(axis=1))


# ----------------------------------------------------------------------------------------
# user workloads


def test_register_a_user_workload():
    from workbench.ir.dsl import compute, create_func, placeholder

    def define(factor):
        @wl.register("SCALE", reference=lambda a, /, *, n: a * factor, flops=lambda n: n, small={"n": 4})
        def scale(n=1024):
            """Multiply a vector by a constant."""
            A = placeholder((n,), name="A")
            return create_func([A, compute((n,), lambda i: A[i] * float(factor), name="B")])

        return scale

    define(2.0)
    try:
        # the paper's 12, the built-in variants (GMM-FP16), then user workloads in order
        assert wl.names()[:12] == PAPER and wl.names()[12:] == ["GMM-FP16", "SCALE"]
        assert wl.small("SCALE") == {"n": 4} and wl.flops("SCALE") == 1024
        assert wl.describe("SCALE") == "SCALE: Multiply a vector by a constant. [n=1024]"
        a, b = wl.random_args("SCALE", seed=0, n=4)
        assert wl.get("SCALE", n=4).params[-1].shape == (4,) and not b.any()
        np.testing.assert_allclose(wl.reference("SCALE", n=4)(a), 2 * a)
        define(3.0)  # re-running the notebook cell replaces the definition
        np.testing.assert_allclose(wl.reference("SCALE", n=4)(a), 3 * a)
        assert wl.names().count("SCALE") == 1
    finally:
        wl.unregister("SCALE")
    assert "SCALE" not in wl.names()


def test_register_rejects_paper_names_and_shape_parameters_without_defaults():
    with pytest.raises(ValueError, match="'C2D' is one of the paper's workloads"):
        wl.register("C2D", reference=lambda: None)(lambda n=1: None)
    with pytest.raises(TypeError, match="parameter 'n' .* must be a keyword parameter with a default"):
        wl.register("NODEFAULT", reference=lambda: None)(lambda n: None)
    with pytest.raises(TypeError, match="small shape names unknown parameter"):
        wl.register("BADSMALL", reference=lambda: None, small={"m": 1})(lambda n=1: None)
    with pytest.raises(ValueError, match="one of the paper's workloads"):
        wl.unregister("GMM")
    assert wl.names() == PAPER + ["GMM-FP16"]


# ----------------------------------------------------------------------------------------
# the IR computes what the reference says (python reference executor)


def _run(name, **shape):
    from workbench.codegen import build

    args = wl.random_args(name, seed=0, **shape)
    build(wl.get(name, **shape), target="python")(*args)
    np.testing.assert_allclose(args[-1], wl.reference(name, **shape)(*args[:-1]), rtol=1e-4, atol=1e-4)
    return args[-1]


@pytest.mark.parametrize("name", PAPER)
def test_workload_builds_and_matches_reference_at_small_shape(name):
    out = _run(name, **wl.small(name))
    assert np.abs(out).max() > 0  # the kernel wrote its output


@pytest.mark.parametrize(
    "name,shape",
    [
        ("T2D", dict(h=3, w=2, ci=2, co=2, kernel=4, stride=3, padding=2)),  # border != 0
        ("T2D", dict(h=3, w=3, ci=2, co=2, kernel=3, stride=1, padding=0)),  # no dilation
        ("C2D", dict(h=5, w=7, ci=2, co=3, kernel=1, stride=1, padding=0)),  # unguarded pad stage
        ("GRP", dict(h=5, w=5, ci=4, co=6, kernel=3, stride=1, padding=1, groups=2)),
    ],
)
def test_workload_variants_match_reference(name, shape):
    _run(name, **{**wl.small(name), **shape})


@pytest.mark.slow
def test_gmm_at_paper_shape_matches_reference():
    _run("GMM")
