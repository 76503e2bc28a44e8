"""Learned sampling: tensor sentences round-trip and are the same offline and during generation;
the decision model learns from a database, respects pinned decisions, proposes valid
candidates (alone and seeding the evolutionary search); the decision-aware ranking model; the
``learn`` / ``tune --strategy learned`` commands."""

import math
import random

import numpy as np
import pytest

import workbench as wb
from workbench.cli import main
from workbench.space import Postproc, without_postproc
from workbench.tune import (
    CostModel,
    Database,
    EvolutionarySearch,
    MeasureResult,
    Record,
    SearchContext,
    make_space,
)
from workbench.tune.learned import (
    DecisionAwareModel,
    DecisionModel,
    LearnedSampling,
    TensorSentence,
    Word,
    rank_metrics,
    sentence_of,
    sentence_of_record,
)
from workbench.tune.learned.model import tilings

from tunehelpers import gmm_space, small


def design(name, seed=0):
    func = small(name)
    return func, make_space(None, "llvm").generate_design_space(func, seed=seed)


@pytest.mark.parametrize("name", ["GMM", "C1D", "SFM", "TBG"])
def test_sentence_round_trips(name):
    func, spaces = design(name)
    for sch in spaces:
        s = sentence_of(sch.trace, str(func), "llvm")
        assert s.words and len(s.workload) == 9 and len(s.target) == 3
        assert TensorSentence.from_text(s.to_text()) == s
        assert TensorSentence.from_json(s.to_json()) == s
        assert s.to_text() == sentence_of(sch.trace, str(func), "llvm").to_text()  # deterministic
        tiles = [w for w in s.words if w.kind == "tile"]
        assert all(math.prod(w.decision) == w.extent for w in tiles)


def test_sentence_rejects_what_is_not_one():
    with pytest.raises(ValueError, match="not a tensor sentence"):
        TensorSentence.from_text("hello")
    with pytest.raises(ValueError, match="unknown decision kind"):
        Word.from_text("zap S 0 0 4 2 0 _ = 1")
    with pytest.raises(ValueError, match="workbench.sentence/1"):
        TensorSentence.from_json({"text": "W 1 | T 1"})


def test_sentence_of_a_stored_record_is_the_live_one():
    """Offline (a record read back from SQLite: IR text and trace JSON) and live (the
    schedule and its function) give one sentence."""
    func, spaces = design("C1D")
    db = Database.open(":memory:")
    db.add([Record.of(func, "llvm", sch.trace, [1e-5]) for sch in spaces])
    stored = [sentence_of_record(r) for e in db.workloads() for r in db.records_of(e)]
    live = [sentence_of(sch.trace, str(func), "llvm") for sch in spaces]
    assert stored == live


def synthetic_db(func, space, best, rng, n=40):
    """Records of random samples of ``space``; the fast ones are exactly those whose first
    tiling is ``best``."""
    db = Database.open(":memory:")
    recs = []
    for s in range(n):
        sch = wb.Schedule(func, seed=s)
        space.apply_to_schedule(sch, decision_provider=wb.Trace.resample)
        tile = next(i.decision for i in sch.trace.insts if i.kind.name == "sample_perfect_tile")
        latency = (1e-5 if tile == best else 1e-4) * (1 + 0.1 * rng.random())
        recs.append(Record.of(func, "llvm", sch.trace, [latency]))
    db.add(recs)
    return db


def gmm_design(func, pin=None):
    sch = wb.Schedule(func, seed=0)
    gmm_space(sch)
    trace = sch.trace
    if pin is not None:
        last = [i for i in trace.insts if i.kind.name == "sample_perfect_tile"][-1]
        trace.pin(last, pin)
    return trace


def test_model_learns_the_decision_that_is_always_best():
    func = small("GMM")  # i tiles into 2 (inner <= 8): 4 ways
    trace = gmm_design(func)
    db = synthetic_db(func, trace, [4, 4], random.Random(0))
    model = DecisionModel.train([db], temperature=0.25)
    picks = []
    for s in range(12):
        sch = wb.Schedule(func, seed=s)
        trace.apply_to_schedule(sch, decision_provider=model.provider(sch, trace, rng=random.Random(s)))
        picks.append(next(i.decision for i in sch.trace.insts if i.kind.name == "sample_perfect_tile"))
    assert picks.count([4, 4]) >= 10  # uniform sampling: 1 in 4
    k = next(k for k, i in enumerate(sch.trace.insts) if i.kind.name == "sample_perfect_tile")
    dist = model.distribution(sch, k)
    assert set(dist) == set(tilings(16, 2, 8))
    assert max(dist, key=dist.get) == (4, 4) and math.isclose(sum(dist.values()), 1.0)


