"""Tuning functions of symbolic shape at a representative size (``shape_hint``): the records are
stored under the symbolic function and its best schedule runs at any size."""

import numpy as np
import pytest

import workbench as wb
from workbench.tune import EvolutionarySearch, tune
from workbench.tune.symbolic import generalize_trace, specialize

SIZES = (1, 7, 33, 130)


def matmul():
    n = wb.var("n")
    A = wb.placeholder((n, 32), name="A")
    W = wb.placeholder((32, 16), name="W")
    k = wb.reduce_axis(32, "k")
    C = wb.compute((n, 16), lambda i, j: wb.sum(A[i, k] * W[k, j], axis=k), name="C")
    return wb.create_func([A, W, C], name="mm_n")


def softmax():
    n = wb.var("n")
    S = wb.placeholder((n, 24), name="S")
    k1, k2 = wb.reduce_axis(24, "k1"), wb.reduce_axis(24, "k2")
    M = wb.compute((n,), lambda i: wb.max(S[i, k1], axis=k1), name="M")
    E = wb.compute((n, 24), lambda i, j: wb.exp(S[i, j] - M[i]), name="E")
    Z = wb.compute((n,), lambda i: wb.sum(E[i, k2], axis=k2), name="Z")
    O = wb.compute((n, 24), lambda i, j: E[i, j] / Z[i], name="O")
    return wb.create_func([S, O], name="softmax_n")


def layer_norm():
    n = wb.var("n")
    X = wb.placeholder((n, 32), name="X")
    k1, k2 = wb.reduce_axis(32, "k1"), wb.reduce_axis(32, "k2")
    total = wb.compute((n,), lambda i: wb.sum(X[i, k1], axis=k1), name="total")
    D = wb.compute((n, 32), lambda i, j: X[i, j] - total[i] / 32, name="D")
    sq = wb.compute((n,), lambda i: wb.sum(D[i, k2] * D[i, k2], axis=k2), name="sq")
    Y = wb.compute((n, 32), lambda i, j: D[i, j] / wb.sqrt(sq[i] / 32 + 1e-5), name="Y")
    return wb.create_func([X, Y], name="layer_norm_n")


def numpy_of(name, *arrays):
    if name == "mm_n":
        return arrays[0] @ arrays[1]
    x = arrays[0]
    if name == "softmax_n":
        e = np.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)
    d = x - x.mean(1, keepdims=True)
    return d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5)


def inputs(name, n):
    rng = np.random.default_rng(n)
    if name == "mm_n":
        return [rng.random((n, 32), "float32"), rng.random((32, 16), "float32")], (n, 16)
    cols = 24 if name == "softmax_n" else 32
    return [rng.random((n, cols), "float32")], (n, cols)


def test_specialize_substitutes_the_sizes():
    f = specialize(matmul(), {"n": 64})
    assert not f.is_symbolic and f.params[0].shape == (64, 32)
    assert "for i, j, k in T.grid(64, 16, 32):" in str(f)
    with pytest.raises(ValueError, match="shape_hint gives no size for n of mm_n"):
        specialize(matmul(), {"m": 3})
    with pytest.raises(ValueError, match="must be a positive int"):
        specialize(matmul(), {"n": 0})


def test_a_trace_drawn_at_one_size_generalizes_to_the_symbolic_function():
    f = matmul()
    sch = wb.Schedule(specialize(f, {"n": 64}))
    i, j, _ = sch.get_loops("C")
    t = sch.sample_perfect_tile(i, n=3, decision=[4, 2, 8])
    io, _, ii = sch.split(i, factors=t)
    sch.parallel(io)
    sch.vectorize(sch.split(j, factors=sch.sample_perfect_tile(j, n=2, decision=[2, 8]))[1])
    trace = generalize_trace(sch.trace, f)
    text = str(trace)
    assert "sample_perfect_tile" in text  # j has a constant extent: sampled as ever
    assert "factors=[None, 2, 8]" in text  # i's tiles drawn at n = 64: the outer one is None
    gen = wb.Schedule(f)
    trace.apply_to_schedule(gen)
    assert "T.parallel((n + 15) // 16)" in str(gen.func)
    kernel = wb.build(gen, target="llvm")
    for n in SIZES:
        arrays, shape = inputs("mm_n", n)
        out = np.empty(shape, "float32")
        kernel(*arrays, out)
        np.testing.assert_allclose(out, numpy_of("mm_n", *arrays), rtol=1e-5)


@pytest.mark.parametrize("make", [matmul, softmax, layer_norm])
def test_tuned_at_one_size_runs_at_others(make, tmp_path):
    f = make()
    summaries = []
    db = tune(
        f,
        trials=2,
        num_trials_per_iter=2,
        database=str(tmp_path / "db.jsonl"),
        shape_hint={"n": 64},
        strategy=EvolutionarySearch(population_size=4, num_iters=1),
        baseline=False,
        callbacks=[type("S", (), {"on_end": lambda self, s: summaries.append(s)})()],
    )
    best = db.best(f)  # the symbolic function's own records
    assert best is not None and best.ok and best.meta["shape_hint"] == {"n": 64}
    assert "measured at n=64; the schedule applies to any size" in str(summaries[0])
    kernel = wb.build(best.schedule(), target="llvm")
    for n in SIZES:
        arrays, shape = inputs(f.name, n)
        out = np.empty(shape, "float32")
        kernel(*arrays, out)
        np.testing.assert_allclose(out, numpy_of(f.name, *arrays), rtol=1e-4, atol=1e-5)


def test_a_symbolic_function_without_a_hint_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"mm_n has a symbolic shape \(size variables n\): pass shape_hint"):
        tune(matmul(), trials=1, database=str(tmp_path / "db.jsonl"))
    n = wb.var("n")
    X = wb.placeholder((8, 8), name="X")
    static = wb.create_func([X, wb.compute((8, 8), lambda i, j: X[i, j] + 1, name="Y")])
    del n
    with pytest.raises(ValueError, match="shape_hint is for functions of symbolic shape"):
        tune(static, trials=1, database=str(tmp_path / "db.jsonl"), shape_hint={"n": 4})
