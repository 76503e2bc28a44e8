"""mypy reads the primitives off ``Schedule``'s class body: ``check_schedule.py`` states what it
must infer (``sch.split(...)`` is ``list[LoopRV]``, a misspelled primitive is an error). CI's
``.ci/lint mypy`` checks that file too; this test runs the same check where mypy is installed."""

import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def test_mypy_types_the_primitives():
    api = pytest.importorskip("mypy.api", reason="mypy is not installed (pip install workbench[dev])")
    out, err, status = api.run(
        [
            "--config-file",
            os.path.join(ROOT, "pyproject.toml"),
            "--cache-dir",
            os.path.join(ROOT, ".mypy_cache"),
            os.path.join(HERE, "check_schedule.py"),
        ]
    )
    assert status == 0, out + err
