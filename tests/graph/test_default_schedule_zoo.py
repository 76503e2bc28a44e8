"""The default schedule over every task of the zoo's full-size models (batch 1): which blocks get
a parallel and a vectorized loop, and why the others do not; numerics of the kinds of operator
they hold (stride 2, 7x7, depthwise, dense, pooling) against PyTorch."""

import numpy as np
import pytest

import workbench as wb
from workbench.graph import Graph, default_schedule, explain_default_schedule
from workbench.ir.functor import pre_order
from workbench.ir.stmt import For, ForKind

torch = pytest.importorskip(
    "torch", reason="PyTorch is the optional extra 'torch' (pip install torch==2.13.0)"
)
zoo = pytest.importorskip("workbench.graph.zoo")
F = torch.nn.functional

# the block that does a task's work (a group's first operator), by the op that anchors it
ANCHOR_BLOCK = {
    "conv2d": "conv2d",
    "dense": "dense",
    "matmul": "T_matmul",
    "max_pool2d": "T_max_pool2d",
    "adaptive_avg_pool2d": "T_adaptive_avg_pool2d_sum",
    "softmax": "T_softmax_exp",
    "layer_norm": "T_layer_norm",
    "transpose": "T_transpose",
}


@pytest.fixture(scope="module", params=["resnet18", "mobilenet_v2", "bert_layer"])
def model(request):
    graph = wb.from_torch(*zoo.get(request.param))
    # each task with the attributes of its first (anchor) operator, from any group that runs it
    tasks = graph.task_list()  # sets each group's task index
    first = {grp.task: grp.nodes[0] for grp in graph.groups}
    return request.param, [
        (t, first[k], explain_default_schedule(t.func, "llvm")) for k, t in enumerate(tasks)
    ]


def kinds(func, kind):
    return [int(n.extent.value) for n in pre_order(func.body) if isinstance(n, For) and n.kind == kind]


def test_every_block_is_parallel_and_vectorized_or_says_why(model):
    _, tasks = model
    for task, _, notes in tasks:
        for block, note in notes.items():
            par, vec = note["parallel"], note["vectorized"]
            assert isinstance(par, int) or par.startswith(("below the parallel grain: ", "inlined into ")), (
                task.name,
                block,
                par,
            )
            assert isinstance(vec, int) or vec.startswith(
                ("a gather: ", "the innermost spatial loop's extent 1 ", "inlined into ")
            ), (task.name, block, vec)
        # the notes describe the schedule default_schedule builds, loop for loop (a tiled
        # reduction's vector width is that of its init, update and write-back loops)
        func = default_schedule(task.func, "llvm").func
        assert sorted(kinds(func, ForKind.PARALLEL)) == sorted(
            n["parallel"] for n in notes.values() if isinstance(n["parallel"], int)
        )
        assert set(kinds(func, ForKind.VECTORIZED)) == {
            n["vectorized"] for n in notes.values() if isinstance(n["vectorized"], int)
        } | {n["write_back_vectorized"] for n in notes.values() if "write_back_vectorized" in n}


def test_the_work_of_each_task_runs_in_parallel(model):
    """Every task's anchor block has a parallel loop, except ResNet-18's global average pool
    (512 x 7 x 7: below the grain, a few microseconds)."""
    name, tasks = model
    serial = []
    for task, node, notes in tasks:
        own = [b for b, n in notes.items() if not str(n["parallel"]).startswith("inlined into ")]
        block = ANCHOR_BLOCK.get(node.op) if ANCHOR_BLOCK.get(node.op) in notes else own[-1]
        if not isinstance(notes[block]["parallel"], int):
            serial.append((task.name, notes[block]["parallel"]))
    expected = {
        "resnet18": [("fused_adaptive_avg_pool2d", "below the parallel grain: 25088 iterations < 32768")],
        "mobilenet_v2": [],
        "bert_layer": [],
    }
    assert serial == expected[name]


