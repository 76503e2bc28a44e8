"""merge: TVM 0.27's test_tir_schedule_merge.py cases as before/after TVMScript (smaller
shapes), each replayed from its trace and run on llvm beside the unscheduled function, and
one must-fail case per rule."""

import pytest

from .tvm_port import check_after, check_refused

BEFORE = """
@T.prim_func
def elementwise(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32"),
                D: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((16, 16))
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i_0, j_0, i_1, j_1 in T.grid(4, 4, 4, 4):
        with T.block("C"):
            vi = T.axis.spatial(16, i_0 * 4 + i_1)
            vj = T.axis.spatial(16, j_0 * 4 + j_1)
            C[vi, vj] = B[vi, vj] + T.float32(1)
    for i_0, j_0, i_1, j_1 in T.grid(4, 4, 2, 2):
        with T.block("D"):
            vi = T.axis.spatial(8, i_0 * 2 + i_1)
            vj = T.axis.spatial(8, j_0 * 2 + j_1)
            D[vi, vj] = B[vi, vj] + T.float32(2)
"""


def _merge_level(level: int):
    def steps(sch):
        c = sch.get_loops(sch.get_block("C"))[level]
        d = sch.get_loops(sch.get_block("D"))[level]
        assert sch.get(sch.merge(c, d)).loop_var.name == ("i_0_m", "j_0_m")[level]

    return steps


def test_merge():
    check_after(
        BEFORE,
        _merge_level(0),
        """
@T.prim_func
def elementwise(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32"),
                D: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((16, 16))
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i_0_m in range(4):
        for j_0, i_1, j_1 in T.grid(4, 4, 4):
            with T.block("C"):
                vi = T.axis.spatial(16, i_0_m * 4 + i_1)
                vj = T.axis.spatial(16, j_0 * 4 + j_1)
                C[vi, vj] = B[vi, vj] + T.float32(1)
        for j_0, i_1, j_1 in T.grid(4, 2, 2):
            with T.block("D"):
                vi = T.axis.spatial(8, i_0_m * 2 + i_1)
                vj = T.axis.spatial(8, j_0 * 2 + j_1)
                D[vi, vj] = B[vi, vj] + T.float32(2)
""",
    )


def test_merge_two_levels():
    check_after(
        BEFORE,
        _merge_level(1),
        """
@T.prim_func
def elementwise(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32"),
                D: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((16, 16))
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i_0_m, j_0_m in T.grid(4, 4):
        for i_1, j_1 in T.grid(4, 4):
            with T.block("C"):
                vi = T.axis.spatial(16, i_0_m * 4 + i_1)
                vj = T.axis.spatial(16, j_0_m * 4 + j_1)
                C[vi, vj] = B[vi, vj] + T.float32(1)
        for i_1, j_1 in T.grid(2, 2):
            with T.block("D"):
                vi = T.axis.spatial(8, i_0_m * 2 + i_1)
                vj = T.axis.spatial(8, j_0_m * 2 + j_1)
                D[vi, vj] = B[vi, vj] + T.float32(2)
""",
    )


def test_merge_in_the_order_given():
    """TVM runs the bodies in the order the loops are given (checked with TVM 0.27)."""
    check_after(
        BEFORE,
        lambda sch: sch.merge(sch.get_loops("D")[0], sch.get_loops("C")[0]),
        """
@T.prim_func
def elementwise(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32"),
                D: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((16, 16))
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i_0_m in range(4):
        for j_0, i_1, j_1 in T.grid(4, 2, 2):
            with T.block("D"):
                vi = T.axis.spatial(8, i_0_m * 2 + i_1)
                vj = T.axis.spatial(8, j_0 * 2 + j_1)
                D[vi, vj] = B[vi, vj] + T.float32(2)
        for j_0, i_1, j_1 in T.grid(4, 4, 4):
            with T.block("C"):
                vi = T.axis.spatial(16, i_0_m * 4 + i_1)
                vj = T.axis.spatial(16, j_0 * 4 + j_1)
                C[vi, vj] = B[vi, vj] + T.float32(1)
""",
    )


