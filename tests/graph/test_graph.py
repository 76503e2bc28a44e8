"""The graph layer without PyTorch: operators, fusion, task dedup, executor, tune_model."""

import sys

import numpy as np
import pytest

import workbench as wb
from workbench.graph import Graph
from workbench.graph.executor import default_schedule
from workbench.ir.structural import structural_equal
from workbench.tune import MeasureResult
from workbench.tune.measure import MeasureConfig
from workbench.tune.runner import Runner


def conv_net(blocks=2):
    """x -> [conv(8->8, 3x3) + bias + relu] * blocks -> global average pool -> dense."""
    rng = np.random.default_rng(0)
    g = Graph()
    v = g.add_input("x", (1, 8, 6, 6))
    for k in range(blocks):
        w = g.add_constant(f"w{k}", rng.standard_normal((8, 8, 3, 3)).astype("float32") * 0.2)
        b = g.add_constant(f"b{k}", rng.standard_normal((8, 1, 1)).astype("float32"))
        v = g.add_node("conv2d", [v, w], stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
        v = g.add_node("add", [v, b])
        v = g.add_node("relu", [v])
    v = g.add_node("adaptive_avg_pool2d", [v], output_size=(1, 1))
    v = g.add_node("reshape", [v], shape=(1, 8))
    fc = g.add_constant("fc", rng.standard_normal((3, 8)).astype("float32"))
    g.set_outputs([g.add_node("dense", [v, fc])])
    return g


def numpy_conv_net(g, x):
    c = g.constants
    for k in range(sum(n.op == "conv2d" for n in g.nodes)):
        w, b = c[f"w{k}"], c[f"b{k}"]
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, 8, 6, 6))
        for ry in range(3):
            for rx in range(3):
                out += np.einsum("nchw,oc->nohw", xp[:, :, ry : ry + 6, rx : rx + 6], w[:, :, ry, rx])
        x = np.maximum(out + b, 0)
    return x.mean(axis=(2, 3)) @ c["fc"].T


def test_import_workbench_does_not_import_torch():
    assert "workbench.graph" in sys.modules
    import subprocess

    code = "import sys, workbench; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_conv_bias_relu_is_one_group_and_repeats_are_one_task():
    g = conv_net(blocks=2)
    groups = g.fuse()
    assert [grp.name for grp in groups] == [
        "fused_conv2d_add_relu",
        "fused_conv2d_add_relu",
        "fused_adaptive_avg_pool2d",
        "fused_dense",
    ]
    tasks = g.tasks()
    assert [(f.name, w) for f, w in tasks] == [
        ("fused_conv2d_add_relu", 2),
        ("fused_adaptive_avg_pool2d", 1),
        ("fused_dense", 1),
    ]
    # the key is the database's: the two groups are one workload there
    f = tasks[0][0]
    assert groups[0].key == groups[1].key == wb.structural_hash(f, buffer_names=False)
    text = str(g)
    assert "conv2d(%x, $w0, stride=(1, 1)" in text and "group 0: fused_conv2d_add_relu" in text
    assert "4 fused groups, 3 distinct tasks" in text


def test_a_value_read_twice_ends_its_group():
    g = Graph()
    x = g.add_input("x", (4, 4))
    w = g.add_constant("w", np.eye(4, dtype="float32"))
    y = g.add_node("dense", [x, w])
    a = g.add_node("relu", [y])
    b = g.add_node("sigmoid", [y])  # y has two readers: neither fuses into the dense
    g.set_outputs([g.add_node("add", [a, b])])
    # the add joins its first operand's group, which then runs after the sigmoid it reads
    assert [grp.name for grp in g.fuse()] == ["fused_dense", "fused_sigmoid", "fused_relu_add"]
    model = wb.build_model(g)
    xv = np.random.default_rng(1).standard_normal((4, 4)).astype("float32")
    (out,) = model(xv)
    np.testing.assert_allclose(out, np.maximum(xv, 0) + 1 / (1 + np.exp(-xv)), rtol=1e-5, atol=1e-6)


def test_executor_matches_numpy_and_times():
    g = conv_net(blocks=2)
    model = wb.build_model(g, target="llvm")
    x = np.random.default_rng(2).standard_normal((1, 8, 6, 6)).astype("float32")
    (out,) = model(x)
    np.testing.assert_allclose(out, numpy_conv_net(g, x), rtol=1e-4, atol=1e-4)
    assert len(model.steps) == 4 and len(model.kernels) == 3
    assert model.tuned == [False, False, False]
    assert float(model.time(x, number=1, repeat=1)) > 0
    # number sized from a median of single runs: min_repeat_ms of work per repeat
    t = model.time(x, repeat=2, min_repeat_ms=2.0)
    assert t.number * t > 0 and len(t.samples) == 2
    groups = model.time_groups(x, runs=5)  # in-run medians, one per group
    assert len(groups) == len(g.groups) == 4 and all(v > 0 for v in groups)
    np.testing.assert_allclose(model(x)[0], out)  # timing ran on the inputs in place
    with pytest.raises(ValueError, match="input 'x' has shape"):
        model(np.zeros((1, 8, 5, 5), "float32"))