def test_provider_respects_pinned_decisions_and_sees_them():
    func = small("GMM")
    db = synthetic_db(func, gmm_design(func), [4, 4], random.Random(1))
    model = DecisionModel.train([db])
    trace = gmm_design(func, pin=[2, 8])
    seen_prefixes = []
    original = model.probabilities

    def spy(workload, target, prefix, word, cands, index, n_words, temperature=None):
        seen_prefixes.append((list(prefix), word))
        return original(workload, target, prefix, word, cands, index, n_words, temperature)

    model.probabilities = spy
    for seed in range(4):
        sch = wb.Schedule(func, seed=seed)
        provider = model.provider(sch, trace, rng=random.Random(seed))
        trace.apply_to_schedule(sch, decision_provider=provider)
        last = [i for i in sch.trace.insts if i.kind.name == "sample_perfect_tile"][-1]
        assert last.decision == [2, 8] and last.pinned
        assert provider.proposed == 1  # only the free decision was asked about
    # what generation conditioned on is the offline sentence of the result (consistency)
    sentence = sentence_of(sch.trace, str(func), "llvm")
    prefix, word = seen_prefixes[-1]
    assert prefix == [] and word == sentence.words[0].context()


def test_generation_context_is_the_offline_sentence_prefix():
    """Every decision the model is asked about, it sees exactly the words the offline
    sentence of the finished trace has before it (real rules: C1D's design space)."""
    func, spaces = design("C1D")
    db = Database.open(":memory:")
    db.add([Record.of(func, "llvm", sch.trace, [1e-5 * (k + 1)]) for k, sch in enumerate(spaces)])
    model = DecisionModel.train([db])
    asked = []
    original = model.probabilities

    def spy(workload, target, prefix, word, cands, index, n_words, temperature=None):
        asked.append((workload, target, list(prefix), word))
        return original(workload, target, prefix, word, cands, index, n_words, temperature)

    model.probabilities = spy
    trace = without_postproc(spaces[0].trace)
    sch = wb.Schedule(func, seed=5)
    trace.apply_to_schedule(sch, decision_provider=model.provider(sch, trace))
    sentence = sentence_of(sch.trace, str(func), "llvm")
    assert len(asked) == len(sentence.words)
    for k, (workload, target, prefix, word) in enumerate(asked):
        assert workload == sentence.workload and target == sentence.target
        assert prefix == list(sentence.words[:k]) and word == sentence.words[k].context()


def context(func, space, seed=0):
    return SearchContext(
        func,
        "llvm",
        make_space(space, "llvm"),
        Database.open(":memory:"),
        CostModel.create("random", seed=seed),
        seed=seed,
    )


def test_learned_sampling_proposes_new_valid_candidates_and_keeps_pins():
    func = small("GMM")
    model = DecisionModel.train([synthetic_db(func, gmm_design(func), [4, 4], random.Random(2))])
    strategy = LearnedSampling(model, oversample=2)
    strategy.initialize(context(func, [gmm_design(func, pin=[2, 8])]))
    found = strategy.propose(3) + strategy.propose(3)
    assert len(found) == len({c.hash for c in found}) >= 3
    for c in found:
        last = [i for i in c.trace.insts if i.kind.name == "sample_perfect_tile"][-1]
        assert last.decision == [2, 8]
    assert strategy.drawn >= len(found) and 0.0 <= strategy.rejection_rate <= 1.0


def test_rejected_proposals_are_counted_and_redrawn():
    """Proposals a postprocessor rejects are drawn again, and counted."""
    func = small("GMM")
    model = DecisionModel.train([synthetic_db(func, gmm_design(func), [4, 4], random.Random(3))])
    ctx = context(func, [gmm_design(func)])
    ctx.space.postprocs = [RejectWideTiles()]
    strategy = LearnedSampling(model)
    strategy.initialize(ctx)
    found = strategy.propose(2)
    assert found and all(RejectWideTiles().apply(c.sch) for c in found)
    assert strategy.rejected > 0 and strategy.drawn == strategy.rejected + ctx.stats.valid
    assert 0.0 < strategy.rejection_rate < 1.0

    strategy = LearnedSampling(model, max_tries=5)
    ctx.space.postprocs = [Postproc()]
    ctx.space.postprocs[0].apply = lambda sch: False
    strategy.initialize(ctx)
    assert strategy.propose(2) == [] and strategy.rejection_rate == 1.0


class RejectWideTiles(Postproc):
    """Rejects every candidate whose first tiling has an inner factor above 2."""

    def apply(self, sch):
        tile = next(i.decision for i in sch.trace.insts if i.kind.name == "sample_perfect_tile")
        return tile[-1] <= 2


