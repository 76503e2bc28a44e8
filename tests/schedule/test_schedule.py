"""Schedule: atomic steps, history, copies, randomness, argument checking."""

import pytest

from workbench.errors import ScheduleError
from workbench.ir.structural import structural_equal
from workbench.schedule import Schedule
from workbench.testing import elementwise_func, shared_loop_func, small_schedule


def snapshot(sch):
    return (sch.func, len(sch.trace), dict(sch.symbols), len(sch.history), sch.rng.getstate())


FAILING_CALLS = {
    "split": lambda sch, l: sch.split(l[1], [3, 3]),
    "fuse": lambda sch, l: sch.fuse(l[2], l[1]),
    "reorder": lambda sch, l: sch.reorder(l[1], l[1]),
    "parallel": lambda sch, l: sch.parallel(l[3]),
    "vectorize": lambda sch, l: sch.vectorize(l[3]),
    "bind": lambda sch, l: sch.bind(l[3], "blockIdx.x"),
    # any loop kind may be replaced (TVM): a loop of another schedule is refused
    "unroll": lambda sch, l: sch.unroll(Schedule(sch.func).get_loops("Z")[0]),
    "annotate": lambda sch, l: sch.annotate(l[0], "k", {"no": {"sets"}}),
    "unannotate": lambda sch, l: sch.unannotate("Z", "missing"),  # also rolls back get_block
    "add_unit_loop": lambda sch, l: sch.add_unit_loop("root"),
    "get_block": lambda sch, l: sch.get_block("nope"),
    "sample_perfect_tile": lambda sch, l: sch.sample_perfect_tile(l[1], n=2, decision=[3, 5]),
    "sample_categorical": lambda sch, l: sch.sample_categorical([1, 2], [1, 1], decision=5),
}


@pytest.mark.parametrize("primitive", sorted(FAILING_CALLS))
def test_failing_primitive_leaves_schedule_unchanged(primitive):
    sch = small_schedule("GMM")
    loops = sch.get_loops("Z")
    sch.sample_perfect_tile(loops[2], n=2)  # some rng use and some symbols before
    before = snapshot(sch)
    with pytest.raises(ScheduleError, match=primitive):
        FAILING_CALLS[primitive](sch, loops)
    after = snapshot(sch)
    assert after[0] is before[0]
    assert after[1:] == before[1:]


def test_history_keeps_every_step():
    sch = Schedule(elementwise_func())
    i, j = sch.get_loops("B")
    sch.split(i, [2, 2])
    sch.parallel(sch.get_loops("B")[0])
    assert len(sch.history) == len(sch.trace) + 1
    assert sch.history[0][0] is None
    assert [inst for inst, _ in sch.history[1:]] == list(sch.trace)
    assert sch.history[-1][1] is sch.func
    funcs = [f for _, f in sch.history]
    assert funcs[1] is funcs[0]  # queries do not change the function
    assert funcs[3] is not funcs[2]  # split does
    assert "i_0" not in str(funcs[2]) and "i_0" in str(funcs[3])


def test_copy_is_independent_with_same_rng_state():
    sch = small_schedule("GMM", seed=4)
    i = sch.get_loops("Z")[1]
    other = sch.copy()
    a = sch.sample_perfect_tile(i, n=3)
    b = other.sample_perfect_tile(i, n=3)  # the same loop RV works in the copy
    assert sch.get(a) == other.get(b)
    other.split(i, [None, 4])
    assert len(other.trace) == len(sch.trace) + 1 and b[0] not in sch.symbols
    assert not structural_equal(sch.func, other.func)
    sch.fuse(*sch.get_loops("Z")[:2])
    assert "b_i_fused" not in str(other.func)


def test_fork_seed_and_reseed():
    sch = small_schedule("GMM", seed=1)
    seeds = {sch.fork_seed() for _ in range(5)}
    assert len(seeds) == 5 and all(0 <= s < 2**31 for s in seeds)
    sch.seed(9)
    first = sch.rng.random()
    sch.seed(9)
    assert sch.rng.random() == first


def test_block_names_accepted_and_recorded():
    sch = small_schedule("GMM")
    loops = sch.get_loops("Z")
    assert len(loops) == 4
    assert str(sch.trace) == 'b0 = sch.get_block(name="Z")\nl1, l2, l3, l4 = sch.get_loops(block=b0)'


def test_str_is_the_function_text():
    sch = Schedule(shared_loop_func())
    assert str(sch) == str(sch.func) and "for j2" in str(sch)


def test_not_a_function():
    with pytest.raises(TypeError, match="Schedule expects a PrimFunc"):
        Schedule("GMM")


def test_wrong_argument_count_is_a_type_error():
    sch = small_schedule("GMM")
    with pytest.raises(TypeError, match=r"sch.split: .*factors"):
        sch.split(sch.get_loops("Z")[0])
