"""TVM's own tests of compute_inline / reverse_compute_inline, replayed on the workbench.

tests/data/tvm/compute_inline_cases.json holds, for every case of TVM 0.27's
test_tir_schedule_compute_inline.py that wb.parse can read, the program before, the schedule
steps, and the program TVM gives after them (None where TVM refuses). Each case here replays
the steps and asks for TVM's answer: the same function (structurally), the same numbers as
the unscheduled function when both are built for llvm, a trace that round-trips; and where
TVM refuses, a ScheduleError with the schedule unchanged. The cases wb.parse cannot read are
listed in the file's "skipped" with the reason (opaque ``access_ptr`` accesses, T.int64 /
symbolic shapes, a match_buffer inside a block, an intrinsic the parser does not know).
"""

import json
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

DATA = json.loads((Path(__file__).parents[1] / "data" / "tvm" / "compute_inline_cases.json").read_text())
PROGRAMS = DATA["programs"]
CASES = {c["case"]: c for c in DATA["cases"]}

#: cases where our simplifier writes the indices / guard in another form than TVM's, equal at
#: every point: the function we expect instead (TVM's is still run and compared numerically)
OURS = {
    # TVM: C[(vj + vi * 128) // 2048, (vj + vi * 128) // 64 % 32, ...]
    "reverse_compute_inline_affine_load": """
@T.prim_func
def f(A: T.Buffer((128, 128), "float32"), C: T.Buffer((8, 32, 8, 8), "float32")):
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi // 16, vj // 64 + vi % 16 * 2, vj // 8 % 8, vj % 8] = A[vi, vj] * T.float32(2)
""",
    # TVM: T.where(i0 * 16 + i1 < 127 and j0 * 16 + j1 < 127)
    "reverse_compute_inline_overcomputed_producer_injective_load": """
@T.prim_func
def f(A: T.Buffer((128, 128), "float32"), C: T.Buffer((127, 127), "float32")):
    for i0, j0, i1, j1 in T.grid(8, 8, 16, 16):
        with T.block("B"):
            vi, vj, vm, vn = T.axis.remap("SSSS", [i0, j0, i1, j1])
            T.where(i1 + i0 * 16 < 127 and j1 + j0 * 16 < 127)
            C[vm + vi * 16, vn + vj * 16] = A[vi * 16 + vm, vj * 16 + vn] * T.float32(2) + T.float32(1)
""",
    # TVM: T.where(i < 16255 and i % 128 < 127)
    "reverse_compute_inline_overcomputed_producer_simplify_predicate": """
@T.prim_func
def f(A: T.Buffer((128, 128), "float32"), C: T.Buffer((127, 127), "float32")):
    for i in range(16384):
        with T.block("B"):
            vi = T.axis.spatial(128, i // 128)
            vj = T.axis.spatial(128, i % 128)
            T.where(i // 128 < 127 and i % 128 < 127)
            C[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)
""",
}
#: TVM programs that read past the end of a buffer (``B[vi, vj + 2]`` with vj up to 127): TVM
#: runs them on undefined data, wb.parse refuses them (an access provably out of bounds)
OUT_OF_BOUNDS = {"compute_inline_multi_loads", "reverse_compute_fail_multi_reverse_loads"}


def run_llvm(func, args):
    out = [a.copy() for a in args]
    wb.build(func, target="llvm")(*out)
    return out


def random_args(func):
    rng = np.random.default_rng(0)
    return [rng.uniform(-2, 2, tuple(int(s) for s in b.shape)).astype(b.dtype) for b in func.params]


def apply(sch, step):
    primitive, block, *args = step
    getattr(sch, primitive)(sch.get_block(block), *args)


@pytest.mark.parametrize(
    "case", [c for c in CASES if CASES[c]["after"] is not None and c not in OUT_OF_BOUNDS]
)
def test_tvm_accepts(case):
    c = CASES[case]
    before = wb.parse(PROGRAMS[c["before"]])
    expected = wb.parse(PROGRAMS[c["after"]])
    sch = wb.Schedule(before)
    for step in c["steps"]:
        apply(sch, step)
    wb.assert_structural_equal(sch.func, wb.parse(OURS[case]) if case in OURS else expected)
    check_trace_roundtrip(sch)
    args = random_args(before)
    want = run_llvm(before, args)
    # TVM's function is built too where it differs in form from ours
    for got in [run_llvm(sch.func, args)] + ([run_llvm(expected, args)] if case in OURS else []):
        for w, g, p in zip(want, got, before.params):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=p.name)


@pytest.mark.parametrize("case", [c for c in CASES if CASES[c]["after"] is None and c not in OUT_OF_BOUNDS])
def test_tvm_refuses(case):
    c = CASES[case]
    sch = wb.Schedule(wb.parse(PROGRAMS[c["before"]]))
    for step in c["steps"]:
        func = sch.func
        with pytest.raises(wb.ScheduleError, match=step[0]):
            apply(sch, step)
        assert sch.func is func
    assert all(inst.kind.name == "get_block" for inst in sch.trace.insts)


@pytest.mark.parametrize("case", sorted(OUT_OF_BOUNDS))
def test_tvm_programs_reading_out_of_bounds_are_refused(case):
    with pytest.raises(wb.OutOfBoundsError, match="out of bounds"):
        wb.parse(PROGRAMS[CASES[case]["before"]])


def test_skipped_are_unreadable():
    """The cases left out are left out because the parser refuses the program."""
    assert len(DATA["skipped"]) == 9 and len(CASES) == 31
    for s in DATA["skipped"]:
        assert s["why"]
