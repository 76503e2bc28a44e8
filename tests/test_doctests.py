"""The ``>>>`` examples in the public docstrings run, so the API reference (generated from these
docstrings) never shows an example that no longer works.

An example may use, without defining them, the names a reader has at hand after the README's
tour: ``wb``, ``np``, ``func`` (a 64x64x64 matmul, block "C"), ``sch`` (a fresh ``Schedule`` of
it), ``a, b, c`` (its float32 arrays), ``kernel`` (``func`` built for "llvm") and ``display``
(IPython's, as in a notebook); the module's
own names too, as doctest gives them. Options: ELLIPSIS and NORMALIZE_WHITESPACE.
"""

import doctest
import importlib
import pkgutil

import numpy as np
import pytest

import workbench as wb
import kernel_ext

#: optional extras a module may need; without them its examples are skipped, saying which
OPTIONAL = {
    "pycuda",
    "dask",
    "distributed",
    "cuda",
    "IPython",
    "ipywidgets",
    "plotly",
    "anywidget",
    "graphviz",
}


def public_modules() -> list[str]:
    names = []
    for package in (wb, kernel_ext):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                names.append(info.name)
    return sorted(names)


@pytest.fixture(scope="module")
def tour():
    """What the README's tour leaves a reader with (built once per module)."""
    A = wb.placeholder((64, 64), "float32", name="A")
    B = wb.placeholder((64, 64), "float32", name="B")
    k = wb.reduce_axis(64, name="k")
    C = wb.compute((64, 64), lambda i, j: wb.sum(A[i, k] * B[k, j], axis=k), name="C")
    func = wb.create_func([A, B, C], name="matmul")
    rng = np.random.default_rng(0)
    a, b = (rng.random((64, 64), dtype=np.float32) for _ in range(2))
    from IPython.display import display  # a builtin in notebooks

    return {
        "wb": wb,
        "np": np,
        "display": display,
        "func": func,
        "a": a,
        "b": b,
        "c": np.zeros((64, 64), np.float32),
        "kernel": wb.build(func, target="llvm"),
    }


@pytest.mark.parametrize("name", public_modules())
def test_docstring_examples(name, tour):
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in OPTIONAL:
            pytest.skip(f"{name} needs {exc.name} (an optional extra)")
        raise
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, name) if t.examples]
    if not tests:
        pytest.skip("no examples")
    report: list[str] = []
    for test in tests:
        test.globs = {**tour, "sch": wb.Schedule(tour["func"], seed=0), **test.globs}
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
