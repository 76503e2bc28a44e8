"""Worked solutions of the course's exercises, for teachers (and the tests of ``checks.py``).

``solution_N()`` returns an answer that ``check_exercise_N`` accepts. Students: try first.
"""

from __future__ import annotations

import math

import workbench as wb
from workbench.space import Mutator, ScheduleRule

from checks import NETWORK_A, NETWORK_B, dense_relu, matmul, vecmat, vector_sum


def solution_1() -> wb.PrimFunc:
    A = wb.placeholder((32, 16), "float32", name="A")
    B = wb.placeholder((16, 32), "float32", name="B")
    D = wb.compute((32, 16), lambda i, j: A[i, j] + B[j, i], name="D")
    return wb.create_func([A, B, D], name="add_transposed")


def solution_2() -> wb.PrimFunc:
    A = wb.placeholder((32, 16), "float32", name="A")
    j = wb.reduce_axis(16, name="j")
    M = wb.compute((32,), lambda i: wb.max(A[i, j], axis=j), name="M")
    return wb.create_func([A, M], name="row_max")


def solution_3() -> wb.Schedule:
    """vecmat: j is its only spatial loop, so it gives both the threads (outer part) and the
    SIMD lanes (inner part, one register); the reduction k runs between them, serial."""
    sch = wb.Schedule(vecmat(512, 1024))
    j, k = sch.get_loops("y")
    lanes = wb.Target("llvm").vector_lanes("float32")
    jo, ji = sch.split(j, factors=[None, lanes])
    sch.reorder(jo, k, ji)
    sch.parallel(jo)
    sch.vectorize(ji)
    return sch


def solution_3b(sch: wb.Schedule) -> None:
    """matmul(64, 64, 64) into checks.TARGET_3B: 8 x 8 tiles, the two tile loops fused and
    parallel, the tile's row loop vectorized."""
    i, j, k = sch.get_loops("C")
    i0, i1 = sch.split(i, factors=[None, 8])
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(i0, j0, k, i1, j1)
    sch.parallel(sch.fuse(i0, j0))
    sch.vectorize(j1)


def solution_4() -> wb.Schedule:
    sch = wb.Schedule(dense_relu())
    sch.reverse_compute_inline(sch.get_block("relu"))  # relu folded into bias_add
    return sch


def exercise_5_start(sch: wb.Schedule):
    """Lesson 3's starting point of exercise 5: 8 x 16 tiles, the epilogue not moved yet."""
    sch.compute_inline(sch.get_block("bias_add"))
    i, j, k = sch.get_loops("matmul")
    io, ii = sch.split(i, factors=[None, 8])
    jo, ji = sch.split(j, factors=[None, 16])
    sch.reorder(io, jo, k, ii, ji)
    return io, jo, k, ii, ji


def solution_5() -> wb.Schedule:
    sch = wb.Schedule(dense_relu())
    _io, jo, _k, _ii, _ji = exercise_5_start(sch)
    sch.reverse_compute_at(sch.get_block("relu"), jo)  # innermost tile loop outside k
    return sch


def solution_6() -> wb.Schedule:
    sch = wb.Schedule(vector_sum(4096))
    _, k = sch.get_loops("S")
    ko, ki = sch.split(k, factors=[8, None])
    rf = sch.rfactor(ko, factor_axis=0)  # block S_rf: 8 partial sums over k_0, now spatial
    _, k0, _ = sch.get_loops(rf)
    sch.parallel(k0)
    return sch


def solution_7() -> wb.Schedule:
    sch = wb.Schedule(matmul(128, 128, 128))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    jo, ji = sch.split(j, factors=[None, 32])
    sch.reorder(jo, i, k, ji)
    cache = sch.cache_read(block, 1, "global")  # read 1 of block C is B
    sch.compute_at(cache, jo)
    return sch


def lesson6_trace() -> wb.Trace:
    """The probabilistic matmul schedule of lesson 6 (seed 7)."""
    sch = wb.Schedule(matmul(64, 64, 64), seed=7)
    i, j, k = sch.get_loops("C")
    i_tiles = sch.sample_perfect_tile(i, n=4, max_innermost_factor=16)
    j_tiles = sch.sample_perfect_tile(j, n=4, max_innermost_factor=16)
    i0, i1, i2, i3 = sch.split(i, factors=i_tiles)
    j0, j1, j2, j3 = sch.split(j, factors=j_tiles)
    sch.reorder(i0, j0, i1, j1, k, i2, j2, i3, j3)
    return sch.trace


def solution_8(trace: wb.Trace) -> wb.Schedule:
    j_tile = [inst for inst in trace if inst.kind.is_sampling][1]
    sch = wb.Schedule(matmul(64, 64, 64))
    trace.with_decision(j_tile, [8, 2, 1, 4]).apply_to_schedule(sch)
    return sch


def solution_9(record) -> tuple:
    decisions = [inst.decision for inst in record.trace if inst.kind.is_sampling]
    sch = wb.Schedule(record.trace.base_func)
    record.trace.apply_to_schedule(sch)
    return decisions, sch


class PowerOfTwoTiling(ScheduleRule):
    """The course's MyCustomTiling, fixed: one sampled power-of-two split per spatial loop."""

    def apply(self, sch, block):
        node = sch.get(block)
        if node.init is None:
            return [sch]  # not a reduction: unchanged (never [])
        for loop, iv in zip(sch.get_loops(block), node.iter_vars):
            extent = sch.get(loop).extent.value
            sizes = [2**e for e in range(1, 10) if 2**e <= extent]
            if iv.iter_type == "S" and sizes:
                f = sch.sample_categorical(candidates=sizes, probs=[1 / len(sizes)] * len(sizes))
                sch.split(loop, factors=[None, f])
        return [sch]


def solution_10() -> ScheduleRule:
    return PowerOfTwoTiling()


class MyTileMutator(Mutator):
    """The course's MyTileMutator, working: move a factor of 2 between two tile levels."""

    def apply(self, trace, rng):
        moves = [
            (inst, s, d)
            for inst in trace.insts
            if inst.kind.matches("SamplePerfectTile") and not inst.pinned
            for s in range(len(inst.decision))
            for d in range(len(inst.decision))
            if s != d
            and inst.decision[s] % 2 == 0
            and (
                d != len(inst.decision) - 1
                or 2 * inst.decision[d] <= (inst.args["max_innermost_factor"] or math.inf)
            )
        ]
        if not moves:
            return None
        inst, s, d = rng.choice(moves)
        factors = list(inst.decision)
        factors[s] //= 2
        factors[d] *= 2
        return trace.with_decision(inst, factors, remove_postproc=True)


def solution_11() -> Mutator:
    return MyTileMutator()


def solution_12(latencies, fraction=0.9):
    finite = [x for x in latencies if math.isfinite(x)]
    if not finite:
        return None
    best, goal = math.inf, min(finite) / fraction
    for n, x in enumerate(latencies, 1):
        best = min(best, x)
        if best <= goal:
            return n
    return None


def solution_13() -> wb.Schedule:
    sch = wb.Schedule(matmul(64, 64, 64))
    i, j, k = sch.get_loops("C")
    bx, tx = sch.split(sch.fuse(i, j), factors=[None, 128])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


def solution_14() -> set:
    return {op for op, spec in NETWORK_B.items() if spec in NETWORK_A.values()}


def solution_15(resnet18, resnet34, database) -> set:
    recorded = {t.key for t in resnet18.task_list() if database.best(t.func, "llvm") is not None}
    return {k for k, t in enumerate(resnet34.task_list()) if t.key in recorded}