def _nest(headers: list, block: str, stmt: str, indent: int = 1) -> str:
    """Loops ``headers`` (outer to inner, one line each) around block ``block``."""
    lines = [("    " * (indent + d)) + h for d, h in enumerate(headers)]
    pad = "    " * (indent + len(headers))
    lines += [
        f'{pad}with T.block("{block}"):',
        f'{pad}    vi, vj, vk = T.axis.remap("SSS", [i, j, k])',
        f"{pad}    {stmt}",
    ]
    return "\n".join(lines)


def _func(b_headers: list, wrap_b: bool = False, c_headers=("for i, j, k in T.grid(8, 8, 8):",)) -> str:
    b = _nest(b_headers, "B", "B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)", 2 if wrap_b else 1)
    if wrap_b:
        b = '    with T.block("W"):\n' + b
    c = _nest(list(c_headers), "C", "C[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)")
    return f"""
@T.prim_func
def f(A: T.Buffer((8, 8, 8), "float32"), C: T.Buffer((8, 8, 8), "float32")):
    B = T.alloc_buffer((8, 8, 8))
{b}
{c}
"""


GRID = ["for i, j, k in T.grid(8, 8, 8):"]


def _merge_k(b_level=2):
    return lambda sch: sch.merge(sch.get_loops("B")[b_level], sch.get_loops("C")[2])


NOT_ONLY_CHILD = """
@T.prim_func
def f(A: T.Buffer((8, 8, 8), "float32"), C: T.Buffer((8, 8, 8), "float32")):
    B = T.alloc_buffer((8, 8, 8))
    D = T.alloc_buffer((8, 8, 8))
    for i, j in T.grid(8, 8):
        for k in range(8):
            with T.block("D"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                D[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
        for k in range(8):
            with T.block("B"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
    for i, j, k in T.grid(8, 8, 8):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            C[vi, vj, vk] = B[vi, vj, vk] * T.float32(2)
"""


@pytest.mark.parametrize(
    "before, steps, match",
    [
        (NOT_ONLY_CHILD, _merge_k(), r"loop 'k' is not the only statement in the body of loop 'j'"),
        (
            _func(["for i, j in T.grid(8, 8):", "for k in T.serial(1, 8):"]),
            _merge_k(),
            r"loop 'k' starts at 1, not 0",
        ),
        (_func(["for i, j, k in T.grid(4, 8, 8):"]), _merge_k(), r"loop 'i' has extent 8, loop 'i' 4"),
        (_func(GRID), _merge_k(1), r"nest of loop 'k' is 3 loops deep"),
        (_func(GRID, wrap_b=True), _merge_k(), r"not all in one block scope"),
        (
            _func(['for i in T.serial(8, annotations={"pragma_unroll": 1}):', "for j, k in T.grid(8, 8):"]),
            _merge_k(),
            r"loop 'i' is annotated or bound to a thread",
        ),
        (
            _func(GRID),
            lambda sch: sch.merge(sch.get_loops("B")[2], sch.get_loops("B")[2]),
            r"loop 'k' is given twice",
        ),
        (
            _func(GRID),
            lambda sch: sch.merge(sch.get_loops("B")[0], sch.get_loops("B")[2]),
            r"loop 'i' encloses another given loop",
        ),
    ],
)
def test_merge_refused(before, steps, match):
    check_refused(before, steps, "merge .*" + match)


IN_IF = """
@T.prim_func
def f(A: T.Buffer((2, 8), "float32"), C: T.Buffer((2, 8), "float32")):
    B = T.alloc_buffer((2, 8))
    for o in range(2):
        if o < 1:
            for i in range(8):
                with T.block("B"):
                    vo, vi = T.axis.remap("SS", [o, i])
                    B[vo, vi] = A[vo, vi] * T.float32(2)
        for i in range(8):
            with T.block("C"):
                vo, vi = T.axis.remap("SS", [o, i])
                C[vo, vi] = A[vo, vi] * T.float32(2)
"""


def test_merge_refuses_a_nest_inside_an_if():
    """Not a TVM rule: merging would take B's loop out of its ``if``."""
    check_refused(
        IN_IF,
        lambda sch: sch.merge(sch.get_loops("B")[1], sch.get_loops("C")[1]),
        "merge .*loop 'i' is inside an if",
    )