def test_operators_against_numpy():
    rng = np.random.default_rng(3)
    g = Graph()
    x = g.add_input("x", (2, 3, 5))
    s = g.add_node("softmax", [x], axis=1)
    t = g.add_node("transpose", [s], perm=(0, 2, 1))
    ln_w = g.add_constant("ln_w", rng.standard_normal(3).astype("float32"))
    ln = g.add_node("layer_norm", [t, ln_w], dims=1, eps=1e-5)
    c = g.add_node("concat", [ln, t], axis=2)
    m = g.add_node("matmul", [c, g.add_node("transpose", [c], perm=(0, 2, 1))])
    g.set_outputs([g.add_node("gelu", [m])])
    xv = rng.standard_normal((2, 3, 5)).astype("float32")
    (out,) = wb.build_model(g)(xv)

    e = np.exp(xv - xv.max(1, keepdims=True))
    sv = (e / e.sum(1, keepdims=True)).transpose(0, 2, 1)
    lnv = (sv - sv.mean(-1, keepdims=True)) / np.sqrt(sv.var(-1, keepdims=True) + 1e-5) * g.constants[ln_w]
    cv = np.concatenate([lnv, sv], axis=2)
    mv = cv @ cv.transpose(0, 2, 1)
    from math import erf

    ref = mv * 0.5 * (1 + np.vectorize(erf)(mv / np.sqrt(2)))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_tune_model_writes_records_and_build_model_uses_them(tmp_path):
    g = conv_net(blocks=1)
    path = str(tmp_path / "model.sqlite")
    db = wb.tune_model(
        g, target="llvm", trials=3, database=path, strategy="replay_trace", cost_model="random", seed=0
    )
    tasks = g.task_list()
    # the budget is shared: each of the three tasks got one trial
    assert [len(db.records(t.func, "llvm")) for t in tasks] == [1, 1, 1]
    model = wb.build_model(g, target="llvm", database=path)  # reopened from the file
    assert all(model.tuned)
    conv = tasks[0]
    assert model.records[0].trace_hash == db.best(conv.func, "llvm").trace_hash
    assert "3 of 3 tasks from the database" in model.report()
    x = np.random.default_rng(4).standard_normal((1, 8, 6, 6)).astype("float32")
    np.testing.assert_allclose(model(x)[0], numpy_conv_net(g, x), rtol=1e-4, atol=1e-4)


class DefaultIsFastest(Runner):
    """Measures nothing: a task's default schedule takes 1 ms, any other candidate 5 ms."""

    def __init__(self, graph):
        self.config = MeasureConfig(remeasure_busy=False, final_top_k=0)
        self.defaults = [default_schedule(t.func, "llvm").func for t in graph.task_list()]
        self.first_batches: list = []  # per batch: whether its first candidate was a default

    def measure(self, inputs, config=None):
        fast = [any(structural_equal(i.func, d) for d in self.defaults) for i in inputs]
        self.first_batches.append(fast)
        return [MeasureResult("ok", [1e-3 if f else 5e-3] * 3, load=0.0) for f in fast]

    def current_load(self):
        return 0.0


def test_tune_model_measures_each_default_schedule_first_and_keeps_it_when_fastest(tmp_path):
    g = conv_net(blocks=1)
    runner = DefaultIsFastest(g)
    db = wb.tune_model(
        g, trials=9, database=str(tmp_path / "m.sqlite"), runner=runner, strategy="replay_trace", seed=0
    )
    # each task's first batch starts with its default schedule, measured once in the session
    assert [b[0] for b in runner.first_batches[:3]] == [True, True, True]
    assert sum(map(sum, runner.first_batches)) == 3
    model = wb.build_model(g, target="llvm", database=db)
    for task, rec in zip(g.task_list(), model.records):
        assert rec is not None and rec.latency == pytest.approx(1e-3)
        assert structural_equal(rec.schedule().func, default_schedule(task.func, "llvm").func)
    x = np.random.default_rng(5).standard_normal((1, 8, 6, 6)).astype("float32")
    np.testing.assert_allclose(model(x)[0], numpy_conv_net(g, x), rtol=1e-4, atol=1e-4)
    # off: the search's own candidates only
    runner2 = DefaultIsFastest(g)
    wb.tune_model(
        g,
        trials=6,
        database=str(tmp_path / "n.sqlite"),
        runner=runner2,
        strategy="replay_trace",
        seed=0,
        measure_defaults=False,
    )
    assert sum(map(sum, runner2.first_batches)) == 0


def test_initial_schedules_must_schedule_the_tasks_function():
    g = conv_net(blocks=1)
    conv, other = g.task_list()[0].func, g.task_list()[1].func
    with pytest.raises(TypeError, match=r"initial_schedules\[0\] is a str"):
        wb.tune.TuneTask(conv, initial_schedules=("split",))
    with pytest.raises(ValueError, match=r"initial_schedules\[0\] schedules another function"):
        wb.tune.TuneTask(conv, initial_schedules=(wb.Schedule(other),))
