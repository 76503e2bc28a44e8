"""The schedule a task gets without a record: parallel fused outer loops, vectorized inner loop."""

import numpy as np
import pytest

import workbench as wb
from workbench.graph import Graph, default_schedule
from workbench.graph.executor import MIN_PARALLEL_WORK
from workbench.ir.functor import pre_order
from workbench.ir.stmt import For, ForKind
from workbench.testing import check_trace_roundtrip


def conv_group(batch=1, channels=8, size=6):
    """conv2d (3x3, pad 1) + bias + relu at batch 1: one fused group, blocks pad/conv/add/relu."""
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.add_input("x", (batch, channels, size, size))
    w = g.add_constant("w", rng.standard_normal((channels, channels, 3, 3)).astype("float32"))
    b = g.add_constant("b", rng.standard_normal((channels, 1, 1)).astype("float32"))
    v = g.add_node("conv2d", [x, w], stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    g.set_outputs([g.add_node("relu", [g.add_node("add", [v, b])])])
    (task,) = g.task_list()
    return g, task.func


HASWELL = "llvm -mcpu=haswell -num-cores=2"


def loops(func, kind):
    return [n for n in pre_order(func.body) if isinstance(n, For) and n.kind == kind]


def extent(loop):
    return loop.extent.value


def test_batch_one_kernels_run_in_parallel_and_vectorized():
    _, func = conv_group(channels=16, size=8)
    sch = default_schedule(func, "llvm -num-cores=2")
    par = loops(sch.func, ForKind.PARALLEL)
    vec = loops(sch.func, ForKind.VECTORIZED)
    # the old default parallelized the batch loop (extent 1): nothing ran in parallel. Now the
    # convolution's n, oc / 4 (the register block), y are fused: 32 iterations >= 2 cores x 16
    assert [extent(p) for p in par] == [32]
    # the padded row (10), the convolution's init, update and write-back (8 < 16 lanes: whole)
    assert [extent(v) for v in vec] == [10, 8, 8, 8]
    check_trace_roundtrip(sch)


def test_small_nests_stay_serial():
    """The padding, bias and relu nests (1,600 and 1,024 iterations) are below the parallel
    grain; the convolution (147,456 with its reduction) is above it."""
    _, func = conv_group(channels=16, size=8)
    sch = default_schedule(func, "llvm")
    assert MIN_PARALLEL_WORK == 32768
    text = sch.func.script()
    assert text.count("T.parallel(") == 1 and "for i0, i1, i2 in T.grid(1, 16, 10):" in text


def test_a_strided_read_is_not_vectorized():
    """A dense layer reads W[j, k]: along j, 768 elements apart. Its j loop stays serial inside
    the parallel rows (the k loop innermost, both reads contiguous); the bias add is vectorized."""
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.add_input("x", (1, 64, 96))
    w = g.add_constant("w", rng.standard_normal((96, 96)).astype("float32"))
    b = g.add_constant("b", rng.standard_normal((96,)).astype("float32"))
    g.set_outputs([g.add_node("add", [g.add_node("dense", [x, w]), b])])
    (task,) = g.task_list()
    sch = default_schedule(task.func, "llvm")
    text = sch.func.script()
    dense = text[: text.index('T.block("T_add")')]
    assert "T.parallel(64)" in dense and "for i2, k in T.grid(96, 96):" in dense
    assert [extent(v) for v in loops(sch.func, ForKind.VECTORIZED)] == [16]
    check_trace_roundtrip(sch)
    args = [rng.standard_normal(p.shape).astype("float32") for p in task.func.params]
    ref = args[-1].copy()
    wb.build(wb.Schedule(task.func), target="llvm")(*args[:-1], ref)
    wb.build(sch, target="llvm")(*args)
    np.testing.assert_allclose(args[-1], ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target, lanes", [("llvm -mcpu=haswell", 8), ("llvm -mtriple=aarch64-linux-gnu", 4)])
def test_vector_width_comes_from_the_target(target, lanes):
    _, func = conv_group(channels=4, size=16)  # w = 16: split to the target's lanes
    sch = default_schedule(func, target)
    widths = [extent(v) for v in loops(sch.func, ForKind.VECTORIZED)]
    # conv, add, relu: 16 split by the lanes; the padded row (18): its largest divisor within them
    assert widths[1:] == [lanes] * 3 and widths[0] == max(f for f in range(1, lanes + 1) if 18 % f == 0)
    check_trace_roundtrip(sch)


def test_reduction_loops_move_outside_the_vector_loop():
    _, func = conv_group(channels=16, size=8)
    text = default_schedule(func, "llvm").func.script()
    conv = text[text.index("nn_oc_0_y_fused in T.parallel(32)") :]
    # the output's x loop is vectorized below rc, ry, rx (each lane accumulates its own output),
    # 4 output channels unrolled between them: each vector of input serves 4 accumulators
    order = [
        'T.block("conv2d_init")',
        "for rc, ry, rx in T.grid(16, 3, 3)",
        "for oc_1 in T.unroll(4)",
        "for x in T.vectorized(8)",
        'T.block("conv2d_update")',
        'T.block("conv2d_local")',
    ]
    assert [conv.index(s) for s in order] == sorted(conv.index(s) for s in order)


def test_a_reduction_accumulates_in_a_write_cache_that_takes_the_epilogue():
    """The accumulators are a local tile; its write-back computes bias + relu (reverse-inlined)
    on the way to the output: no intermediate conv2d or add buffer, no pass of their own."""
    _, func = conv_group(channels=16, size=8)
    sch = default_schedule(func, HASWELL)
    text = sch.func.script()
    assert 'conv2d_local = T.alloc_buffer((1, 16, 8, 8), "float32", scope="local")' in text
    assert 'T.block("add")' not in text and 'T.block("T_relu")' not in text
    back = text[text.index('T.block("conv2d_local")') :]
    epilogue = "T_relu[vax0, vax1, vax2, vax3] = T.max(conv2d_local[vax0, vax1, vax2, vax3] + p2[vax1, 0, 0]"
    assert epilogue in back
    notes = wb.graph.explain_default_schedule(func, HASWELL)
    assert notes["conv2d"] == {"parallel": 32, "vectorized": 8, "register_block": 4}
    assert (
        notes["add"]
        == notes["T_relu"]
        == {
            "parallel": "inlined into conv2d's write-back",
            "vectorized": "inlined into conv2d's write-back",
        }
    )
    check_trace_roundtrip(sch)


def test_a_stride_two_convolution_is_vectorized_with_shuffles():
    """ResNet's downsampling: stride 2 reads the padded input 2 elements apart per lane of x.
    The default vectorizes it anyway: the codegen loads the span and deinterleaves it."""
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.add_input("x", (1, 8, 16, 16))
    w = g.add_constant("w", rng.standard_normal((16, 8, 3, 3)).astype("float32"))
    g.set_outputs([g.add_node("conv2d", [x, w], stride=(2, 2), padding=(1, 1), dilation=(1, 1), groups=1)])
    (task,) = g.task_list()
    notes = wb.graph.explain_default_schedule(task.func, HASWELL)
    assert notes["T_conv2d"] == {"parallel": 32, "vectorized": 8, "register_block": 4}
    sch = default_schedule(task.func, HASWELL)
    ir = wb.build(sch, "llvm -mcpu=haswell").source("llvm")
    assert "gather" not in ir and "shufflevector <16 x float>" in ir
    check_trace_roundtrip(sch)
    args = [rng.standard_normal(p.shape).astype("float32") for p in task.func.params]
    ref = args[-1].copy()
    wb.build(wb.Schedule(task.func), target="llvm")(*args[:-1], ref)
    wb.build(sch, target="llvm")(*args)
    np.testing.assert_allclose(args[-1], ref, rtol=1e-4, atol=1e-4)


def test_a_dense_with_its_weight_stored_kn_is_vectorized_along_the_outputs():
    """The importer stores a linear layer's weight (K, N): the output's last axis reads it
    contiguously, 4 rows share each weight vector."""
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.add_input("x", (1, 64, 96))
    w = g.add_constant("w", rng.standard_normal((96, 48)).astype("float32"))  # (K, N)
    b = g.add_constant("b", rng.standard_normal((48,)).astype("float32"))
    g.set_outputs([g.add_node("add", [g.add_node("dense", [x, w], weight_layout="KN"), b])])
    (task,) = g.task_list()
    notes = wb.graph.explain_default_schedule(task.func, HASWELL)
    # rows / 4 (16) and the output's vectors (48 / 8 = 6) fused: 96 >= 2 cores x 16
    assert notes["dense"] == {"parallel": 96, "vectorized": 8, "register_block": 4}
    sch = default_schedule(task.func, HASWELL)
    check_trace_roundtrip(sch)
    args = [rng.standard_normal(p.shape).astype("float32") for p in task.func.params]
    wb.build(sch, target="llvm")(*args)
    np.testing.assert_allclose(args[-1], args[0] @ args[1] + args[2], rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="weight_layout must be 'NK' or 'KN'"):
        g.add_node("dense", [x, w], weight_layout="NCHW")


def test_numerics_match_the_unscheduled_function():
    g, func = conv_group(channels=5, size=7)  # odd sizes: no split divides them
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(p.shape).astype("float32") for p in func.params[:-1]]
    ref = np.zeros(func.params[-1].shape, "float32")
    wb.build(wb.Schedule(func), target="llvm")(*args, ref)
    for target in ("llvm", "llvm -mcpu=haswell"):
        out = np.zeros_like(ref)
        wb.build(default_schedule(func, target), target="llvm")(*args, out)
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_a_refused_step_leaves_a_valid_schedule():
    """A loop of one iteration is neither parallel nor split; the block is left as it is."""
    g = Graph()
    x = g.add_input("x", (1, 1))
    g.set_outputs([g.add_node("relu", [x])])
    (task,) = g.task_list()
    sch = default_schedule(task.func, "llvm")
    assert not loops(sch.func, ForKind.PARALLEL) and not loops(sch.func, ForKind.VECTORIZED)
    check_trace_roundtrip(sch)


def test_explain_says_why_a_block_is_not_parallel_or_vectorized():
    """Without torch: the dense weight's gather, the small-nest grain and the 1-iteration nest
    (a fixed target: 8 float lanes, 2 cores, whatever the host)."""
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.add_input("x", (1, 64, 96))
    w = g.add_constant("w", rng.standard_normal((96, 96)).astype("float32"))
    b = g.add_constant("b", rng.standard_normal((96,)).astype("float32"))
    g.set_outputs([g.add_node("add", [g.add_node("dense", [x, w]), b])])
    (task,) = g.task_list()
    notes = wb.graph.explain_default_schedule(task.func, HASWELL)
    assert notes["dense"]["parallel"] == 64
    assert notes["dense"]["vectorized"].startswith("a gather: p1 moves by 96 elements per lane of ")
    assert notes["T_add"] == {
        "parallel": "below the parallel grain: 6144 iterations < 32768",
        "vectorized": 8,
    }

    g = Graph()
    g.set_outputs([g.add_node("relu", [g.add_input("x", (1, 1))])])
    (task,) = g.task_list()
    (note,) = wb.graph.explain_default_schedule(task.func, HASWELL).values()
    assert note == {
        "parallel": "its outer spatial loops have 1 iteration",
        "vectorized": "the innermost spatial loop's extent 1 has no factor from 2 to 8 lanes",
    }


AVX512 = "llvm -mcpu=skylake-avx512 -num-cores=2"


def channels_last_conv(channels=512, size=7, layout="IHWO"):
    """ResNet's last stage: 3x3 conv (pad 1) + bias + residual + relu, the weight stored as
    the importer stores it, (I, H, W, O), or PyTorch's OIHW."""
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.add_input("x", (1, channels, size, size))
    r = g.add_input("r", (1, channels, size, size))
    w = (rng.standard_normal((channels, channels, 3, 3)) / np.sqrt(9 * channels)).astype("float32")
    wc = g.add_constant("w", w.transpose(1, 2, 3, 0) if layout == "IHWO" else w)
    b = g.add_constant("b", rng.standard_normal((channels, 1, 1)).astype("float32"))
    attrs = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1, weight_layout=layout)
    v = g.add_node("conv2d", [x, wc], **attrs)
    g.set_outputs([g.add_node("relu", [g.add_node("add", [g.add_node("add", [v, b]), r])])])
    (task,) = g.task_list()
    return task.func, g, w, g.constants["b"]


