"""The `workbench workloads | show | run` commands, in process (tune/best/db: tests/tune)."""

import subprocess
import sys

from workbench import workloads
from workbench.cli import main

SMALL = ["--shape", "b=1", "n=16", "m=16", "k=16"]


def test_workloads_lists_every_registered_name(capsys):
    assert main(["workloads"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == workloads.names()


def test_show_prints_the_workload_at_the_asked_shape(capsys):
    assert main(["show", "GMM", *SMALL]) == 0
    out = capsys.readouterr().out
    assert out.startswith("@T.prim_func") and 'T.Buffer((1, 16, 16), "float32")' in out


def test_run_checks_against_numpy_and_times_both(capsys):
    assert main(["run", "GMM", *SMALL, "--number", "1"]) == 0
    out = capsys.readouterr().out
    assert "GMM on llvm: matches numpy" in out and "ms vs numpy reference" in out


def test_a_bad_shape_is_one_line_and_status_2(capsys):
    assert main(["show", "GMM", "--shape", "n=0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--shape expects key=positive-integer" in err[0]


def test_a_reader_that_stops_early_is_not_an_error():
    """`workbench show GMM | head -1`: the closed pipe ends the command quietly with status 0."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # every write to the pipe now fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "workbench.cli", "show", "GMM"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert done.returncode == 0 and done.stderr == ""


def test_python_dash_m_workbench_is_the_command():
    """``python -m workbench`` works where the scripts folder is not on PATH."""
    done = subprocess.run(
        [sys.executable, "-m", "workbench", "tune", "NOPE"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and "NOPE" in done.stderr and "Traceback" not in done.stderr
