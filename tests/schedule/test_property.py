"""Seeded random sequences of loop primitives: every sequence still computes the reference,
its trace round-trips, and every rejected step leaves the schedule untouched."""

import random

import pytest

from workbench import workloads
from workbench.errors import ScheduleError
from workbench.ir.stmt import THREAD_TAGS
from workbench.testing import check_numeric, check_trace_roundtrip
from workbench.schedule import Schedule

SHAPES = {"GMM": dict(b=1, n=8, m=8, k=8), "C1D": workloads.small("C1D")}
SEQUENCES = 300  # per workload
MAX_DEPTH = 10  # the python target nests one Python block per loop


def random_factors(rng, extent):
    kind = rng.randrange(3)
    if kind == 0:
        return [None, rng.randint(1, extent + 1)]
    if kind == 1:
        return [rng.randint(1, 3), None, rng.randint(1, 3)]
    return [rng.randint(1, extent), None]


def random_step(sch, rng):
    """Queries for a random block's loops, then a random primitive call on them, returned
    as a thunk (it may legitimately be rejected)."""
    block = rng.choice(sch.get_child_blocks(sch.get_block("root")))
    loops = sch.get_loops(block)
    op = rng.choice(
        [
            "split",
            "sample_split",
            "fuse",
            "reorder",
            "parallel",
            "vectorize",
            "unroll",
            "bind",
            "annotate",
            "add_unit_loop",
        ]
    )
    loop = rng.choice(loops)
    if op in ("split", "sample_split", "add_unit_loop") and len(loops) >= MAX_DEPTH:
        op = "reorder"
    if op == "split":
        factors = random_factors(rng, sch.get(loop).extent.value)
        return lambda: sch.split(loop, factors, preserve_unit_iters=rng.random() < 0.5)
    if op == "sample_split":
        tiles = sch.sample_perfect_tile(loop, rng.choice([2, 3]), rng.choice([2, 4, 16]))
        return lambda: sch.split(loop, tiles)
    if op == "fuse":
        start = rng.randrange(len(loops))
        return lambda: sch.fuse(*loops[start : start + rng.choice([1, 2, 3])])
    if op == "reorder":
        chosen = rng.sample(loops, min(len(loops), rng.randint(2, 4)))
        return lambda: sch.reorder(*chosen)
    if op in ("parallel", "vectorize", "unroll"):
        return lambda: getattr(sch, op)(loop)
    if op == "bind":
        return lambda: sch.bind(loop, rng.choice(THREAD_TAGS))
    target = rng.choice([block, loop])
    if op == "annotate":
        return lambda: sch.annotate(target, rng.choice(["a", "b"]), rng.randint(0, 9))
    return lambda: sch.add_unit_loop(target)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_random_loop_schedules(name):
    func = workloads.get(name, **SHAPES[name])
    applied, rejected = 0, 0
    for seed in range(SEQUENCES):
        rng = random.Random(seed)
        sch = Schedule(func, seed=seed)
        for _ in range(rng.randint(3, 7)):
            step = random_step(sch, rng)
            before = (sch.func, len(sch.trace), dict(sch.symbols), len(sch.history))
            try:
                step()
                applied += 1
            except ScheduleError:
                rejected += 1
                assert (sch.func, len(sch.trace), dict(sch.symbols), len(sch.history)) == before
        check_numeric(sch, name, **SHAPES[name])
        check_trace_roundtrip(sch)
    # the generator must mostly produce valid steps for the test to mean something
    assert applied > 2 * rejected and applied > SEQUENCES * 2


def test_the_oracle_catches_a_wrong_binding():
    """A schedule that sums the wrong elements must fail the numeric check."""
    sch = Schedule(workloads.get("GMM", **SHAPES["GMM"]))
    realize = sch.index.realizes["Z"]
    b, i, j, k = realize.iter_values
    check_numeric(sch, "GMM", **SHAPES["GMM"])
    sch.replace(realize, realize.with_(iter_values=(b, i, j, k // 2)))
    with pytest.raises(AssertionError):
        check_numeric(sch, "GMM", **SHAPES["GMM"])
