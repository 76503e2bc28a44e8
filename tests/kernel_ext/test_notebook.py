"""Executes notebooks/01_explore_matmul.ipynb through nbclient with a tiny tuning budget."""

import pathlib

import pytest

nbformat = pytest.importorskip("nbformat", reason="the jupyter extra is not installed")
nbclient = pytest.importorskip("nbclient", reason="the jupyter extra is not installed")
pytest.importorskip("ipykernel", reason="the jupyter extra is not installed")

NOTEBOOK = pathlib.Path(__file__).parents[2] / "notebooks" / "01_explore_matmul.ipynb"


def _outputs(cell) -> str:
    """Every text and HTML output of a cell, joined (what a reader would see)."""
    parts = []
    for out in cell.get("outputs", []):
        parts.append(out.get("text", ""))
        data = out.get("data", {})
        parts += [data.get("text/plain", ""), data.get("text/html", "")]
    return "\n".join(parts)


def _cell(nb, needle: str):
    return next(c for c in nb.cells if c.cell_type == "code" and needle in c.source)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("WB_NOTEBOOK_TRIALS", "4")  # the kernel inherits the environment
    nb = nbformat.read(NOTEBOOK, as_version=4)
    workdir = tmp_path_factory.mktemp("notebook")
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    )
    try:
        client.execute()
    finally:
        mp.undo()
    return nb


def test_every_cell_runs_without_error(executed):
    errors = [
        o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors, errors[0]["evalue"] if errors else ""


def test_widgets_come_with_static_fallbacks(executed):
    stepper = _cell(executed, "%%schedule GMM n=64 m=64 k=64\nb = sch")
    data = stepper.outputs[-1]["data"]
    assert "application/vnd.jupyter.widget-view+json" in data and "wb-stepper" in data["text/html"]
    assert "T.parallel(8)" in _outputs(stepper) and "T.vectorized(16)" in _outputs(stepper)
    panel = _cell(executed, "panel = PinPanel(")
    assert "wb-pin-panel" in _outputs(panel)


def test_the_mistake_is_shown_at_its_step(executed):
    out = _outputs(_cell(executed, "sch.vectorize(i)"))
    assert "ScheduleError at step 4" in out and "no longer exists" in out


def test_tuning_respects_the_pin_and_fills_the_tree(executed):
    out = _outputs(_cell(executed, "programs measured"))
    assert "4 programs measured; their j tilings: ['[4, 1, 1, 16]']" in out
    tree = _outputs(_cell(executed, "DecisionTree.from_database"))
    assert "4 programs" in tree and ("<svg" in tree or "wb-decision-tree-fallback" in tree)
    assert "best:" in _outputs(_cell(executed, "best = db.best"))