def test_a_channels_last_conv_is_vectorized_over_its_output_channels():
    """7x7 outputs fill 7 of 16 lanes along the rows; with the weight stored (I, H, W, O) the
    512 output channels are the vector (16 lanes), 4 vectors of them by the 7 columns of a row
    unrolled below the reduction (28 accumulators, each weight vector serving 7 outputs), in
    a local tile laid out channels last; its write-back (bias, residual, relu) goes along the
    row. Parallel: 8 tiles of 64 channels x 7 rows."""
    func, _, _, _ = channels_last_conv()
    notes = wb.graph.explain_default_schedule(func, AVX512)
    expected = {"parallel": 56, "vectorized": 16, "register_block": 28, "write_back_vectorized": 7}
    assert notes["conv2d"] == expected
    sch = default_schedule(func, AVX512)
    text = sch.func.script()
    assert 'conv2d_local = T.alloc_buffer((1, 7, 7, 512), "float32", scope="local")' in text
    conv = text[text.index("nn_oc_0_y_fused in T.parallel(56)") :]
    order = [
        'T.block("conv2d_init")',
        "for rc, ry, rx in T.grid(512, 3, 3)",
        "for oc_1 in T.unroll(4)",
        "for x_1 in T.unroll(7)",
        "for oc_2 in T.vectorized(16)",
        'T.block("conv2d_update")',
        "for ax3 in T.vectorized(7)",
        'T.block("conv2d_local")',
    ]
    assert [conv.index(s) for s in order] == sorted(conv.index(s) for s in order)
    assert "conv2d_local[vnn, vy, vx, voc] = conv2d_local[vnn, vy, vx, voc] + " in conv
    assert [extent(v) for v in loops(sch.func, ForKind.VECTORIZED)] == [9, 16, 16, 7]
    check_trace_roundtrip(sch)
    # PyTorch's OIHW: along the channels the weight moves by 4608 elements, a gather per lane;
    # the rows stay the vector, 4 output channels the register block
    oihw, _, _, _ = channels_last_conv(layout="OIHW")
    assert wb.graph.explain_default_schedule(oihw, AVX512)["conv2d"] == {
        "parallel": 128,
        "vectorized": 7,
        "register_block": 4,
    }