def test_which_anchor_blocks_are_vectorized_and_why_not(model):
    """Every convolution (stride 1 and 2, 3x3, 1x1, 7x7, depthwise), dense layer and pooling is
    vectorized: a stride-2 read is a wide load and a shuffle, a dense weight is stored (K, N)
    and a convolution's (I, H, W, O) at import. Each is tiled with its reduction outside the
    vector loop. A convolution that is not depthwise is vectorized over its output channels
    (16 lanes, wherever the output's rows give no more), with a register block of up to 4
    channel vectors by 7 columns, its write-back along the rows; a depthwise one (whose input
    depends on the output channel) along its rows without a register block. Dense layers get
    a register block of 4 rows, except the classifiers' single row, poolings none. What is
    not vectorized is softmax's, layer norm's and average pooling's sums, which reduce along
    the innermost axis (a vector over it needs rfactor: a tuner's choice)."""
    name, tasks = model
    for task, node, notes in tasks:
        if node.op not in ("conv2d", "dense", "max_pool2d"):
            continue
        note = notes[ANCHOR_BLOCK[node.op]]
        assert isinstance(note["vectorized"], int) and note["vectorized"] >= 7, (task.name, note)
        depthwise = node.op == "conv2d" and node.attrs["groups"] > 1
        out = [int(getattr(d, "value", d)) for d in task.func.params[-1].shape]
        if node.op == "conv2d" and not depthwise:
            assert node.attrs["weight_layout"] == "IHWO"
            channels, columns = out[1], out[-1]
            lanes = max(f for f in range(1, 17) if channels % f == 0)
            row_lanes = max(f for f in range(1, 17) if columns % f == 0)
            if lanes >= row_lanes:  # along the channels: a block of channel vectors x columns
                deep = max(f for f in range(1, 5) if channels // lanes % f == 0)
                cols = max(f for f in range(1, 8) if columns % f == 0)
                assert (note["vectorized"], note["register_block"]) == (lanes, deep * cols), (task.name, note)
                assert note.get("write_back_vectorized", lanes) == cols, (task.name, note)
            else:  # along the rows, 4 output channels at once
                assert (note["vectorized"], note["register_block"]) == (row_lanes, 4), (task.name, note)
            continue
        rows = out[-2]
        # a dense layer's rows: BERT's 128 tokens, not the classifier's single row
        blocked = node.op == "dense" and rows % 4 == 0
        assert note.get("register_block", 1) == (4 if blocked else 1), (task.name, node.attrs, note)
    if name == "bert_layer":
        reductions = {t.name: n for t, _, n in tasks if t.name in ("fused_softmax", "fused_layer_norm")}
        for block in ("T_softmax_max", "T_softmax_sum"):
            assert "moves by 128 elements per lane" in reductions["fused_softmax"][block]["vectorized"]
        assert "moves by 768 elements" in reductions["fused_layer_norm"]["T_layer_norm_sum"]["vectorized"]
        assert reductions["fused_softmax"]["T_softmax_exp"]["vectorized"] == 16


def one_op(op, x_shape, weight=None, **attrs):
    rng = np.random.default_rng(0)
    g = Graph()
    inputs = [g.add_input("x", x_shape)]
    if weight is not None:
        inputs.append(g.add_constant("w", rng.standard_normal(weight).astype("float32")))
    g.set_outputs([g.add_node(op, inputs, **attrs)])
    (task,) = g.task_list()
    return g, task.func


@pytest.mark.parametrize(
    "op, x_shape, weight, attrs, reference",
    [
        # ResNet's stem: 7x7, stride 2, padding 3 (parallel, vectorized with shuffles)
        (
            "conv2d",
            (1, 3, 64, 64),
            (16, 3, 7, 7),
            dict(stride=(2, 2), padding=(3, 3), dilation=(1, 1), groups=1),
            lambda x, w: F.conv2d(x, w, stride=2, padding=3),
        ),
        # a depthwise 3x3 at stride 2 and one at stride 1 (vectorized along x)
        (
            "conv2d",
            (1, 32, 40, 40),
            (32, 1, 3, 3),
            dict(stride=(2, 2), padding=(1, 1), dilation=(1, 1), groups=32),
            lambda x, w: F.conv2d(x, w, stride=2, padding=1, groups=32),
        ),
        (
            "conv2d",
            (1, 32, 40, 40),
            (32, 1, 3, 3),
            dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=32),
            lambda x, w: F.conv2d(x, w, stride=1, padding=1, groups=32),
        ),
        ("dense", (1, 128, 96), (96, 96), {}, lambda x, w: F.linear(x, w)),
        ("dense", (1, 128, 96), (96, 64), dict(weight_layout="KN"), lambda x, w: x @ w),
        (
            "max_pool2d",
            (1, 16, 64, 64),
            None,
            dict(kernel=(3, 3), stride=(2, 2), padding=(1, 1)),
            lambda x: F.max_pool2d(x, 3, 2, 1),
        ),
    ],
    ids=["conv7x7s2", "depthwise_s2", "depthwise_s1", "dense", "dense_kn", "maxpool_s2"],
)
def test_default_schedules_match_pytorch(op, x_shape, weight, attrs, reference):
    g, func = one_op(op, x_shape, weight, **attrs)
    sch = default_schedule(func, "llvm -num-cores=2")
    assert kinds(sch.func, ForKind.PARALLEL), sch.func.script()  # above the grain: parallel
    x = np.random.default_rng(1).standard_normal(x_shape).astype("float32")
    args = [x] + ([g.constants["w"]] if weight is not None else [])
    out = np.zeros(func.params[-1].shape, "float32")
    wb.build(sch, target="llvm")(*args, out)
    with torch.no_grad():
        ref = reference(*map(torch.from_numpy, args)).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
