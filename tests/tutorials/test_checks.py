"""Every check_exercise_N: a correct answer (tutorials/solutions.py) passes, and wrong answers,
the mistakes the lessons start from among them, get the message that says what is wrong."""

import math

import numpy as np
import pytest

import workbench as wb
from workbench.space import Mutator, ScheduleRule

import checks
import solutions
from checks import dense_relu, matmul, vector_sum


def wrong(feedback, *needles):
    assert not feedback.ok, feedback
    for needle in needles:
        assert needle in feedback.message, feedback.message
    return feedback


def right(feedback):
    assert feedback.ok, feedback.message
    return feedback


# -- lesson 1 -----------------------------------------------------------------------------------


def _transposed_add(op, b_index=lambda i, j: (j, i)):
    def make():
        A = wb.placeholder((32, 16), "float32", name="A")
        B = wb.placeholder((16, 32), "float32", name="B")
        D = wb.compute((32, 16), lambda i, j: op(A[i, j], B[b_index(i, j)]), name="D")
        return wb.create_func([A, B, D], name="f")

    return make


def test_exercise_1():
    right(checks.check_exercise_1(solutions.solution_1()))
    right(checks.check_exercise_1(solutions.solution_1))  # the lesson passes the function
    wrong(checks.check_exercise_1(_transposed_add(lambda a, b: a - b)), "it computes A - B.T")
    wrong(checks.check_exercise_1(_transposed_add(lambda a, b: a * b)), "it computes A * B.T")
    # B's indices not swapped: wb.create_func refuses the out-of-bounds read, the check explains it
    feedback = wrong(
        checks.check_exercise_1(_transposed_add(lambda a, b: a + b, lambda i, j: (i, j))),
        "B[i, j] reads past the end of B",
        "its first index is i, which goes up to 31",
        "only 16 entries along that axis",
    )
    assert "[j, i]" not in feedback.message  # names the mistake, not the answer
    wrong(checks.check_exercise_1(_transposed_add(lambda a, b: a + b, lambda i, j: (j, i + 1))), "reads past")
    wrong(checks.check_exercise_1(matmul(16, 16, 16)), "A has shape (16, 16)")
    wrong(checks.check_exercise_1("D = A + B.T"), "not a str")


def _row_reduce(reducer, extent=16, name="M"):
    def make():
        A = wb.placeholder((32, 16), "float32", name="A")
        j = wb.reduce_axis(extent, name="j")
        return wb.create_func([A, wb.compute((32,), lambda i: reducer(A[i, j], axis=j), name=name)])

    return make


def test_exercise_2():
    right(checks.check_exercise_2(solutions.solution_2()))
    right(checks.check_exercise_2(solutions.solution_2))
    wrong(checks.check_exercise_2(_row_reduce(wb.sum)), "the row sums: use wb.max")
    wrong(checks.check_exercise_2(_row_reduce(wb.min)), "the row minimum")
    wrong(checks.check_exercise_2(_row_reduce(wb.max, extent=8)), "8 iterations; a row of A has 16")
    wrong(checks.check_exercise_2(_row_reduce(wb.max, extent=32)), "reads past the end of A")
    A = wb.placeholder((32, 16), "float32", name="A")
    first = wb.compute((32,), lambda i: A[i, 0], name="M")  # the lesson's starting point
    feedback = wrong(checks.check_exercise_2(wb.create_func([A, first])), "no block has a reduction axis")
    assert "wb.max(" not in feedback.message and "reduce_axis(" not in feedback.message


# -- lesson 2 -----------------------------------------------------------------------------------


LANES = wb.Target("llvm").vector_lanes("float32")


def _ex3(order="jo, k, ji", vec="ji", par="jo", lanes=LANES, j_parts=None):
    """A lesson 2 answer as a function of a fresh vecmat(512, 1024) schedule: j split into
    (jo, ji) by ``lanes``, or into ``j_parts`` (names j0, j1, j2), then reordered."""

    def answer(sch):
        j, k = sch.get_loops("y")
        loops = dict(j=j, k=k)
        if j_parts:
            loops.update(zip(("j0", "j1", "j2"), sch.split(j, factors=j_parts)))
        elif lanes:
            loops["jo"], loops["ji"] = sch.split(j, factors=[None, lanes])
        if order:
            sch.reorder(*(loops[name] for name in order.split(", ")))
        if par:
            sch.parallel(loops[par])
        if vec:
            sch.vectorize(loops[vec])

    return answer


