"""``%load_ext kernel_ext``, ``%%schedule`` and ``%tune`` in a real IPython shell (no kernel)."""

import pytest

import workbench as wb
from kernel_ext import LoopNestStepper
from kernel_ext.magics import MagicArgumentError, parse_line

CELL = """\
b = sch.get_block("Z")
_, i, j, k = sch.get_loops(b)
io, ii = sch.split(i, factors=[None, 4])
sch.reorder(io, j, ii)
"""


def test_parse_line_splits_name_shape_and_options():
    name, opts, shape = parse_line("GMM n=64 m=32 --seed 3 --small", {"seed": int}, ("small",))
    assert (name, opts, shape) == ("GMM", {"seed": 3, "small": True}, {"n": 64, "m": 32})
    with pytest.raises(MagicArgumentError, match="unknown option --bogus"):
        parse_line("GMM --bogus 1", {"seed": int})
    with pytest.raises(MagicArgumentError, match="needs a value"):
        parse_line("GMM --seed", {"seed": int})
    with pytest.raises(MagicArgumentError, match="name a function"):
        parse_line("n=3", {})


def test_schedule_magic_binds_sch_and_returns_the_stepper(ip):
    stepper = ip.run_cell_magic("schedule", "GMM n=16 m=16 k=8", CELL)
    assert isinstance(stepper, LoopNestStepper)
    sch = ip.user_ns["sch"]
    assert isinstance(sch, wb.Schedule) and len(sch.trace) == 4
    assert stepper.n_steps == 5 and stepper.error is None
    assert "T.grid(1, 4, 16, 4, 8)" in str(sch.func)  # b, i_0, j, i_1, k after the reorder
    assert "i_0" in stepper.loop_nest.value


def test_schedule_magic_accepts_a_variable(ip, gmm):
    ip.user_ns["my_func"] = gmm
    stepper = ip.run_cell_magic("schedule", "my_func", "sch.get_block('Z')\n")
    assert stepper.n_steps == 2 and ip.user_ns["sch"].func is gmm


def test_schedule_error_is_the_last_step_and_earlier_steps_stay(ip):
    cell = CELL + "sch.split(i, factors=[None, 2])   # i was split away above\n"
    stepper = ip.run_cell_magic("schedule", "GMM --small", cell)
    assert isinstance(stepper.error, wb.ScheduleError)
    assert stepper.failed_source == "sch.split(i, factors=[None, 2])   # i was split away above"
    assert stepper.n_steps == 6 and stepper.step == 5
    assert "ScheduleError at step 5" in stepper.instruction.value
    assert len(ip.user_ns["sch"].trace) == 4  # the schedule kept its 4 steps


def test_other_errors_propagate_with_a_traceback(ip):
    result = ip.run_cell("%%schedule GMM --small\nsch.no_such_primitive()\n")
    assert isinstance(result.error_in_exec, AttributeError)


def test_bad_names_say_what_is_known(ip, capsys):
    assert ip.run_cell_magic("schedule", "NOPE", "pass\n") is None
    assert "neither a variable of this notebook nor a workload" in capsys.readouterr().out
    ip.user_ns["x"] = 3
    assert ip.run_cell_magic("schedule", "x", "pass\n") is None
    assert "x is a int" in capsys.readouterr().out


def test_rich_display_is_registered_as_html(ip, space, gmm):
    fmt = ip.display_formatter
    data, _meta = fmt.format(gmm)
    assert "<pre" in data["text/html"] and "T.prim_func" in data["text/plain"]
    data, _meta = fmt.format(space)
    assert "Schedule of batch_matmul_nkkm" in data["text/html"] and "<details>" in data["text/html"]
    data, _meta = fmt.format(space.trace)
    assert "3 sampling" in data["text/html"]
    ip.run_line_magic("unload_ext", "kernel_ext")
    data, _meta = fmt.format(gmm)
    assert "text/html" not in data


def test_tune_magic_interrupted_shows_the_message(ip, tmp_path, capsys):
    """ "Interrupt kernel" (SIGINT) during ``%tune``: the message, no traceback, the records kept
    and the database returned."""
    import os
    import signal
    import sqlite3
    import threading
    import time

    path = str(tmp_path / "t.sqlite")

    def interrupt_after_a_batch():
        while True:
            try:
                with sqlite3.connect(path) as conn:
                    if conn.execute("SELECT COUNT(*) FROM records").fetchone()[0] >= 2:
                        break
            except sqlite3.Error:
                pass
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a kernel
    try:
        threading.Thread(target=interrupt_after_a_batch, daemon=True).start()
        db = ip.run_line_magic("tune", f"GMM n=16 m=16 k=16 --trials 400 --per-batch 2 --database {path}")
    finally:
        signal.signal(signal.SIGINT, previous)
    out = capsys.readouterr().out
    n = len(db)
    assert n >= 2 and f"interrupted after {n} trials" in out and f"{n} records in {path}" in out
    assert "resume with the same line: %tune GMM n=16" in out
