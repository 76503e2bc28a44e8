"""get_output_blocks (TVM 0.27's test_tir_schedule_utilities.py cases) and
sample_partitioned_tile (its sampling test): results, traces, replay with decisions, and one
must-fail case per rule."""

import math

import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

from .tvm_port import check_after, check_refused

MATMUL_RELU = """
@T.prim_func
def matmul_relu(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"),
                D: T.Buffer((8, 8), "float32")):
    C = T.alloc_buffer((8, 8))
    for i, j, k in T.grid(8, 8, 8):
        with T.block("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
    for i, j in T.grid(8, 8):
        with T.block("relu"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = T.max(C[vi, vj], T.float32(0))
"""

MATMUL_SPLIT_INIT = """
@T.prim_func
def matmul(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"),
           C: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("init"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.float32(0)
        for k in range(8):
            with T.block("update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
"""

BLOCKIZED = """
@T.prim_func
def blockized(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    with T.block("blockized_B"):
        vio = T.axis.spatial(1, 0)
        vjo = T.axis.spatial(1, 0)
        for i, j in T.grid(8, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
"""


def _names(sch, rvs):
    return [sch.get(rv).name for rv in rvs]


@pytest.mark.parametrize(
    "text, scope, expected",
    [
        (MATMUL_RELU, "root", ["relu"]),
        (MATMUL_SPLIT_INIT, "root", ["init", "update"]),
        (BLOCKIZED, "root", ["blockized_B", "B"]),
        (BLOCKIZED, "blockized_B", ["B"]),
    ],
)
def test_get_output_blocks(text, scope, expected):
    sch = wb.Schedule(wb.parse(text))
    assert _names(sch, sch.get_output_blocks(scope)) == expected
    assert "get_output_blocks(scope_block=b0)" in sch.trace.as_python()
    check_trace_roundtrip(sch)


def test_get_output_blocks_then_schedule():
    """The blocks it returns are usable variables (the trace replays them)."""

    def steps(sch):
        (relu,) = sch.get_output_blocks("root")
        sch.reverse_compute_at(relu, sch.get_loops("matmul")[0])

    check_after(
        MATMUL_RELU,
        steps,
        """
@T.prim_func
def matmul_relu(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"),
                D: T.Buffer((8, 8), "float32")):
    C = T.alloc_buffer((8, 8))
    for i in range(8):
        for j, k in T.grid(8, 8):
            with T.block("matmul"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
        for ax0 in range(8):
            with T.block("relu"):
                vi, vj = T.axis.remap("SS", [i, ax0])
                D[vi, vj] = T.max(C[vi, vj], T.float32(0))
""",
    )


def test_get_output_blocks_needs_a_block():
    check_refused(
        MATMUL_RELU,
        lambda sch: sch.get_output_blocks(sch.get_loops("relu")[0]),
        r"get_output_blocks \(argument 'scope_block'\): expected BlockRV",
    )


# sample_partitioned_tile ------------------------------------------------------------------

ELEMENTWISE = """
@T.prim_func
def elementwise(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4, 64), "float32")):
    for i, j in T.grid(4, 64):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
"""


def test_sample_partitioned_tile_draws_valid_tilings():
    for seed in range(40):
        sch = wb.Schedule(wb.parse(ELEMENTWISE), seed=seed)
        _, j = sch.get_loops("B")
        factors = sch.sample_partitioned_tile(j, n=4, partition_pos=2, innerpart_factor=8)
        values = [sch.get(f) for f in factors]
        assert math.prod(values) == 64 and math.prod(values[2:]) % 8 == 0
        assert sch.trace.insts[-1].decision == values


def test_sample_partitioned_tile_split_roundtrip_and_numbers():
    def steps(sch):
        _, j = sch.get_loops("B")
        factors = sch.sample_partitioned_tile(j, n=3, partition_pos=1, innerpart_factor=4, decision=[4, 2, 8])
        sch.split(j, factors=factors)

    sch = check_after(
        ELEMENTWISE,
        steps,
        """
@T.prim_func
def elementwise(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4, 64), "float32")):
    for i, j_0, j_1, j_2 in T.grid(4, 4, 2, 8):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            vj = T.axis.spatial(64, j_0 * 16 + j_1 * 8 + j_2)
            B[vi, vj] = A[vi, vj] * T.float32(2)
""",
    )
    assert (
        "v3, v4, v5 = sch.sample_partitioned_tile(loop=l2, n=3, partition_pos=1, innerpart_factor=4, "
        "decision=[4, 2, 8])" in sch.trace.as_python()
    )


def test_sample_partitioned_tile_trivial_is_a_perfect_tile():
    sch = wb.Schedule(wb.parse(ELEMENTWISE), seed=3)
    factors = sch.sample_partitioned_tile(sch.get_loops("B")[1], n=1)
    assert sch.get(factors) == [64]


@pytest.mark.parametrize(
    "kwargs, argument, match",
    [
        (dict(n=0), "n", "n must be an int from 1 to 64"),
        (dict(n=2, partition_pos=2), "partition_pos", "from 0 to 1"),
        (dict(n=2, innerpart_factor=0), "innerpart_factor", "at least 1"),
        (dict(n=2, innerpart_factor=3), "innerpart_factor", "does not divide the extent 64 of loop 'j'"),
        (dict(n=2, decision=[4, 4]), "decision", "multiplies to 16, not the extent 64"),
        (dict(n=2, decision=[64]), "decision", "not a list of 2 positive ints"),
        (
            dict(n=3, partition_pos=1, innerpart_factor=4, decision=[32, 1, 2]),
            "decision",
            "not a multiple of innerpart_factor=4",
        ),
    ],
)
def test_sample_partitioned_tile_refused(kwargs, argument, match):
    check_refused(
        ELEMENTWISE,
        lambda sch: sch.sample_partitioned_tile(sch.get_loops("B")[1], **kwargs),
        rf"sample_partitioned_tile \(argument '{argument}'\): .*{match}",
    )
