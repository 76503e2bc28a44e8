"""TVM's own tests of compute_at / reverse_compute_at, replayed on the workbench.

tests/data/tvm/compute_at_cases.json holds, for every case of TVM 0.27's
test_tir_schedule_compute_at.py (and test_schedule_reverse_compute_at_regression.py) that
wb.parse can read, the program before, the schedule steps (TVM's, as Python, ``get_sblock``
read as ``get_block``) and the program TVM gives after them (None where TVM refuses, with its
message). Each case replays the steps and asks for TVM's answer: the same function
(structurally), a trace that round-trips, the same numbers as the unscheduled function when both
are built for llvm; and where TVM refuses, a ScheduleError with the schedule unchanged.

Left out (listed in the file's "skipped"): the cases over symbolic shapes (``n``, T.int64 te
vars), which wb.parse does not read.
"""

import json
import re
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

DATA = json.loads((Path(__file__).parents[1] / "data" / "tvm" / "compute_at_cases.json").read_text())
CASES = {c["case"]: c for c in DATA["cases"]}

#: our refusals where TVM accepts, on purpose (decision 9): the reduction B is split over the
#: iterations of a threadIdx loop, so its 4 threads would update B[j] at once (init included);
#: the same program with a serial loop is accepted ("reverse_compute_at_factorized_serial")
WE_REFUSE = {"reverse_compute_at_factorized": "the loop is thread_binding"}
#: too big to run in a test (2048^3 multiply-adds): compared structurally only
NOT_RUN = {f"compute_at_cuda_matmul_{k}" for k in range(5)}


def program(name: str) -> str:
    # T.likely is a branch hint the parser does not know: the condition it wraps is kept
    return re.sub(r"T\.likely\(([^()]*)\)", r"\1", DATA["programs"][name])


def replay(sch: wb.Schedule, steps: list[str]) -> None:
    names = {"sch": sch}
    for step in steps:
        exec(step, names)


def random_args(func):
    rng = np.random.default_rng(0)
    out = []
    for b in func.params:
        shape = tuple(int(s) for s in b.shape)
        if b.dtype.startswith("float"):
            out.append(rng.uniform(-2, 2, shape).astype(b.dtype))
        else:
            out.append(rng.integers(-100, 100, shape).astype(b.dtype))
    return out


def run_llvm(func, args):
    out = [a.copy() for a in args]
    wb.build(func, target="llvm")(*out)
    return out


@pytest.mark.parametrize("case", [c for c in CASES if CASES[c]["after"] is not None and c not in WE_REFUSE])
def test_tvm_accepts(case):
    c = CASES[case]
    before = wb.parse(program(c["before"]))
    sch = wb.Schedule(before)
    replay(sch, c["steps"])
    wb.assert_structural_equal(sch.func, wb.parse(program(c["after"])))
    check_trace_roundtrip(sch)
    if case in NOT_RUN:
        return
    args = random_args(before)
    for w, g, p in zip(run_llvm(before, args), run_llvm(sch.func, args), before.params):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=p.name)


@pytest.mark.parametrize("case", [c for c in CASES if CASES[c]["after"] is None or c in WE_REFUSE])
def test_tvm_refuses(case):
    c = CASES[case]
    sch = wb.Schedule(wb.parse(program(c["before"])))
    *prepare, last = c["steps"]
    replay(sch, prepare)
    func, n_trace = sch.func, len(sch.trace)
    with pytest.raises(wb.ScheduleError, match=WE_REFUSE.get(case, "compute_at")):
        replay(sch, [last])
    assert sch.func is func
    assert all(inst.kind.name in ("get_block", "get_loops") for inst in sch.trace.insts[n_trace:])


def test_cases_and_skipped():
    """Every test of TVM's file is here or skipped for a reason."""
    assert len(CASES) == 37 and len(DATA["skipped"]) == 3
    assert all(s["why"] for s in DATA["skipped"])
    assert sum(c["after"] is None for c in CASES.values()) == 6
