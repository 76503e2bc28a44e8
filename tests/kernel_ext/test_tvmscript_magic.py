"""``%%tvmscript``: a cell of TVMScript becomes a function of the notebook, never executed."""

import workbench as wb

CELL = """
@T.prim_func
def scale(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * 2.0
"""


def test_cell_binds_the_function_under_its_name(ip):
    ip.user_ns.pop("scale", None)  # the shell is shared by the tests
    func = ip.run_cell_magic("tvmscript", "", CELL)
    assert isinstance(func, wb.PrimFunc) and ip.user_ns["scale"] is func
    wb.assert_structural_equal(func, wb.parse(CELL))


def test_cell_binds_the_name_given_and_schedule_takes_it(ip):
    ip.user_ns.pop("scale", None)
    ip.run_cell_magic("tvmscript", "f2", CELL)
    assert isinstance(ip.user_ns["f2"], wb.PrimFunc) and "scale" not in ip.user_ns
    cell = "sch.split(sch.get_loops(sch.get_block('B'))[0], factors=[None, 4])\n"
    stepper = ip.run_cell_magic("schedule", "f2", cell)
    assert stepper.error is None and len(ip.user_ns["sch"].trace) == 3


def test_errors_show_line_and_column_without_running_anything(ip, capsys, tmp_path):
    ip.user_ns.pop("scale", None)
    flag = tmp_path / "ran"
    bad = CELL.replace("A[vi] * 2.0", f"__import__('os').system('touch {flag}')")
    assert ip.run_cell_magic("tvmscript", "", bad) is None
    out = capsys.readouterr().out
    assert out.startswith("%%tvmscript: line 7, col 21: `__import__` is not TVMScript")
    assert not flag.exists() and "scale" not in ip.user_ns
    assert ip.run_cell_magic("tvmscript", "two names", CELL) is None
    assert "at most one variable name" in capsys.readouterr().out
