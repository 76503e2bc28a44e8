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


def test_exercise_3():
    right(checks.check_exercise_3(solutions.solution_3()))
    sch = wb.Schedule(matmul(256, 256, 256))  # the lesson's starting point
    i, j, k = sch.get_loops("C")
    io, ii = sch.split(i, factors=[None, 8])
    sch.reorder(io, j, k, ii)
    sch.parallel(io)
    sch.vectorize(ii)
    wrong(checks.check_exercise_3(sch), "the vectorized loop i_1 does not run over j")
    sch = wb.Schedule(matmul(256, 256, 256))
    i, j, k = sch.get_loops("C")
    jo, ji = sch.split(j, factors=[None, 16])
    sch.reorder(i, jo, k, ji)
    sch.vectorize(ji)
    wrong(checks.check_exercise_3(sch), "the outermost loop i is serial")
    wrong(checks.check_exercise_3(wb.Schedule(matmul(64, 64, 64))), "shape (64, 64)")


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


def test_exercise_6():
    right(checks.check_exercise_6(solutions.solution_6()))
    sch = wb.Schedule(vector_sum(4096))  # the lesson's starting point
    _, k = sch.get_loops("S")
    k0, _ = sch.split(k, factors=[8, None])
    rf = sch.rfactor(k0, factor_axis=0)
    sch.parallel(sch.get_loops(rf)[0])
    wrong(checks.check_exercise_6(sch), "the parallel loop i has one iteration")
    wrong(checks.check_exercise_6(wb.Schedule(vector_sum(4096))), "no rfactor block")


# -- lesson 5 -----------------------------------------------------------------------------------


def _cached(read_index, place=True):
    sch = wb.Schedule(matmul(128, 128, 128))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    jo, ji = sch.split(j, factors=[None, 32])
    sch.reorder(jo, i, k, ji)
    cache = sch.cache_read(block, read_index, "global")
    if place:
        sch.compute_at(cache, jo)
    return sch


def test_exercise_7_uses_tvm_read_indices():
    right(checks.check_exercise_7(solutions.solution_7()))
    wrong(checks.check_exercise_7(_cached(0)), "the cache copies ['A'], not B", "read index 0 is A")
    wrong(checks.check_exercise_7(_cached(1, place=False)), "still copies all of B")


# -- lesson 6 -----------------------------------------------------------------------------------


def test_exercise_8():
    trace = solutions.lesson6_trace()
    right(checks.check_exercise_8(solutions.solution_8(trace), trace))
    i_tile = [inst for inst in trace if inst.kind.is_sampling][0]
    sch = wb.Schedule(matmul(64, 64, 64))
    trace.with_decision(i_tile, [8, 2, 1, 4]).apply_to_schedule(sch)
    wrong(checks.check_exercise_8(sch, trace), "you changed the tiling of loop i")
    sch = wb.Schedule(matmul(64, 64, 64))
    trace.apply_to_schedule(sch)
    wrong(checks.check_exercise_8(sch, trace), "no decision changed")


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
    wrong(checks.check_exercise_9(bad, replayed, record), f"decision {len(bad) - 1}", "'x'")
    wrong(checks.check_exercise_9(decisions, None, record), "pass the Schedule")
    wrong(
        checks.check_exercise_9(decisions, wb.Schedule(record.trace.base_func), record),
        "the replayed function differs",
    )


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