@pytest.mark.parametrize("channels, size", [(512, 7), (48, 10)])
def test_a_channels_last_conv_matches_numpy(channels, size):
    """On the host's llvm target: ResNet's 7x7x512 and a shape the tiles do not divide evenly
    (48 channels: 3 vectors of 16, 10 columns: a register block of 5)."""
    func, g, w, b = channels_last_conv(channels, size)
    rng = np.random.default_rng(1)
    x, r = (rng.standard_normal((1, channels, size, size)).astype("float32") for _ in range(2))
    xp = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))  # c, y, x, i, j
    ref = np.maximum(np.einsum("cyxij,ocij->oyx", windows, w, optimize=True)[None] + b + r, 0)
    assert "register_block" in wb.graph.explain_default_schedule(func, "llvm")["conv2d"]
    (out,) = wb.build_model(g, "llvm")(x, r)  # each task from default_schedule(func, "llvm")
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)


def test_conv2d_weight_layout_is_checked():
    g = Graph()
    x = g.add_input("x", (1, 8, 6, 6))
    w = g.add_constant("w", np.zeros((8, 3, 3, 4), "float32"))
    with pytest.raises(ValueError, match="weight_layout must be 'OIHW' or 'IHWO'"):
        g.add_node("conv2d", [x, w], weight_layout="HWIO")
    with pytest.raises(ValueError, match="do not match"):
        g.add_node("conv2d", [x, w], weight_layout="OIHW")  # (8, 3, 3, 4) read as OIHW: 3 inputs
    assert g.values[g.add_node("conv2d", [x, w], weight_layout="IHWO")][0] == (1, 4, 4, 4)
