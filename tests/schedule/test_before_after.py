"""Primitive tests written the way TVM writes its own: the function before and the function
expected after, as TVMScript text, compared with ``assert_structural_equal``.

These restate, as text, tests of test_split.py (imperfect split), test_fuse.py (fuse_ir),
test_compute_inline.py (inline_elementwise), test_for_kind.py / test_reorder.py and
test_reduction.py (decompose_reduction). ``T.reads`` / ``T.writes`` are left out where they are
what the body implies: the parser infers them (by the IR's own rule).
"""

import numpy as np

import workbench as wb
from workbench.testing import check_elementwise, check_trace_roundtrip

ELEMENTWISE = """
@T.prim_func
def elementwise(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    B = T.alloc_buffer((4, 8), "float32")
    for i, j in T.grid(4, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(4, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
"""

MATMUL = """
@T.prim_func
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
           C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def check(sch: wb.Schedule, expected: str) -> None:
    wb.assert_structural_equal(sch.func, wb.parse(expected))
    check_trace_roundtrip(sch)


def test_imperfect_split():
    sch = wb.Schedule(wb.parse(ELEMENTWISE))
    i, _ = sch.get_loops("B")
    sch.split(i, factors=[None, 3])
    check(
        sch,
        """
@T.prim_func
def elementwise(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    B = T.alloc_buffer((4, 8), "float32")
    for i_0, i_1, j in T.grid(2, 3, 8):
        with T.block("B"):
            vi = T.axis.spatial(4, i_0 * 3 + i_1)
            vj = T.axis.spatial(8, j)
            T.where(i_0 * 3 + i_1 < 4)
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(4, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
""",
    )
    check_elementwise(sch)


def test_fuse():
    sch = wb.Schedule(wb.parse(ELEMENTWISE))
    sch.fuse(*sch.get_loops("B"))
    check(
        sch,
        """
@T.prim_func
def elementwise(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    B = T.alloc_buffer((4, 8), "float32")
    for i_j_fused in range(32):
        with T.block("B"):
            vi = T.axis.spatial(4, i_j_fused // 8)
            vj = T.axis.spatial(8, i_j_fused % 8)
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(4, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
""",
    )
    check_elementwise(sch)


def test_compute_inline():
    sch = wb.Schedule(wb.parse(ELEMENTWISE))
    sch.compute_inline(sch.get_block("B"))
    check(
        sch,
        """
@T.prim_func
def elementwise(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    for i, j in T.grid(4, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)
""",
    )
    check_elementwise(sch)


def test_reorder_parallel_vectorize():
    sch = wb.Schedule(wb.parse(ELEMENTWISE))
    i, j = sch.get_loops("C")
    sch.reorder(j, i)
    sch.parallel(j)
    sch.vectorize(i)
    check(
        sch,
        """
@T.prim_func
def elementwise(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    B = T.alloc_buffer((4, 8), "float32")
    for i, j in T.grid(4, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for j in T.parallel(8):
        for i in T.vectorized(4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] + T.float32(1)
""",
    )
    check_elementwise(sch)


def test_decompose_reduction():
    sch = wb.Schedule(wb.parse(MATMUL))
    _, _, k = sch.get_loops("C")
    sch.decompose_reduction(sch.get_block("C"), k)
    check(
        sch,
        """
@T.prim_func
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
           C: T.Buffer((16, 16), "float32")):
    for i, j in T.grid(16, 16):
        with T.block("C_init"):
            vi_init, vj_init = T.axis.remap("SS", [i, j])
            C[vi_init, vj_init] = T.float32(0)
        for k in range(16):
            with T.block("C_update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""",
    )
    a, b = np.random.default_rng(0).uniform(-1, 1, size=(2, 16, 16)).astype("float32")
    c = np.full((16, 16), np.nan, "float32")
    wb.build(sch.func, target="python")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_a_wrong_expectation_names_the_difference():
    """What a failing before/after test prints: where the trees differ, and both texts."""
    sch = wb.Schedule(wb.parse(ELEMENTWISE))
    sch.split(sch.get_loops("B")[0], factors=[None, 2])
    wrong = wb.parse(ELEMENTWISE.replace("T.float32(2)", "T.float32(3)"))
    try:
        wb.assert_structural_equal(sch.func, wrong)
    except AssertionError as exc:
        assert "structural mismatch at" in str(exc) and "T.float32(3)" in str(exc)
    else:
        raise AssertionError("a different function compared equal")


def test_the_docs_primitive_and_its_before_after_test_run():
    """docs/extending.md's new primitive and its TVMScript test, run as written there."""
    import re
    from pathlib import Path
    from workbench.schedule import unregister

    doc = (Path(__file__).parents[2] / "docs" / "extending.md").read_text()
    (script,) = [
        b
        for b in re.findall(r"```python\n(.*?)```", doc, re.S)
        if b.startswith("# a primitive and its before/after test")
    ]
    try:
        namespace: dict = {}
        exec(compile(script, "docs/extending.md", "exec"), namespace)
        check_trace_roundtrip(namespace["sch"])
    finally:
        unregister("tile_2d")
