"""Search strategies: new, valid, deduplicated candidates; pinned decisions kept; the
evolutionary search follows the cost model and starts from the database's best."""

import numpy as np
import pytest

import workbench as wb
from workbench.tune import (
    CostModel,
    Database,
    EvolutionarySearch,
    Record,
    ReplayFunc,
    ReplayTrace,
    SearchContext,
    SearchStrategy,
    make_space,
)

from tunehelpers import gmm_space, small

STRATEGIES = [ReplayTrace, ReplayFunc, lambda: EvolutionarySearch(population_size=16, num_iters=2)]


def context(space=gmm_space, db=None, model="random", seed=0):
    return SearchContext(
        small("GMM"),
        "llvm",
        make_space(space, "llvm"),
        db if db is not None else Database.open(":memory:"),
        CostModel.create(model, seed=seed),
        seed=seed,
    )


class VectorOracle(CostModel):
    """Scores candidates by their vector width times parallel extent (a stand-in for a trained
    model whose opinion is known)."""

    def update(self, candidates, results):
        pass

    def predict(self, candidates):
        return np.array([vector_times_parallel(c) for c in candidates], dtype=float)


def vector_times_parallel(sch):
    loops = list(sch.func.loops())
    vec = max((l.extent.value for l in loops if l.kind.value == "vectorized"), default=1)
    par = max((l.extent.value for l in loops if l.kind.value == "parallel"), default=1)
    return vec * par


@pytest.mark.parametrize("make", STRATEGIES)
def test_proposals_are_new_valid_and_distinct(make):
    ctx = context()
    strategy = make()
    strategy.initialize(ctx)
    first = strategy.propose(6)
    second = strategy.propose(6)
    hashes = [c.hash for c in first + second]
    assert len(first) == 6 and len(second) == 6 and len(set(hashes)) == 12
    for c in first[:3]:
        replayed = wb.Schedule(small("GMM"))
        c.trace.apply_to_schedule(replayed)
        assert wb.structural_equal(replayed.func, c.func)
    assert ctx.stats.proposed >= 12 and ctx.stats.valid >= 12


def test_measured_traces_are_not_proposed_again():
    db = Database.open(":memory:")
    ctx = context(db=db)
    strategy = ReplayTrace()
    strategy.initialize(ctx)
    batch = strategy.propose(5)
    db.add([Record.of(small("GMM"), "llvm", c.trace, [1e-3]) for c in batch])
    ctx2 = context(db=db, seed=0)  # a new session on the same database
    again = ReplayTrace()
    again.initialize(ctx2)
    assert not {c.hash for c in again.propose(20)} & {c.hash for c in batch}


def test_a_small_space_runs_dry():
    """A space of three points yields them all, then nothing."""

    def tiny(sch):
        _, i, j, _ = sch.get_loops(sch.get_block("Z"))
        sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))

    func = wb.workloads.get("GMM", b=1, n=4, m=4, k=4)
    ctx = SearchContext(
        func, "llvm", make_space(tiny, "llvm"), Database.open(":memory:"), CostModel.create("random"), seed=0
    )
    strategy = ReplayTrace()
    strategy.initialize(ctx)
    got = strategy.propose(10)
    assert len(got) == 3  # [4, 1], [2, 2], [1, 4]
    assert strategy.propose(10) == []


@pytest.mark.parametrize("make", STRATEGIES)
def test_pinned_decisions_never_change(make):
    design = wb.Schedule(small("GMM"), seed=0)
    gmm_space(design)
    tile = next(i for i in design.trace.insts if i.kind.name == "sample_perfect_tile")
    design.trace.pin(tile, [4, 4])
    ctx = context(space=[design.trace])
    strategy = make()
    strategy.initialize(ctx)
    found = strategy.propose(3) + strategy.propose(3)
    assert len(found) == 4  # j's free tiling: [16, 1], [8, 2], [4, 4], [2, 8]
    for c in found:
        first = next(i for i in c.trace.insts if i.kind.name == "sample_perfect_tile")
        assert first.decision == [4, 4] and first.pinned
    others = {
        tuple(next(i for i in c.trace.insts[::-1] if i.kind.name == "sample_perfect_tile").decision)
        for c in found
    }
    assert len(others) == 4  # the free decision does vary


def test_evolution_follows_the_cost_model():
    """The evolutionary search picks what the model rates best: here the 8 best of the 16
    points (vector width 1..8 times parallel extent 2..16), unlike random picks."""
    evo_ctx = context(model=VectorOracle(), seed=3)
    evo = EvolutionarySearch(population_size=24, num_iters=3, eps_greedy=0.0)
    evo.initialize(evo_ctx)
    picked = [vector_times_parallel(c.sch) for c in evo.propose(8)]
    rnd = ReplayTrace()
    rnd.initialize(context(model=VectorOracle(), seed=3))
    random_picks = [vector_times_parallel(c.sch) for c in rnd.propose(8)]
    assert sorted(picked, reverse=True) == [128, 64, 64, 32, 32, 32, 16, 16]
    assert np.mean(random_picks) < np.mean(picked)
    assert evo_ctx.stats.scored >= 24 * 4


