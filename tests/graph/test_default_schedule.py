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
    # convolution's n, oc, y are fused: 128 iterations >= 2 cores x 16
    assert [extent(p) for p in par] == [128]
    # the innermost spatial loop of every block is vectorized whole (10 and 8 < 16 lanes)
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
    conv = text[text.index("nn_oc_y_fused in T.parallel(128)") :]
    # the output's x loop is vectorized below rc, ry, rx: each lane accumulates its own output
    assert conv.index("for rc, ry, rx in T.grid(16, 3, 3)") < conv.index("for x in T.vectorized(8)")
    assert conv.index("for x in T.vectorized(8)") < conv.index('T.block("conv2d")')


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


HASWELL = "llvm -mcpu=haswell -num-cores=2"


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
