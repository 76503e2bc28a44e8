"""``LearnedSampling``: a search strategy that samples the design space with the decision model
instead of uniformly.

Each candidate is a *skeleton* — a design-space trace from the space generator (run with a few
seeds, since a trace keeps only the structure its rules built for its own decisions) — whose
unpinned decisions the model draws in trace order (:meth:`DecisionModel.provider`). A proposal
that fails to replay or that a postprocessor rejects is drawn again; ``rejection_rate`` says
how many were. Of a pool of ``oversample`` x n valid new proposals, the batch is the ``n`` best
ranked by ``ranker`` — a cost model pre-trained on other tasks' records
(:meth:`DecisionAwareModel.pretrained`, saved beside the decision model by ``workbench
learn``), which also learns from this task's measurements — or, without one, the ``n`` most
likely under the model until the session's cost model has ``min_records`` measured records,
then its best predicted ones. A sharp model keeps proposing what was measured already: while the pool
lacks new candidates the temperature doubles (up to ``max_heat`` times), so the search moves
on from the model's favourites to their neighbours instead of stalling::

    model = DecisionModel.load("model/")
    wb.tune("GMM", strategy=LearnedSampling(model), trials=10)
    EvolutionarySearch(init_sampler=LearnedSampling(model))    # seeds the first population
"""

from __future__ import annotations

import os
from typing import Any, Optional

from ...schedule import Schedule
from ...space import run_postprocs, without_postproc
from ...errors import ScheduleError
from ..search import Candidate, SearchStrategy
from .cost import DecisionAwareModel
from .model import DecisionModel

#: the pre-trained ranker's file in a model folder (``workbench learn`` writes it)
RANKER_FILE = "ranker.json"


class LearnedSampling(SearchStrategy):
    """See the module docstring. ``model``: a :class:`DecisionModel` or the folder it was saved
    in (whose ``ranker.json``, when there, is the ranker unless ``ranker`` is given; pass
    ``ranker=False`` for none). ``skeleton_seeds``: how many runs of the space generator give
    the skeletons."""

    def __init__(
        self,
        model: Any,
        oversample: int = 4,
        min_records: int = 16,
        skeleton_seeds: int = 4,
        max_tries: Optional[int] = None,
        max_heat: int = 5,
        ranker: Any = None,
    ):
        if not isinstance(model, DecisionModel):
            folder = str(model)
            model = DecisionModel.load(folder)
            saved = os.path.join(folder, RANKER_FILE)
            if ranker is None and os.path.exists(saved):
                ranker = DecisionAwareModel.load(saved)
        self.model = model
        self.ranker = ranker or None
        self.oversample = oversample
        self.min_records = min_records
        self.skeleton_seeds = skeleton_seeds
        self.max_tries = max_tries
        self.max_heat = max_heat
        self.drawn = 0  # proposals drawn from the model
        self.rejected = 0  # of those, failed to replay or rejected by a postprocessor
        self.measured = 0

    @property
    def rejection_rate(self) -> float:
        """Share of proposals that replay or the postprocessors rejected (then redrawn)."""
        return self.rejected / self.drawn if self.drawn else 0.0

    def initialize(self, ctx: Any) -> None:
        super().initialize(ctx)
        skeletons, seen = [], set()
        for k in range(self.skeleton_seeds):
            spaces = (
                ctx.design_spaces if k == 0 else ctx.space.generate_design_space(ctx.func, seed=ctx.seed())
            )
            for sch in spaces:
                trace = without_postproc(sch.trace)
                key = tuple(i.kind.name for i in trace.insts)
                if key not in seen:  # one skeleton per structure
                    seen.add(key)
                    skeletons.append(trace)
        self.skeletons = skeletons

    def sample(self, n: int, temperature: Optional[float] = None) -> list[tuple[Candidate, float]]:
        """Up to ``n`` valid proposals drawn from the model (not yet checked for novelty),
        each with its log-probability under the model (at ``temperature``)."""
        ctx = self.ctx
        out: list[tuple[Candidate, float]] = []
        tries = self.max_tries if self.max_tries is not None else 8 * n + 16
        for _ in range(tries):
            if len(out) >= n:
                break
            skeleton = ctx.rng.choice(self.skeletons)
            sch = Schedule(ctx.func, seed=ctx.seed())
            provider = self.model.provider(sch, skeleton, ctx.target, ctx.rng, temperature)
            self.drawn += 1
            ctx.stats.proposed += 1
            try:
                skeleton.apply_to_schedule(sch, decision_provider=provider)
            except ScheduleError:
                self.rejected += 1
                continue
            if run_postprocs(sch, ctx.space.postprocs) is not None:
                self.rejected += 1
                continue
            ctx.stats.valid += 1
            out.append((Candidate(sch), provider.log_prob))
        return out

    def candidates(self, n: int) -> list[Candidate]:
        """``n`` valid proposals, the most likely first (seeding another search)."""
        return [c for c, _ in sorted(self.sample(n), key=lambda p: -p[1])]

    def _propose(self, n: int) -> list[Candidate]:
        ctx = self.ctx
        pool: dict[str, tuple[Candidate, float]] = {}
        for heat in range(self.max_heat + 1):
            temperature = self.model.temperature * 2**heat
            for cand, logp in self.sample(self.oversample * n, temperature):
                if cand.hash not in ctx.seen:
                    pool.setdefault(cand.hash, (cand, logp))
            if len(pool) >= n:
                break
        ranked = [c for c, _ in sorted(pool.values(), key=lambda p: -p[1])]
        if self.ranker is not None and ranked:
            scores = self.ranker.predict([c.sch for c in ranked])
            for c, s in zip(ranked, scores):
                c.predicted = float(s)
            ranked.sort(key=lambda c: -(c.predicted or 0.0))
        elif self.measured >= self.min_records and ranked:
            ctx.predict(ranked)
            ranked.sort(key=lambda c: -(c.predicted or 0.0))
        return ctx.take_new(ranked, n)

    def notify(self, candidates: Any, results: Any) -> None:
        self.measured += len(candidates)
        if self.ranker is not None:
            self.ranker.update([c.sch for c in candidates], results)

    def __repr__(self) -> str:
        return (
            f"<LearnedSampling {self.model!r}: {self.drawn} drawn, {100 * self.rejection_rate:.0f}% rejected>"
        )