def measured_db(n, seed=0):
    """A database holding ``n`` random candidates, the k-th measured at (k + 1) ms."""
    db = Database.open(":memory:")
    batch = ReplayTrace()
    batch.initialize(context(db=db, seed=seed))
    measured = batch.propose(n)
    db.add([Record.of(small("GMM"), "llvm", c.trace, [(k + 1) * 1e-3]) for k, c in enumerate(measured)])
    return db, measured


def test_evolution_starts_from_the_database_best():
    db, measured = measured_db(3)
    evo = EvolutionarySearch(population_size=10, init_measured_ratio=0.2)
    evo.initialize(context(db=db))
    population = evo._initial_population()
    assert [c.hash for c in population[:2]] == [measured[0].hash, measured[1].hash]
    assert not {c.hash for c in evo.propose(4)} & {c.hash for c in measured}


def test_default_space_of_the_space_package():
    """The real design space (schedule rules + postprocessors) through the evolutionary search."""
    ctx = context(space=None)
    evo = EvolutionarySearch(population_size=6, num_iters=1)
    evo.initialize(ctx)
    batch = evo.propose(3)
    assert len(batch) == 3
    assert any(i.kind.name == "enter_postproc" for i in batch[0].trace.insts)


def test_shortcuts():
    assert isinstance(SearchStrategy.create("evolutionary"), EvolutionarySearch)
    assert isinstance(SearchStrategy.create("replay_trace"), ReplayTrace)
    assert isinstance(SearchStrategy.create("random"), ReplayFunc)
    with pytest.raises(ValueError, match="unknown search strategy"):
        SearchStrategy.create("annealing")


def test_picks_spread_over_structures():
    """At most a quarter of the predicted picks share their non-tile decisions (compute
    locations, unroll steps); the rest of the ranking follows, so nothing is lost."""
    from workbench.tune.search import _diverse, structure

    ctx = context(space=None, seed=1)
    ranked = sorted(ctx.random_candidates(16), key=lambda c: repr(structure(c)))
    out = _diverse(ranked, 8, 0.25)
    assert sorted(map(id, out)) == sorted(map(id, ranked))
    kinds = [structure(c) for c in out]
    total = {s: kinds.count(s) for s in kinds}
    assert max(total.values()) > 2  # some structure is over the cap
    head = kinds[: sum(min(m, 2) for m in total.values())]
    assert {s: head.count(s) for s in total} == {s: min(m, 2) for s, m in total.items()}


def decisions(trace):
    return [repr(i.decision) for i in trace.insts if i.kind.is_sampling]


def test_local_share_proposes_neighbours_of_the_fastest_records():
    """With ``local_share=1`` every pick is an unmeasured mutant (one or two changed
    decisions) of one of the ``num_elites`` fastest records."""
    db, measured = measured_db(6, seed=2)
    evo = EvolutionarySearch(
        population_size=8, num_iters=1, local_share=1.0, eps_greedy=0.0, num_elites=2, neighbours_per_elite=8
    )
    evo.initialize(context(db=db, seed=2))
    picks = evo.propose(4)
    assert picks
    elites = [decisions(c.trace) for c in measured[:2]]
    for c in picks:
        assert c.hash not in {m.hash for m in measured}
        mine = decisions(c.trace)
        assert min(sum(a != b for a, b in zip(mine, e)) for e in elites) in (1, 2)


def test_random_samples_come_from_the_generator():
    """Random samples re-run the space generator (one schedule of each run is a sample): all
    valid, distinct and counted in the search statistics."""
    ctx = context(space=None, seed=0)
    samples = ctx.random_candidates(12)
    assert len(samples) == 12
    assert ctx.stats.valid == 12 and ctx.stats.proposed >= 12
    assert len({c.hash for c in samples}) == 12


def tilings(cand):
    return tuple(repr(i.decision) for i in cand.trace.insts if i.kind.name == "sample_perfect_tile")


def test_random_samples_draw_their_own_tile_sizes():
    """Each random sample has its own tile sizes, and every design space is drawn. The
    schedules of one generator run share the tiles drawn before multi-level tiling branched
    into its write-cache sketches; when every schedule of a run was a sample, 12 samples of
    this three-sketch space held only 4 distinct tilings (seed 0), and C2D's first batch of 16
    trials 6."""
    ctx = context(space=None, seed=0)
    assert len(ctx.design_spaces) == 3  # no write cache, a cache at tile level 1, at level 2
    samples = ctx.random_candidates(12)
    assert len(samples) == 12
    assert len({tilings(c) for c in samples}) >= 11  # 4 before; two may coincide by chance
    sketches = {tuple(i.kind.name for i in c.trace.insts if not i.kind.is_sampling) for c in samples}
    assert len(sketches) >= 2
