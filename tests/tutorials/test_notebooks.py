"""Executes every lesson of tutorials/ and notebooks 02-07 through nbclient with a tiny budget
(``WB_NOTEBOOK_TRIALS=2``): no cell may fail, every exercise cell shows its feedback, and each
notebook shows what it is about. Notebook 01 has its own test (tests/kernel_ext/test_notebook.py).
"""

import pathlib
import re

import pytest

nbformat = pytest.importorskip("nbformat", reason="the jupyter extra is not installed")
nbclient = pytest.importorskip("nbclient", reason="the jupyter extra is not installed")
pytest.importorskip("ipykernel", reason="the jupyter extra is not installed")
pytest.importorskip("plotly", reason="the jupyter extra is not installed")

ROOT = pathlib.Path(__file__).parents[2]
LESSONS = sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.ipynb"))
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb") if not p.name.startswith("01_"))

# what a reader must see in each notebook's outputs (beyond "no cell failed")
EXPECTED = {
    "01_ir_and_loop_nests": ["wb-stepper"],
    # the roofline: measured peak and bandwidth, each schedule placed against the roof
    "02_loop_transformations": [
        "order i, k, j:",
        "vector width 16:",
        "thread(s):",
        "ridge point",
        "of the roof",
        "Exercise 3b: ",
    ],
    # the ablation: each step timed alone, and the step that gained most named from the numbers
    "03_blocks_compute_at_inline": [
        "+ split i, reorder (k outside ii)",
        "+ reverse_compute_at relu",
        "the largest gain on this machine:",
    ],
    "04_reductions_rfactor": ["feeds reduce iterator", "vector additions in the serial kernel"],
    "05_caching_and_layout": ["A_global", "tiled + packed B"],
    "06_probabilistic_schedules_traces": [
        "same function after replay: True",
        "multiplies to 256, not the extent 64",
        "cache_write ",  # the text about the tuned trace reads what this list says it contains
    ],
    "07_design_spaces_and_modules": [
        "returned no schedule for block 'root'",
        "your rule's space, resampled",
        "sketch 0: cache_write",
    ],
    "08_cost_models_and_search": ["evolutionary + XGBoost", "random's best / evolutionary's best"],
    "09_gpus_and_tensor_cores": [
        "__global__",
        "GPURaceError",
        "__syncthreads",
        "threads per block copy the tiles together",
        "tensor-core kernel matches numpy",
        "wmma::mma_sync(",
    ],
    "10_capstone_tune_a_network": [
        "speed-up",
        "hit:",
        "miss: tune it",
        "Exercise 15",
        "tasks from the database:",
    ],
    "02_design_space_cbr": ["programs measured; their ff tilings", "best:"],
    "03_tune_paper_workloads": ["numpy / workbench ="],
    "04_prototype_a_module": ["the mutant replays: True", "VectorWidthTiling  best"],
    "05_trace_from_database": ["replayed, correct", "sch.get_block("],
    "06_whole_model": [
        "untuned matches PyTorch: True",
        "tuned matches PyTorch: True",
        "tasks from the database:",
        "fused groups, 18 distinct tasks",
        "ResNet-34: 39 groups, 18 tasks",
    ],
    "07_symbolic_shapes": [
        "T.where(i_0 * 32 + i_1 < n)",
        "n =  1000: matches numpy",
        "not known until the kernel is called",
        "tuned schedule at n = 300: matches numpy: True",
    ],
}


def _text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append(out.get("text", ""))
        data = out.get("data", {})
        parts += [data.get("text/plain", ""), data.get("text/html", "")]
    return "\n".join(parts)


@pytest.mark.parametrize("path", LESSONS + NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_runs_with_a_tiny_budget(path, monkeypatch):
    monkeypatch.setenv("WB_NOTEBOOK_TRIALS", "2")  # the kernel inherits the environment
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on failure
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert any(
        "parameters" in c.metadata.get("tags", []) and "WB_NOTEBOOK_TRIALS" in c.source for c in code
    ), "no parameters cell reading WB_NOTEBOOK_TRIALS"
    for cell in code:
        if re.match(r"check_exercise_\w+\(", cell.source.splitlines()[-1]):
            assert "wb-feedback" in _text(cell), f"no feedback under:\n{cell.source}"
    everything = "\n".join(_text(c) for c in code)
    for needle in EXPECTED.get(path.stem, []):
        assert needle in everything, f"{path.name}: {needle!r} not in the outputs"


def test_the_course_is_complete():
    assert 8 <= len(LESSONS) <= 10
    readme = (ROOT / "tutorials" / "README.md").read_text()
    listed = [p.name for p in LESSONS if p.name in readme]
    assert listed == [p.name for p in LESSONS], "tutorials/README.md lists every lesson"
    positions = [readme.index(p.name) for p in LESSONS]
    assert positions == sorted(positions), "tutorials/README.md lists the lessons in order"
    exercises = "\n".join(c.source for p in LESSONS for c in nbformat.read(p, as_version=4).cells)
    import checks

    for name in checks.__all__:
        if name.startswith("check_exercise_"):
            assert f"{name}(" in exercises, f"{name} is used by no lesson"
