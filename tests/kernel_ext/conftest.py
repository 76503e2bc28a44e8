"""Fixtures for the Jupyter layer: skipped as a whole without the jupyter extra."""

import pytest

for _module in ("IPython", "ipywidgets", "plotly", "anywidget", "graphviz"):
    pytest.importorskip(
        _module,
        reason=f'the jupyter extra is not installed ({_module} is missing: pip install -e ".[jupyter]")',
    )

import workbench as wb  # noqa: E402

SMALL_GMM = dict(n=16, m=16, k=16)


@pytest.fixture
def gmm():
    return wb.workloads.get("GMM", **SMALL_GMM)


def tiled(func, seed=0):
    """A small probabilistic schedule of GMM: two sampled tilings, a sampled unroll step."""
    sch = wb.Schedule(func, seed=seed)
    b = sch.get_block("Z")
    _b, i, j, k = sch.get_loops(b)
    ti = sch.sample_perfect_tile(i, n=2, max_innermost_factor=8)
    io, ii = sch.split(i, factors=ti)
    tj = sch.sample_perfect_tile(ii, n=2, max_innermost_factor=4)
    sch.split(ii, factors=tj)
    sch.reorder(io, j)
    unroll = sch.sample_categorical(candidates=[0, 16, 64], probs=[0.5, 0.25, 0.25])
    sch.annotate(b, "meta_schedule.unroll_explicit", unroll)
    return sch


@pytest.fixture
def space(gmm):
    return tiled(gmm)


@pytest.fixture
def ip():
    """An IPython shell with the extension loaded (no kernel: display goes nowhere)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "kernel_ext")
    yield shell
    shell.user_ns.pop("sch", None)
