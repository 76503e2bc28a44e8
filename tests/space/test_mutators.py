"""Mutators: each proposes one new decision (or annotation) that replays, leaves pinned
decisions alone, and returns None when it has nothing to change. The property test mutates
random design-space traces repeatedly: every result is a valid candidate (it builds and
matches numpy) or is rejected with a reason, and pinned decisions never change."""

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from workbench import workloads
from workbench.space import (
    MutateComputeLocation,
    MutateParallel,
    MutateTileSize,
    MutateUnroll,
    Mutator,
    PostOrderApply,
    replay,
)
from workbench.space.analysis import PARALLEL
from workbench.space.mutators.mutate_tile_size import move_factor
from workbench.testing import check_numeric


def small(name):
    return workloads.get(name, **workloads.small(name))


def space_of(name, seed=0):
    gen = PostOrderApply()
    gen.initialize_with_target("llvm -num-cores=2")
    return gen, gen.generate_design_space(small(name), seed=seed)


def sampling(trace, kind):
    return [i for i in trace if i.kind.name == kind]


def test_move_factor_keeps_the_product_and_the_innermost_limit():
    rng = random.Random(0)
    for _ in range(200):
        tiles = move_factor([4, 2, 8, 2], 4, rng)
        assert math.prod(tiles) == 128 and tiles[-1] <= 4
    assert move_factor([16, 1], 1, rng) is None  # the inner tile may not grow past 1


def test_mutate_tile_size_changes_one_free_decision():
    gen, spaces = space_of("GMM")
    trace = spaces[0].trace.copy()
    positions = [k for k, i in enumerate(trace) if i.kind.name == "sample_perfect_tile"]
    free = positions[1]  # the tiles of loop i (extent 16); every other tiling is pinned
    for k in positions:
        if k != free:
            trace.pin(k)
    rng = random.Random(1)
    for _ in range(20):
        new = MutateTileSize().apply(trace, rng)
        changed = [k for k, (a, b) in enumerate(zip(trace, new)) if a.decision != b.decision]
        assert changed == [free]
        assert math.prod(new[free].decision) == 16 and new[free].decision[-1] <= 64
    trace.pin(free)
    assert MutateTileSize().apply(trace, rng) is None  # every tiling is pinned


def test_mutate_unroll_draws_another_step():
    _, spaces = space_of("GMM")
    trace = spaces[0].trace
    (unroll,) = sampling(trace, "sample_categorical")
    new = MutateUnroll().apply(trace, random.Random(2))
    assert sampling(new, "sample_categorical")[0].decision != unroll.decision
    trace = trace.copy()
    trace.pin(unroll)
    assert MutateUnroll().apply(trace, random.Random(2)) is None


def test_mutate_parallel_changes_the_fusion_plan():
    gen, spaces = space_of("GMM")
    mutator = MutateParallel(max_jobs_per_core=16)
    mutator.initialize_with_target("llvm -num-cores=2")
    mutator.initialize_with_func(small("GMM"))
    trace = spaces[0].trace
    new = mutator.apply(trace, random.Random(3))
    (old_limit,) = [i.args["ann_val"] for i in trace if i.args.get("ann_key") == PARALLEL]
    (new_limit,) = [i.args["ann_val"] for i in new if i.args.get("ann_key") == PARALLEL]
    assert new_limit != old_limit and new_limit <= 32
    assert replay(small("GMM"), new, gen.postprocs)[1] is None


def test_mutate_compute_location_moves_to_another_valid_location():
    gen, spaces = space_of("C2D", seed=4)
    mutator = MutateComputeLocation()
    mutator.initialize_with_func(small("C2D"))
    trace = spaces[0].trace
    (old,) = sampling(trace, "sample_compute_location")
    new = mutator.apply(trace, random.Random(5))
    assert sampling(new, "sample_compute_location")[0].decision != old.decision
    sch, why = replay(small("C2D"), new, gen.postprocs)
    assert why is None
    check_numeric(sch, "C2D", **workloads.small("C2D"))
    trace = trace.copy()
    trace.pin(old)
    assert mutator.apply(trace, random.Random(5)) is None
    with pytest.raises(RuntimeError, match="initialize_with_func"):
        MutateComputeLocation().apply(spaces[0].trace, random.Random(0))


def test_defaults_and_names():
    probs = Mutator.create("llvm")
    assert {type(m).__name__ for m in probs} == {
        "MutateTileSize",
        "MutateComputeLocation",
        "MutateUnroll",
        "MutateParallel",
    }
    assert isinstance(Mutator.named("mutate_tile_size"), MutateTileSize)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(["GMM", "C1D", "CBR", "SFM", "DEP"]),
    seed=st.integers(0, 10**6),
    steps=st.integers(1, 4),
)
def test_mutated_traces_stay_valid_or_are_rejected(name, seed, steps):
    gen, spaces = space_of(name, seed=seed % 5)
    rng = random.Random(seed)
    trace = rng.choice(spaces).trace.copy()
    decisions = [i for i in trace if i.kind.is_sampling]
    for inst in decisions:
        # pin the unroll step to a small one (keeps compiling cheap) and a random half of
        # the other decisions
        if inst.kind.name == "sample_categorical":
            trace.pin(inst, 0)
        elif rng.random() < 0.5:
            trace.pin(inst)
    pinned = {id(i.outputs): i.decision for i in trace if i.pinned}
    mutators, probs = list(gen.mutator_probs), list(gen.mutator_probs.values())
    for _ in range(steps):
        new = rng.choices(mutators, weights=probs)[0].apply(trace, rng)
        if new is None:
            continue
        for inst in new:
            if inst.pinned:
                assert inst.decision == pinned[id(inst.outputs)]
        assert sum(i.pinned for i in new) == len(pinned)
        sch, why = replay(small(name), new, gen.postprocs, seed=seed)
        if sch is None:
            assert isinstance(why, str) and why
            continue
        check_numeric(sch, name, target="llvm", **workloads.small(name))
        trace = new