def test_learned_sampler_seeds_the_evolutionary_search():
    func = small("GMM")
    model = DecisionModel.train([synthetic_db(func, gmm_design(func), [4, 4], random.Random(4))])
    sampler = LearnedSampling(model)
    evo = EvolutionarySearch(population_size=8, num_iters=1, init_sampler=sampler)
    evo.initialize(context(func, [gmm_design(func)]))
    found = evo.propose(4)
    assert found and sampler.drawn >= 8


def test_decision_aware_model_ranks_within_workloads():
    func, spaces = design("C1D")
    cands = [wb.Schedule(func, seed=s) for s in range(12)]
    trace = without_postproc(spaces[0].trace)
    for sch in cands:
        trace.apply_to_schedule(sch, decision_provider=wb.Trace.resample)
    lat = [1e-5 * (1 + (s % 5)) for s in range(12)]
    model = DecisionAwareModel(num_rounds=20)
    model.update(cands, [MeasureResult("ok", [x]) for x in lat])
    assert model.x.shape[1] > len(wb.tune.features.FEATURE_NAMES)
    scores = model.predict(cands)
    rho, recall = rank_metrics(scores, lat, k=4)
    assert rho > 0.5 and recall >= 0.5


def test_rank_metrics():
    rho, recall = rank_metrics([3, 2, 1, 0], [1.0, 2.0, 3.0, 4.0], k=2)
    assert rho == pytest.approx(1.0) and recall == 1.0
    rho, recall = rank_metrics([0, 1, 2, 3], [1.0, 2.0, 3.0, 4.0], k=2)
    assert rho == pytest.approx(-1.0) and recall == 0.0
    rho, _ = rank_metrics([1, 2, 3], [1.0, math.inf, 2.0])  # failed records left out
    assert math.isnan(rho)


def test_model_save_load_and_bad_folder(tmp_path):
    func = small("GMM")
    model = DecisionModel.train(
        [synthetic_db(func, gmm_design(func), [4, 4], random.Random(5))], backend="linear"
    )
    model.save(str(tmp_path / "m"))
    again = DecisionModel.load(str(tmp_path / "m"))
    rows = np.random.default_rng(0).random((3, len(model.mean)))
    assert np.allclose(again.logits(rows), model.logits(rows))
    with pytest.raises(FileNotFoundError, match="workbench learn"):
        DecisionModel.load(str(tmp_path / "nothing"))


def test_cli_learn_then_tune_learned(tmp_path, capsys):
    func = small("GMM")
    db_path = str(tmp_path / "a.sqlite")
    src = synthetic_db(func, gmm_design(func), [4, 4], random.Random(6))
    with Database.open(db_path) as db:
        db.add([r for e in src.workloads() for r in src.records_of(e)])
    out = str(tmp_path / "model")
    assert main(["learn", "--db", db_path, "--out", out]) == 0
    assert "trained on 40 records" in capsys.readouterr().out
    tuned = str(tmp_path / "t.sqlite")
    assert (
        main(
            [
                "tune",
                "GMM",
                "--small",
                "--trials",
                "4",
                "--per-iter",
                "4",
                "--db",
                tuned,
                "--strategy",
                "learned",
                "--model",
                out,
                "--workers",
                "1",
            ]
        )
        == 0
    )
    assert "rejected" in capsys.readouterr().out
    assert (
        main(
            [
                "tune",
                "GMM",
                "--small",
                "--trials",
                "4",
                "--db",
                tuned,
                "--strategy",
                "learned",
                "--model",
                str(tmp_path / "none"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("workbench:") and "decision_model.json" in err and "\n" not in err
    assert main(["learn", "--db", str(tmp_path / "missing.sqlite"), "--out", out]) == 2
    assert "no such database" in capsys.readouterr().err


def test_pin_panel_shows_the_model_beside_uniform(tmp_path):
    pytest.importorskip("ipywidgets")
    from kernel_ext.widgets.pin_panel import PinPanel

    func = small("GMM")
    model = DecisionModel.train(
        [synthetic_db(func, gmm_design(func), [4, 4], random.Random(7))], temperature=0.25
    )
    model.save(str(tmp_path / "m"))
    panel = PinPanel(gmm_design(func), model=str(tmp_path / "m"))
    step = panel.steps("sample_perfect_tile")[0]
    rows = panel.distribution(step)
    assert [r[0] for r in rows][0] == "[4, 4]" and len(rows) == 4
    assert all(u == pytest.approx(0.25) for _, _, u in rows)
    assert sum(p for _, p, _ in rows) == pytest.approx(1.0)
    assert "model:" in panel._labels[0].value and "[4, 4]" in panel._labels[0].value
    with pytest.raises(ValueError, match="no model"):
        PinPanel(gmm_design(func)).distribution(step)
