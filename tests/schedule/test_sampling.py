"""sample_perfect_tile / sample_categorical: distributions, decisions, replay and rules."""

import collections
import math

import pytest

from workbench.errors import ScheduleError
from workbench.schedule import ExprRV, Schedule
from workbench.testing import check_small, elementwise_func, small_schedule

WORKLOADS = ["GMM", "C2D", "SFM"]


@pytest.mark.parametrize("name", WORKLOADS)
def test_sampled_tiling_of_every_loop(name):
    sch = small_schedule(name, seed=3)
    for block in sch.get_child_blocks(sch.get_block("root")):
        for k, loop in enumerate(sch.get_loops(block)):
            # n=3 everywhere would nest C2D's 7 loops 21 deep: more than Python's compiler allows
            factors = sch.sample_perfect_tile(loop, n=3 if k < 2 else 2, max_innermost_factor=2)
            values = sch.get(factors)
            assert math.prod(values) == sch.get(loop).extent.value and values[-1] <= 2
            sch.split(loop, factors)
    check_small(sch, name)


def draw_many(extent, n, max_inner, draws=1400):
    sch = Schedule(elementwise_func((1, extent)), seed=0)
    loop = sch.get_loops("B")[1]
    counts = collections.Counter()
    for _ in range(draws):
        counts[tuple(sch.get(sch.sample_perfect_tile(loop, n=n, max_innermost_factor=max_inner)))] += 1
    return counts


def test_perfect_tile_is_uniform_over_allowed_tilings():
    counts = draw_many(8, 3, 2)
    allowed = {(a, b, c) for a in range(1, 9) for b in range(1, 9) for c in (1, 2) if a * b * c == 8}
    assert set(counts) == allowed and len(allowed) == 7
    for c in counts.values():  # 200 expected each; a 5-sigma band
        assert 130 < c < 270


def test_perfect_tile_no_limit():
    counts = draw_many(12, 2, None, draws=600)
    assert set(counts) == {(12 // d, d) for d in (1, 2, 3, 4, 6, 12)}
    assert set(draw_many(6, 2, -1, draws=60)) >= {(1, 6)}


def test_perfect_tile_n1_and_decision_replay():
    sch = Schedule(elementwise_func(), seed=0)
    loop = sch.get_loops("B")[1]
    assert sch.get(sch.sample_perfect_tile(loop, n=1, max_innermost_factor=2)) == [8]
    vs = sch.sample_perfect_tile(loop, n=3, decision=[2, 1, 4])
    assert all(isinstance(v, ExprRV) for v in vs) and sch.get(vs) == [2, 1, 4]
    assert sch.trace[-1].decision == [2, 1, 4]
    assert str(sch.trace).splitlines()[-1].endswith("max_innermost_factor=16, decision=[2, 1, 4])")


def test_categorical_frequencies_and_replay():
    sch = Schedule(elementwise_func(), seed=1)
    counts = collections.Counter(
        sch.get(sch.sample_categorical([4, 8, 16], [0.5, 0.5, 0.0])) for _ in range(600)
    )
    assert set(counts) == {4, 8} and 230 < counts[4] < 370
    v = sch.sample_categorical([4, 8, 16], [1, 1, 1], decision=2)
    assert sch.get(v) == 16 and sch.trace[-1].decision == 2
    assert str(sch.trace).splitlines()[-1] == (
        f"v{len(sch.trace) - 1} = sch.sample_categorical(candidates=[4, 8, 16], probs=[1, 1, 1], decision=2)"
    )


def test_same_seed_same_draws_and_fork_seed():
    def draws(seed):
        sch = Schedule(elementwise_func((1, 64)), seed=seed)
        loop = sch.get_loops("B")[1]
        return [sch.get(sch.sample_perfect_tile(loop, n=3)) for _ in range(5)]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)
    a = Schedule(elementwise_func(), seed=5)
    assert a.fork_seed() == Schedule(elementwise_func(), seed=5).fork_seed()


# -- rules --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "decision, message",
    [
        ([2, 2], r"decision \[2, 2\] multiplies to 4, not the extent 8 of loop 'j'"),
        ([8], r"decision \[8\] is not a list of 2 positive ints"),
        ([0, 8], r"decision \[0, 8\] is not a list of 2 positive ints"),
        ([1, 8], r"decision \[1, 8\]: innermost factor 8 exceeds max_innermost_factor=4"),
    ],
)
def test_perfect_tile_bad_decision(decision, message):
    sch = Schedule(elementwise_func())
    with pytest.raises(ScheduleError, match=r"sample_perfect_tile \(argument 'decision'\): " + message):
        sch.sample_perfect_tile(sch.get_loops("B")[1], n=2, max_innermost_factor=4, decision=decision)


def test_perfect_tile_bad_arguments():
    sch = Schedule(elementwise_func())
    loop = sch.get_loops("B")[1]
    with pytest.raises(ScheduleError, match=r"sample_perfect_tile \(argument 'n'\)"):
        sch.sample_perfect_tile(loop, n=0)
    with pytest.raises(ScheduleError, match=r"sample_perfect_tile \(argument 'max_innermost_factor'\)"):
        sch.sample_perfect_tile(loop, n=2, max_innermost_factor=0)
    with pytest.raises(ScheduleError, match=r"sample_perfect_tile \(argument 'loop'\): expected LoopRV"):
        sch.sample_perfect_tile("B", n=2)


@pytest.mark.parametrize(
    "kwargs, argument, message",
    [
        (dict(candidates=[], probs=[]), "candidates", "non-empty list of ints"),
        (dict(candidates=[1, 2], probs=[1.0]), "probs", "2 non-negative numbers"),
        (dict(candidates=[1, 2], probs=[0, 0]), "probs", "positive sum"),
        (dict(candidates=[1, 2], probs=[1, 1], decision=2), "decision", "not an index"),
        (
            dict(candidates=[1, 2], probs=[1, 0], decision=1),
            "decision",
            "candidate 2, which has probability 0",
        ),
    ],
)
def test_categorical_rules(kwargs, argument, message):
    sch = Schedule(elementwise_func())
    with pytest.raises(ScheduleError, match=rf"sample_categorical \(argument '{argument}'\).*{message}"):
        sch.sample_categorical(**kwargs)


def test_decision_to_non_sampling_primitive():
    sch = Schedule(elementwise_func())
    with pytest.raises(TypeError, match=r"sch.split: .*decision"):
        sch.split(sch.get_loops("B")[0], [2, 2], decision=[1])