def _no_answer(feedback):
    """A wrong answer's message names the mistake, not the schedule that fixes it."""
    for fix in ("reorder", "split(", "sch."):
        assert fix not in feedback.message, feedback.message
    return feedback


def test_exercise_3():
    right(checks.check_exercise_3(solutions.solution_3()))
    right(checks.check_exercise_3(_ex3()))
    right(checks.check_exercise_3(_ex3(lanes=2 * LANES)))  # two registers per step
    right(checks.check_exercise_3(_ex3("j0, k, j1, j2", vec="j2", par="j0", j_parts=[4, None, LANES])))
    # the lesson's starting point: section 4's pattern copied, the reduction still innermost
    _no_answer(
        wrong(
            checks.check_exercise_3(_ex3(order=None)),
            "loop j_1 is vectorized, but k runs inside it",
        )
    )
    # threads only: the innermost loop is the reduction
    _no_answer(
        wrong(
            checks.check_exercise_3(_ex3(order=None, vec=None, par="j", lanes=None)),
            "the innermost loop k is serial",
            "add into the same y[j]",
        )
    )
    # the vector narrower than a register (and not a whole number of registers)
    if LANES >= 2:
        narrow = wrong(checks.check_exercise_3(_ex3(lanes=LANES // 2)), f"holds {LANES} floats", "idle")
        assert "vector_lanes" in narrow.message
    wrong(checks.check_exercise_3(_ex3(lanes=LANES + LANES // 2)), "not a whole number of registers")
    wrong(checks.check_exercise_3(_ex3(lanes=128)), "128 iterations", "register-sized")
    # the reduction outside the threads: correct values, a fork and join per k
    _no_answer(
        wrong(
            checks.check_exercise_3(_ex3("k, jo, ji")),
            "the outermost loop k runs the reduction over k",
            "started and joined again for each of its 512 iterations",
        )
    )
    # parallel or vectorize on the reduction: refused; the hint is the race, not the fix
    _no_answer(
        wrong(checks.check_exercise_3(_ex3("k, jo, ji", par="k")), "parallel refused", "y[j]", "would race")
    )
    _no_answer(
        wrong(checks.check_exercise_3(_ex3(order=None, vec="k", par=None)), "vectorize refused", "y[j]")
    )
    wrong(checks.check_exercise_3(_ex3(par=None)), "the outermost loop j_0 is serial", "one core")
    wrong(
        checks.check_exercise_3(_ex3("j0, k, j1, j2", vec="j2", par="j0", j_parts=[1, None, LANES])),
        "the parallel loop j_0 has 1 iteration",
    )
    wrong(checks.check_exercise_3(wb.Schedule(matmul(64, 64, 64))), "no block 'y'")
    wrong(checks.check_exercise_3(wb.Schedule(checks.vecmat(64, 256))), "shape (256,)")
    wrong(checks.check_exercise_3("sch"), "not a str")


def _ex3b(order="i0 j0 k i1 j1", fused=("i0", "j0"), j_factor=8, par=True, vec=True):
    def answer(sch):
        i, j, k = sch.get_loops("C")
        loops = dict(k=k)
        loops["i0"], loops["i1"] = sch.split(i, factors=[None, 8])
        loops["j0"], loops["j1"] = sch.split(j, factors=[None, j_factor])
        sch.reorder(*(loops[name] for name in order.split()))
        outer = sch.fuse(*(loops[name] for name in fused)) if fused else loops[order.split()[0]]
        if par:
            sch.parallel(outer)
        if vec:
            sch.vectorize(loops["j1"])

    return answer


def test_exercise_3b_reach_the_target_tvmscript():
    right(checks.check_exercise_3b(solutions.solution_3b))
    right(checks.check_exercise_3b(_ex3b()))
    sch = wb.Schedule(wb.parse(checks.TARGET_3B))  # the target itself, read back: also equal
    right(checks.check_exercise_3b(sch))
    # the starting point: nothing done; the diff names the first loop and what the target has there
    wrong(
        checks.check_exercise_3b(lambda sch: None),
        "loop 1 (counting from the outside) is a serial loop of 64 iterations over i (i) in yours",
        "a parallel loop of 64 iterations over i and j in the target",
    )
    wrong(checks.check_exercise_3b(_ex3b(fused=None)), "loop 1", "parallel loop of 8 iterations over i (i_0)")
    wrong(
        checks.check_exercise_3b(_ex3b("i0 j0 i1 k j1")),
        "loop 2",
        "over i (i_1) in yours",
        "over k in the target",
    )
    wrong(
        checks.check_exercise_3b(_ex3b("i0 j0 k j1 i1")), "loop 3", "vectorized loop of 8 iterations over j"
    )
    wrong(checks.check_exercise_3b(_ex3b(j_factor=16)), "parallel loop of 32 iterations over i and j")
    wrong(checks.check_exercise_3b(_ex3b(vec=False)), "loop 4", "a serial loop", "a vectorized loop")
    wrong(checks.check_exercise_3b(_ex3b(par=False)), "loop 1", "a serial loop of 64 iterations over i and j")
    # the same loops, fused the other way round: the loops match, the block's bindings do not
    swapped = wrong(
        checks.check_exercise_3b(_ex3b("j0 i0 k i1 j1", fused=("j0", "i0"))),
        "the loops match, but block 'C' computes vi from them differently",
        "j_0_i_0_fused % 8 * 8 + i_1 in yours",
    )
    assert "fuse(" not in swapped.message
    wrong(
        checks.check_exercise_3b(_vectorize_k),
        "vectorize refused",
    )


def _vectorize_k(sch):
    sch.vectorize(sch.get_loops("C")[2])


def test_loop_nest_diff_counts_blocks_and_depth():
    mm = matmul(64, 64, 64)
    assert checks.loop_nest_diff(mm, matmul(64, 64, 64)) == ""
    assert "the target has a block 'matmul', yours has ['C']" in checks.loop_nest_diff(mm, dense_relu())
    sch = wb.Schedule(mm)
    sch.split(sch.get_loops("C")[2], factors=[None, 1])  # a loop of one iteration more
    assert "4 loops above it in yours, 3 in the target; the first 3 agree" in checks.loop_nest_diff(
        sch.func, mm
    )


# -- lesson 3 -----------------------------------------------------------------------------------


def test_exercise_4():
    right(checks.check_exercise_4(solutions.solution_4()))
    right(checks.check_exercise_4(lambda sch: sch.reverse_compute_inline(sch.get_block("relu"))))
    # the lesson's starting point: relu is the output, compute_inline refuses it
    feedback = wrong(
        checks.check_exercise_4(lambda sch: sch.compute_inline(sch.get_block("relu"))),
        "compute_inline refused",
        "fold the consumer into its producer",
    )
    assert "reverse_compute_inline" not in feedback.message
    wrong(
        checks.check_exercise_4(lambda sch: sch.compute_inline(sch.get_block("bias_add"))),
        "that is section 2's demo",
        "keep 'bias_add'",
    )
    wrong(
        checks.check_exercise_4(lambda sch: sch.reverse_compute_inline(sch.get_block("bias_add"))),
        "The matmul is a reduction",
    )
    wrong(checks.check_exercise_4(lambda sch: None), "there are 3 blocks", "which primitive folds")
    wrong(checks.check_exercise_4(wb.Schedule(dense_relu())), "there are 3 blocks")


def _ex5(where=None, primitive="reverse_compute_at"):
    def answer(sch):
        loops = dict(zip(["io", "jo", "k", "ii", "ji"], solutions.exercise_5_start(sch)))
        if where:
            getattr(sch, primitive)(sch.get_block("relu"), loops[where])

    return answer


def test_exercise_5():
    right(checks.check_exercise_5(solutions.solution_5()))
    right(checks.check_exercise_5(_ex5("jo")))
    wrong(checks.check_exercise_5(_ex5()), "block 'relu' is still in its own loop nest")
    # relu under the reduction loop: the numbers are right (the last pass wins), the schedule is not
    under_k = wrong(
        checks.check_exercise_5(_ex5("k")),
        "sits under loop k, which runs the matmul's reduction",
        "on partial sums",
        "outside the reduction",
    )
    assert "jo" not in under_k.message
    wrong(checks.check_exercise_5(_ex5("ii")), "on partial sums")
    wrong(checks.check_exercise_5(_ex5("io")), "once per row strip", "tile loops of both i and j")
    wrong(
        checks.check_exercise_5(_ex5("jo", primitive="compute_at")),
        "compute_at refused",
        "moves a consumer under its producer's loops",
    )


def test_exercise_5_under_k_computes_the_right_numbers():
    """Why the check must look at the loop nest: the values alone would pass."""
    sch = wb.Schedule(dense_relu())
    _ex5("k")(sch)
    x, y, bias = checks._dense_inputs()
    out = np.zeros((64, 64), "float32")
    wb.build(sch, target="llvm")(x, y, bias, out)
    np.testing.assert_allclose(out, checks._dense_expected(x, y, bias), rtol=1e-3, atol=1e-3)


# -- lesson 4 -----------------------------------------------------------------------------------


def _rfactored(parts=8, which=0, parallel=1):
    sch = wb.Schedule(vector_sum(4096))
    _, k = sch.get_loops("S")
    if parts:
        k = sch.split(k, factors=[parts, None])[which]
    rf = sch.rfactor(k, factor_axis=0)
    if parallel is not None:
        sch.parallel(sch.get_loops(rf)[parallel])
    return sch


def test_exercise_6():
    right(checks.check_exercise_6(solutions.solution_6()))
    right(checks.check_exercise_6(_rfactored(parts=16)))
    right(checks.check_exercise_6(_rfactored(parts=4)))
    # the lesson's starting point: the unit loop i is parallel
    start = wrong(checks.check_exercise_6(_rfactored(parallel=0)), "the parallel loop i has one iteration")
    assert "k_0" not in start.message
    wrong(
        checks.check_exercise_6(wb.Schedule(vector_sum(4096))), "no rfactor block", "independent partial sums"
    )
    wrong(checks.check_exercise_6(_rfactored(parallel=None)), "run serially", "no loop of it is parallel")
    # rfactor of the whole k: 4096 one-element partial sums, the write-back as serial as before
    wrong(checks.check_exercise_6(_rfactored(parts=None)), "adds 4096 partial sums one after another")
    # rfactor of the inner part, its loop parallel inside the serial k_0: a fork/join per addition
    wrong(
        checks.check_exercise_6(_rfactored(which=1, parallel=2)),
        "sits inside the serial reduction loop k_0",
        "started and joined again",
    )
    wrong(checks.check_exercise_6(_rfactored(parts=512)), "adds 512 partial sums")


# -- lesson 5 -----------------------------------------------------------------------------------


def _cached(read_index, place="jo", tile=True, write=False):
    sch = wb.Schedule(matmul(128, 128, 128))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    loops = dict(i=i, j=j, k=k)
    if tile:
        loops["jo"], loops["ji"] = sch.split(j, factors=[None, 32])
        sch.reorder(loops["jo"], i, k, loops["ji"])
    if write:
        sch.reverse_compute_at(sch.cache_write(block, 0, "global"), loops[place])
        return sch
    cache = sch.cache_read(block, read_index, "global")
    if place:
        sch.compute_at(cache, loops[place])
    return sch


def test_exercise_7_uses_tvm_read_indices():
    right(checks.check_exercise_7(solutions.solution_7()))
    # the lesson's starting point: read 0 is A
    start = wrong(checks.check_exercise_7(_cached(0)), "the cache copies ['A'], not B", "T.reads(...)")
    assert "index 1" not in start.message
    wrong(checks.check_exercise_7(_cached(1, place=None)), "still copies all of B")
    # under i (or deeper): the same tile of B copied again for every row of C
    for place in ("i", "k"):
        wrong(
            checks.check_exercise_7(_cached(1, place=place)),
            "sits under loop i",
            "copied again on each of its 128 iterations",
        )
    wrong(checks.check_exercise_7(_cached(1, place="i", tile=False)), "B[k, j] does not depend on i")
    wrong(checks.check_exercise_7(_cached(0, write=True)), "'C_global' is a write cache")
    wrong(checks.check_exercise_7(wb.Schedule(matmul(128, 128, 128))), "there is only block 'C'")


# -- lesson 6 -----------------------------------------------------------------------------------


def _replayed(trace, *changes):
    for n, decision in changes:
        trace = trace.with_decision([i for i in trace if i.kind.is_sampling][n], decision)
    sch = wb.Schedule(matmul(64, 64, 64))
    trace.apply_to_schedule(sch)
    return sch


def test_exercise_8():
    trace = solutions.lesson6_trace()
    right(checks.check_exercise_8(solutions.solution_8(trace), trace))
    right(checks.check_exercise_8(_replayed(trace, (1, [8, 2, 1, 4])), trace))
    # the lesson's starting point: the first sampling instruction (loop i's) changed
    start = wrong(checks.check_exercise_8(_replayed(trace, (0, [8, 2, 1, 4])), trace), "the tiling of loop i")
    assert "second" not in start.message
    unchanged = wrong(checks.check_exercise_8(_replayed(trace), trace), "no decision changed")
    assert "with_decision" not in unchanged.message
    wrong(
        checks.check_exercise_8(_replayed(trace, (1, [8, 2, 4, 1])), trace),
        "now [8, 2, 4, 1]",
        "outermost first",
    )
    wrong(
        checks.check_exercise_8(_replayed(trace, (0, [8, 2, 1, 4]), (1, [8, 2, 1, 4])), trace),
        "2 decisions changed",
    )
    by_hand = wb.Schedule(matmul(64, 64, 64))
    i, j, k = by_hand.get_loops("C")
    by_hand.split(j, factors=[8, 2, 1, 4])
    wrong(checks.check_exercise_8(by_hand, trace), "has 0 sampling instructions", "writing the splits anew")


@pytest.fixture(scope="module")
def record():
    func = matmul(32, 32, 32)
    db = wb.tune(func, target="llvm", trials=2, num_trials_per_iter=2, database=":memory:", baseline=False)
    return db.best(func, "llvm")


def test_exercise_9(record):
    decisions, replayed = solutions.solution_9(record)
    right(checks.check_exercise_9(decisions, replayed, record))
    wrong(checks.check_exercise_9([], replayed, record), "you listed 0 decisions")
    bad = list(decisions)
    bad[-1] = "x"
    misread = wrong(checks.check_exercise_9(bad, replayed, record), f"decision {len(bad) - 1}", "not 'x'")
    # the check does not read the trace for them (past "decision N", whose N is the index)
    assert repr(decisions[-1]) not in misread.message.split(" is not ", 1)[1]
    # the lesson's starting point
    wrong(checks.check_exercise_9([], None, record), "you listed 0 decisions")
    wrong(checks.check_exercise_9(decisions, None, record), "pass the Schedule")
    wrong(
        checks.check_exercise_9(decisions, wb.Schedule(record.trace.base_func), record),
        "the replayed function differs",
    )
    # a trace rebuilt with one tiling misread (its levels reversed)
    tile = next(
        i for i in record.trace if i.kind.name == "sample_perfect_tile" and i.decision[::-1] != i.decision
    )
    misread_sch = wb.Schedule(record.trace.base_func)
    record.trace.with_decision(tile, list(tile.decision[::-1])).apply_to_schedule(misread_sch)
    wrong(checks.check_exercise_9(decisions, misread_sch, record), "the replayed function differs")


# -- lesson 7 -----------------------------------------------------------------------------------


class ConstantTiling(ScheduleRule):
    def apply(self, sch, block):
        node = sch.get(block)
        if node.init is None:
            return [sch]
        for loop, iv in zip(sch.get_loops(block), node.iter_vars):
            if iv.iter_type == "S":
                sch.split(loop, factors=[None, 8])
        return [sch]


class SampledTiling(ScheduleRule):
    def __init__(self, candidates, probs=None, kinds="S"):
        self.candidates, self.kinds = candidates, kinds
        self.probs = probs or [1 / len(candidates)] * len(candidates)

    def apply(self, sch, block):
        node = sch.get(block)
        if node.init is None:
            return [sch]
        for loop, iv in zip(sch.get_loops(block), node.iter_vars):
            if iv.iter_type in self.kinds:
                factor = sch.sample_categorical(candidates=self.candidates, probs=self.probs)
                sch.split(loop, factors=[None, factor])
        return [sch]


class DropsBlocks(ScheduleRule):
    def apply(self, sch, block):
        return [] if sch.get(block).init is None else [sch]


def test_exercise_10():
    right(checks.check_exercise_10(solutions.solution_10()))
    wrong(checks.check_exercise_10(ConstantTiling()), "the tile factors are constants")
    wrong(
        checks.check_exercise_10(DropsBlocks()),
        "schedule rule DropsBlocks returned no schedule for block 'root'",
    )
    wrong(checks.check_exercise_10(ConstantTiling), "pass an instance")
    wrong(checks.check_exercise_10(SampledTiling([2, 3, 4, 8])), "not all powers of two")
    wrong(checks.check_exercise_10(SampledTiling([32, 64, 128])), "factors above 64", "T.where")
    wrong(checks.check_exercise_10(SampledTiling([8, 16], probs=[1.0, 0.0])), "six seeds all drew the same")
    wrong(
        checks.check_exercise_10(SampledTiling([2, 4, 8], kinds="SR")), "the reduction loop k was split too"
    )


class TVMSpelling(Mutator):  # the lesson's starting point
    def apply(self, trace, rng):
        for inst in trace.insts:
            if inst.kind.name == "Split":
                return trace.with_decision(inst, [1], remove_postproc=True)
        return None


class Doubles(Mutator):  # "double a factor": the product changes
    def apply(self, trace, rng):
        inst = next(i for i in trace.insts if i.kind.matches("SamplePerfectTile"))
        factors = list(inst.decision)
        factors[0] *= 2
        return trace.with_decision(inst, factors, remove_postproc=True)


class InPlace(Mutator):  # the course's TVM pattern: edits a read-only snapshot
    def apply(self, trace, rng):
        inst = next(i for i in trace.insts if i.kind.matches("SamplePerfectTile"))
        decisions = trace.decisions
        decisions[inst] = [1] * len(inst.decision)
        return trace


class ReturnsTheTrace(Mutator):  # changes a copy of the decision, returns the trace unchanged
    def apply(self, trace, rng):
        inst = next(i for i in trace.insts if i.kind.matches("SamplePerfectTile"))
        factors = list(inst.decision)
        factors[0], factors[-1] = factors[-1], factors[0]
        return trace


class TwoAtOnce(Mutator):
    def apply(self, trace, rng):
        for inst in [i for i in trace.insts if i.kind.matches("SamplePerfectTile")][:2]:
            factors = list(inst.decision)
            s = next(n for n, v in enumerate(factors) if v % 2 == 0)
            factors[s] //= 2
            factors[(s + 1) % len(factors)] *= 2
            trace = trace.with_decision(inst, factors, remove_postproc=True)
        return trace


class Unrolls(Mutator):
    def apply(self, trace, rng):
        inst = next(i for i in trace.insts if i.kind.matches("SampleCategorical"))
        return trace.with_decision(
            inst, (inst.decision + 1) % len(inst.args["candidates"]), remove_postproc=True
        )


class Raises(Mutator):
    def apply(self, trace, rng):
        return trace.decisions[trace.insts[0]]


def test_exercise_11():
    right(checks.check_exercise_11(solutions.solution_11()))
    wrong(
        checks.check_exercise_11(TVMSpelling()),
        "returned None 8 times out of 8",
        "inst.kind.matches('SamplePerfectTile')",
    )
    wrong(checks.check_exercise_11(Doubles()), "the product changed")
    wrong(checks.check_exercise_11(Raises()), "Raises.apply raised", "get_block samples nothing")
    wrong(checks.check_exercise_11(InPlace()), "InPlace.apply raised TypeError", "read-only snapshot")
    wrong(checks.check_exercise_11(ReturnsTheTrace()), "every decision of the given one", "read-only copies")
    wrong(checks.check_exercise_11(TwoAtOnce()), "2 decisions changed")
    wrong(checks.check_exercise_11(Unrolls()), "it changed a sample_categorical")


# -- lesson 8 -----------------------------------------------------------------------------------


def test_exercise_12():
    right(checks.check_exercise_12(solutions.solution_12))

    def zero_based(latencies, fraction=0.9):
        best = min(latencies)
        return next(n for n, x in enumerate(latencies) if x <= best / fraction)

    wrong(
        checks.check_exercise_12(zero_based),
        "trials_to_reach([5.0, 4.0, 1.0], fraction=0.9) returned 2; expected 3",
        "trials count from 1",
    )

    def no_failures(latencies, fraction=0.9):
        return solutions.solution_12(latencies, fraction) if all(map(math.isfinite, latencies)) else 0

    wrong(
        checks.check_exercise_12(no_failures), "[3.0, inf, 2.0, 1.0], fraction=0.5) returned 0", "expected 3"
    )
    wrong(checks.check_exercise_12(42), "pass your function itself")

    def reaches_the_best(latencies, fraction=0.9):  # fraction ignored: waits for the best itself
        return solutions.solution_12(latencies, 1.0)

    wrong(checks.check_exercise_12(reaches_the_best), "[4.0, 1.05, 3.0, 1.0], fraction=0.9) returned 4")

    def last_trial(latencies, fraction=0.9):  # every failure handled, but counts the last trial
        finite = [x for x in latencies if math.isfinite(x)]
        return len(latencies) if finite else None

    wrong(checks.check_exercise_12(last_trial), "[1.0, 2.0, 3.0], fraction=0.9) returned 3; expected 1")


# -- lesson 9 -----------------------------------------------------------------------------------


def _bound(threads=128, reduction=False):
    sch = wb.Schedule(matmul(64, 64, 64))
    i, j, k = sch.get_loops("C")
    if reduction:
        sch.bind(i, "blockIdx.x")
        sch.bind(k, "threadIdx.x")
        return sch
    bx, tx = sch.split(sch.fuse(i, j), factors=[None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


def test_exercise_13():
    right(checks.check_exercise_13(solutions.solution_13()))
    wrong(checks.check_exercise_13(_bound(reduction=True)), "cross-thread reduction")
    wrong(checks.check_exercise_13(_bound(threads=16)), "16 threads per block is not a multiple of 32")
    wrong(checks.check_exercise_13(wb.Schedule(matmul(64, 64, 64))), "no loop is bound to blockIdx.x")
    swapped = wb.Schedule(matmul(64, 64, 64))
    i, j, _ = swapped.get_loops("C")
    swapped.bind(i, "threadIdx.x")
    swapped.bind(j, "blockIdx.x")
    wrong(checks.check_exercise_13(swapped), "threadIdx.x is bound outside blockIdx.x")
    wrong(checks.check_exercise_13(_bound(threads=2048)), "2048 threads per block", "at most 1024")
    only_j = wb.Schedule(matmul(64, 64, 64))
    _, j, _ = only_j.get_loops("C")
    jo, ji = only_j.split(j, factors=[None, 32])
    only_j.bind(jo, "blockIdx.x")
    only_j.bind(ji, "threadIdx.x")
    wrong(checks.check_exercise_13(only_j), "loop 'i'", "is not bound to a GPU thread axis")


# -- lesson 10 ----------------------------------------------------------------------------------


def test_exercise_14():
    right(checks.check_exercise_14(solutions.solution_14()))
    wrong(checks.check_exercise_14({"conv", "dense", "softmax"}), "'dense' misses")
    wrong(checks.check_exercise_14({"conv"}), "'softmax' hits too")
    wrong(checks.check_exercise_14({"relu"}), "['relu'] are not operators of NETWORK_B")


def test_feedback_renders_for_a_notebook():
    html = checks.check_exercise_14({"conv"})._repr_html_()
    assert "wb-feedback-wrong" in html and "Exercise 14" in html and "&#x27;softmax&#x27;" in html
    assert "wb-feedback-ok" in checks.check_exercise_14(solutions.solution_14())._repr_html_()
    assert str(checks.check_exercise_14({"conv"})).startswith("Exercise 14: not yet.")


@pytest.fixture(scope="module")
def resnets(tmp_path_factory):
    """Lesson 10's part 4: tiny ResNet-18 tuned with 6 trials (3 of its 18 tasks get a record),
    ResNet-34 with a 100-class head (one new task)."""
    pytest.importorskip("torch", reason="PyTorch is the optional extra 'torch' (pip install torch==2.13.0)")
    from workbench.graph import zoo

    r18 = wb.from_torch(*zoo.get("resnet18", **zoo.TINY["resnet18"]))
    db = wb.tune_model(
        r18,
        "llvm",
        trials=6,
        database=str(tmp_path_factory.mktemp("db") / "resnet18.sqlite"),
        num_trials_per_iter=2,
        strategy="replay_trace",
        cost_model="random",
        workers=1,
        seed=0,
    )
    r34 = wb.from_torch(*zoo.get("resnet34", **dict(zoo.TINY["resnet34"], classes=100)))
    return r18, r34, db


def test_exercise_15(resnets):
    r18, r34, db = resnets
    tasks34 = r34.task_list()
    keys18 = {t.key for t in r18.task_list()}
    want = solutions.solution_15(r18, r34, db)
    assert 0 < len(want) < len(keys18)  # the tiny budget left some shared tasks without a record
    right(checks.check_exercise_15(want, r18, r34, db))
    right(checks.check_exercise_15(sorted(want), r18, r34, db))

    # every task ResNet-18 also has (forgetting that a tiny budget leaves tasks unmeasured)
    shared = {k for k, t in enumerate(tasks34) if t.key in keys18}
    unmeasured = min(shared - want)
    wrong(
        checks.check_exercise_15(shared, r18, r34, db),
        f"task {unmeasured} (",
        "ResNet-18 has the same workload, but its tuning never measured it",
    )
    # every task (the lesson's starting answer): the 100-class head is a new shape
    head = next(k for k, t in enumerate(tasks34) if t.key not in keys18)
    assert tasks34[head].name == "fused_dense_add"
    feedback = wrong(
        checks.check_exercise_15(set(range(len(tasks34))) - (shared - want), r18, r34, db),
        f"task {head} (fused_dense_add (1, 64) -> (1, 100)) misses: no ResNet-18 task has this workload",
    )
    assert "structural hash" in feedback.message
    # only the tasks ResNet-34 runs as often as ResNet-18 (a record thought to be per occurrence)
    weight18 = {t.key: t.weight for t in r18.task_list()}
    same_count = {k for k in want if tasks34[k].weight == weight18[tasks34[k].key]}
    more = min(want - same_count)
    wrong(
        checks.check_exercise_15(same_count, r18, r34, db),
        f"task {more} (",
        "hits too",
        f"ResNet-34 runs it {tasks34[more].weight} times and ResNet-18 {weight18[tasks34[more].key]}",
    )
    # names instead of numbers, numbers out of range, not a set
    name = tasks34[min(want)].name
    wrong(checks.check_exercise_15({name}, r18, r34, db), "answer with task numbers, not names", "tasks [")
    wrong(checks.check_exercise_15({len(tasks34)}, r18, r34, db), f"[{len(tasks34)}] are not task numbers")
    wrong(checks.check_exercise_15(len(want), r18, r34, db), "not a int")
    wrong(checks.check_exercise_15(set(), r18, r34, db), f"task {min(want)} (", "hits too")
