"""Search strategies: which candidates of the design space to measure next.

A strategy works on one task (a function, a target, a design space) and proposes batches of
*new* candidates — finished (postprocessors applied, i.e. validated), never measured before
in this session nor in the database::

    strategy = EvolutionarySearch()            # or "evolutionary", "replay_trace", "replay_func"
    strategy.initialize(ctx)                   # a SearchContext
    batch = strategy.propose(16)               # list[Candidate]
    strategy.notify(batch, results)            # after measuring

* :class:`ReplayTrace` replays the design-space traces with fresh random decisions;
* :class:`ReplayFunc` re-runs the space generator itself with a fresh seed (random search);
* :class:`EvolutionarySearch` is section 4 of the MetaSchedule paper (figure 7): a population
  from random samples of the space and the database's best traces evolves by mutating
  sampling decisions; mutants that fail validation are dropped; each proposal replaces its
  parent by annealed Metropolis-Hastings on the cost model's predicted score; the best
  predicted unmeasured candidates are measured, with an epsilon-greedy share of random ones.

Pinned decisions never change: replaying with new decisions and every mutator leave them be,
a replay refuses a pin that no longer fits (a mutant whose new tiling removes the loop a pinned
compute location names is dropped), and no candidate that lacks a pin is proposed (the
database's best traces of an earlier, unpinned search seed nothing).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol, Sequence

import numpy as np

from ..target import Target
from ..ir.func import PrimFunc
from ..schedule import Schedule, Trace
from .database.base import Database, trace_hash


@dataclass(eq=False)
class Candidate:
    """A finished candidate: its schedule (the trace includes the postprocessing) and the
    cost model's score when it was picked."""

    sch: Schedule
    predicted: Optional[float] = None
    _hash: Optional[str] = field(default=None, repr=False)

    @property
    def func(self) -> PrimFunc:
        return self.sch.func

    @property
    def trace(self) -> Trace:
        return self.sch.trace

    @property
    def hash(self) -> str:
        if self._hash is None:
            self._hash = trace_hash(self.sch.trace)
        return self._hash


@dataclass
class SearchStats:
    """What the search engine did (for the speed figures of ``bench/tune.py``)."""

    proposed: int = 0  # traces replayed (random samples and mutants)
    valid: int = 0  # of those, accepted by the postprocessors
    scored: int = 0  # cost-model predictions
    seconds: float = 0.0  # time spent in propose()


class SearchContext:
    """Everything a strategy needs about its task.

    ``space`` is an initialized space generator (``workbench.space``) whose postprocessors
    validate candidates and whose mutators propose neighbours; ``seen`` holds the trace hashes
    already measured (from the database) or proposed in this session.
    """

    #: replays of given traces remembered (each holds a schedule and its history)
    CACHE_SIZE = 2048

    def __init__(
        self, func: PrimFunc, target: Target, space: Any, database: Database, cost_model: Any, seed: int = 0
    ):
        self.func, self.target = func, target
        self.space = space
        self.database = database
        self.cost_model = cost_model
        self.rng = random.Random(seed)
        self.design_spaces: list[Schedule] = space.generate_design_space(func, seed=seed)
        if not self.design_spaces:
            raise ValueError(f"the design space of {func.name} is empty")
        self.mutators = dict(space.mutator_probs)
        for mutator in self.mutators:
            if hasattr(mutator, "initialize_with_func"):
                mutator.initialize_with_func(func)
        self.seen: set[str] = database.trace_hashes(func, target)
        self.stats = SearchStats()
        self._finished: dict[str, tuple[Optional[Schedule], Optional[str]]] = {}

    def seed(self) -> int:
        return self.rng.randrange(2**31)

    def finish(self, trace: Trace, resample: bool = False) -> Optional[Candidate]:
        """Replay ``trace`` (with new unpinned decisions if ``resample``) and run the
        postprocessors; None when replay or a postprocessor rejects it. Replays of a trace
        with given decisions are cached: the population revisits the same points."""
        from ..space import replay

        key = None if resample else trace_hash(trace)
        if key is not None and key in self._finished:
            sch, _ = self._finished[key]
        else:
            self.stats.proposed += 1
            sch, why = replay(self.func, trace, self.space.postprocs, seed=self.seed(), resample=resample)
            if sch is not None and not self.admits(sch.trace):
                sch, why = None, "does not keep the space's pinned decisions"
            self.stats.valid += sch is not None
            if key is not None:
                if len(self._finished) >= self.CACHE_SIZE:  # forget the oldest replay
                    del self._finished[next(iter(self._finished))]
                self._finished[key] = (sch, why)
        return None if sch is None else Candidate(sch)

    def predict(self, candidates: Sequence[Candidate]) -> np.ndarray:
        """Cost-model scores, also stored on the candidates."""
        if not candidates:
            return np.zeros(0)
        scores = np.asarray(self.cost_model.predict([c.sch for c in candidates]), dtype=float)
        self.stats.scored += len(candidates)
        for c, s in zip(candidates, scores):
            c.predicted = float(s)
        return scores

    def random_candidates(self, n: int, max_tries: Optional[int] = None) -> list[Candidate]:
        """Up to ``n`` valid random points of the space: the space generator run again with
        fresh seeds, one of the schedules it returns (drawn uniformly) per run (at most
        ``max_tries`` runs).

        Not the design-space traces replayed with new decisions (:meth:`replayed_sample`): a
        trace keeps the instructions its rules emitted for its own decisions, so replaying it
        with others misses structures the rules would have built — on TBG, one replayed
        design space never inlined a stage that a fifth of the generated schedules inline.

        One schedule per run, not all of them: the schedules of one run share every decision
        drawn before a rule forked them — multi-level tiling samples the tile sizes, then
        branches into no write cache and a cache at each level — so taking all three of C2D's
        sketches made a batch of 16 random samples hold only 6 distinct tilings. TVM draws
        each sample of its initial population from one design space picked at random, with
        fresh decisions; so does this. A run costs about as much CPU as postprocessing its
        schedules (tens of ms), far below building and timing a candidate."""
        from ..space import run_postprocs

        out: list[Candidate] = []
        tries = max_tries if max_tries is not None else 2 * n + 8
        for _ in range(tries):
            if len(out) >= n:
                break
            spaces = self.space.generate_design_space(self.func, seed=self.seed())
            if not spaces:
                continue
            sch = self.rng.choice(spaces)
            self.stats.proposed += 1
            if run_postprocs(sch, self.space.postprocs) is None:
                self.stats.valid += 1
                out.append(Candidate(sch))
        return out

    def replayed_sample(self) -> Optional[Candidate]:
        """One of the design-space traces replayed with fresh decisions (None if invalid)."""
        return self.finish(self.rng.choice(self.design_spaces).trace, resample=True)

    def admits(self, trace: Trace) -> bool:
        """Whether a candidate's trace keeps the space's pinned decisions (a database record
        of an earlier search without those pins does not; spaces without pins admit all)."""
        admits = getattr(self.space, "admits", None)
        return admits is None or admits(trace)

    def take_new(self, candidates: Sequence[Candidate], n: int) -> list[Candidate]:
        """The first ``n`` candidates not seen before that keep the pins (marking them seen)."""
        out: list[Candidate] = []
        for c in candidates:
            if len(out) >= n:
                break
            if c.hash not in self.seen and self.admits(c.trace):
                self.seen.add(c.hash)
                out.append(c)
        return out


class SearchStrategy:
    """Base class: ``initialize(ctx)``, ``propose(n)``, ``notify(candidates, results)``."""

    def initialize(self, ctx: SearchContext) -> None:
        self.ctx = ctx

    def propose(self, n: int) -> list[Candidate]:
        t0 = time.perf_counter()
        try:
            return self._propose(n)
        finally:
            self.ctx.stats.seconds += time.perf_counter() - t0

    def _propose(self, n: int) -> list[Candidate]:
        raise NotImplementedError

    def notify(self, candidates: Sequence[Candidate], results: Sequence[Any]) -> None:
        """Called with the measured results of the last proposal (default: nothing)."""

    @staticmethod
    def create(spec: Any = "evolutionary") -> "SearchStrategy":
        """``"evolutionary"``, ``"replay_trace"``, ``"replay_func"`` (also ``"random"``), a
        strategy (returned unchanged) or a strategy class."""
        if isinstance(spec, SearchStrategy):
            return spec
        if isinstance(spec, type) and issubclass(spec, SearchStrategy):
            return spec()
        table = {
            "evolutionary": EvolutionarySearch,
            "replay_trace": ReplayTrace,
            "replay_func": ReplayFunc,
            "random": ReplayFunc,
        }
        if spec not in table:
            raise ValueError(f"unknown search strategy {spec!r}; known: {', '.join(table)}")
        return table[spec]()


class ReplayTrace(SearchStrategy):
    """Random points of the space: the design-space traces replayed with new decisions.

    Gives up after ``max_misses`` samples in a row that were invalid or already seen: the
    space (what is left of it) is exhausted, as far as random sampling can tell."""

    def __init__(self, max_misses: int = 128):
        self.max_misses = max_misses

    def _propose(self, n: int) -> list[Candidate]:
        ctx = self.ctx
        out: list[Candidate] = []
        misses = 0
        while len(out) < n and misses < self.max_misses:
            sample = ctx.replayed_sample()
            new = ctx.take_new([sample] if sample else [], 1)
            out += new
            misses = 0 if new else misses + 1
        return out


class ReplayFunc(SearchStrategy):
    """Random search: run the space generator again with a fresh seed for new candidates."""

    def _propose(self, n: int) -> list[Candidate]:
        ctx = self.ctx
        out: list[Candidate] = []
        for _ in range(8):
            if len(out) >= n:
                break
            out += ctx.take_new(ctx.random_candidates(n - len(out)), n - len(out))
        return out


class InitSampler(Protocol):
    """What ``EvolutionarySearch(init_sampler=...)`` needs (``LearnedSampling`` is one)."""

    def initialize(self, ctx: SearchContext) -> None: ...

    def candidates(self, n: int) -> list[Candidate]: ...


class EvolutionarySearch(SearchStrategy):
    """Cost-model-guided evolution of traces (see the module docstring).

    ``population_size`` chains; ``init_measured_ratio`` of them start from the database's best
    traces, the rest from random samples; ``num_iters`` generations in which each chain
    proposes a mutant (with probability ``mutate_prob``; a failed mutation is retried up to
    ``max_fail_count`` times) accepted with probability ``min(1, exp((s' - s) / T))``, the
    temperature going from ``temperature`` down by ``cooling`` each generation.

    Picking the batch, for budgets of tens of trials where the cost model has seen only a few
    dozen records (its rank correlation on held-out random candidates is then 0.1-0.4, and 64
    random samples already hold one of the fastest few percent of the space): ``local_share``
    of the batch are *neighbours of the fastest measured traces* — ``neighbours_per_elite``
    mutants (one or two mutations) of each of the ``num_elites`` best records, the best
    predicted first — a local search that finds what random sampling does not, even when the
    model's global ranking is poor; the rest are the best predicted of the evolved pool, at
    most ``max_same_structure`` of them sharing a *structure* (the decisions other than tile
    sizes: compute locations, unroll steps — mutators change those rarely, so the picks would
    otherwise crowd on the first good structure); ``eps_greedy`` of the batch are random
    unmeasured samples (from the space generator, like :class:`ReplayFunc`).

    ``init_sampler``: a strategy with ``candidates(n)`` (``LearnedSampling``) that draws the
    random part of the initial population instead of the space generator.
    """

    def __init__(
        self,
        population_size: int = 64,
        init_measured_ratio: float = 0.2,
        num_iters: int = 2,
        mutate_prob: float = 0.85,
        max_fail_count: int = 4,
        eps_greedy: float = 0.1,
        temperature: float = 0.1,
        cooling: float = 0.5,
        max_same_structure: float = 0.25,
        local_share: float = 0.4,
        num_elites: int = 4,
        neighbours_per_elite: int = 12,
        init_sampler: Optional[InitSampler] = None,
    ):
        self.init_sampler = init_sampler
        self.population_size = population_size
        self.init_measured_ratio = init_measured_ratio
        self.local_share = local_share
        self.num_elites = num_elites
        self.neighbours_per_elite = neighbours_per_elite
        self.num_iters = num_iters
        self.mutate_prob = mutate_prob
        self.max_fail_count = max_fail_count
        self.eps_greedy = eps_greedy
        self.temperature = temperature
        self.cooling = cooling
        self.max_same_structure = max_same_structure

    def initialize(self, ctx: SearchContext) -> None:
        super().initialize(ctx)
        if self.init_sampler is not None:
            self.init_sampler.initialize(ctx)

    def _initial_population(self) -> list[Candidate]:
        ctx = self.ctx
        n_best = int(self.population_size * self.init_measured_ratio)
        best = []
        for rec in ctx.database.top_k(ctx.func, ctx.target, n_best):
            cand = ctx.finish(rec.trace)
            if cand is not None:
                best.append(cand)
        n_random = self.population_size - len(best)
        if self.init_sampler is not None:
            return best + self.init_sampler.candidates(n_random)
        return best + ctx.random_candidates(n_random)

    def _mutate(self, parent: Candidate) -> Optional[Candidate]:
        ctx = self.ctx
        mutators, probs = list(ctx.mutators), list(ctx.mutators.values())
        if not mutators:
            return None
        for _ in range(self.max_fail_count):
            mutator = ctx.rng.choices(mutators, weights=probs)[0]
            trace = mutator.apply(parent.trace, ctx.rng)
            if trace is None:
                continue
            child = ctx.finish(trace)
            if child is not None:
                return child
        return None

    def _neighbours(self) -> list[Candidate]:
        """Unmeasured mutants of the fastest measured traces, the best predicted first."""
        ctx = self.ctx
        found: dict[str, Candidate] = {}
        for rec in ctx.database.top_k(ctx.func, ctx.target, self.num_elites):
            elite = ctx.finish(rec.trace)
            for _ in range(self.neighbours_per_elite if elite is not None else 0):
                assert elite is not None  # no iteration otherwise
                child = self._mutate(elite)
                if child is not None and ctx.rng.random() < 0.5:
                    child = self._mutate(child) or child
                if child is not None and child.hash not in ctx.seen:
                    found.setdefault(child.hash, child)
        ranked = list(found.values())
        ctx.predict(ranked)
        return sorted(ranked, key=lambda c: -(c.predicted or 0.0))

    def _propose(self, n: int) -> list[Candidate]:
        ctx = self.ctx
        population = self._initial_population()
        if not population:
            return []
        scores = ctx.predict(population)
        pool: dict[str, Candidate] = {c.hash: c for c in population if c.hash not in ctx.seen}
        temperature = self.temperature
        for _ in range(self.num_iters):
            weights = scores - scores.min() + 1e-6
            parents = ctx.rng.choices(range(len(population)), weights=weights.tolist(), k=len(population))
            children: list[Candidate] = []
            for p in parents:
                child = self._mutate(population[p]) if ctx.rng.random() < self.mutate_prob else None
                children.append(child if child is not None else population[p])
            child_scores = ctx.predict(children)
            next_pop, next_scores = [], []
            for p, child, s_child in zip(parents, children, child_scores):
                s_parent = scores[p]
                delta = (s_child - s_parent) / max(temperature, 1e-9)
                if delta >= 0 or ctx.rng.random() < math.exp(delta):
                    next_pop.append(child)
                    next_scores.append(s_child)
                else:
                    next_pop.append(population[p])
                    next_scores.append(s_parent)
                if child.hash not in ctx.seen:
                    pool.setdefault(child.hash, child)
            population, scores = next_pop, np.array(next_scores)
            temperature *= self.cooling
        ranked = sorted(pool.values(), key=lambda c: -(c.predicted or 0.0))
        n_random = int(round(n * self.eps_greedy))
        n_local = int(round(n * self.local_share))
        picked = ctx.take_new(self._neighbours(), n_local)
        picked += ctx.take_new(
            _diverse(ranked, n - n_random - len(picked), self.max_same_structure), n - n_random - len(picked)
        )
        explore = ctx.random_candidates(n_random + 2)
        ctx.predict(explore)
        picked += ctx.take_new(explore, n - len(picked))
        if len(picked) < n:  # the predicted pool ran dry: fill with fresh random samples
            picked += ctx.take_new(ranked, n - len(picked))
            extra = ctx.random_candidates(2 * (n - len(picked)))
            ctx.predict(extra)
            picked += ctx.take_new(extra, n - len(picked))
        return picked


def structure(cand: Candidate) -> tuple:
    """The candidate's decisions other than tile sizes (see ``max_same_structure``)."""
    return tuple(
        repr(i.decision)
        for i in cand.trace.insts
        if i.kind.is_sampling and i.kind.name != "sample_perfect_tile"
    )


def _diverse(ranked: Sequence[Candidate], n: int, share: float) -> list[Candidate]:
    """The best-ranked candidates, at most ``share`` of ``n`` per structure; the rest of the
    ranking follows, so a space with few structures still fills the batch."""
    cap = max(1, int(share * n))
    counts: dict[tuple, int] = {}
    first: list[Candidate] = []
    later: list[Candidate] = []
    for c in ranked:
        key = structure(c)
        counts[key] = counts.get(key, 0) + 1
        (first if counts[key] <= cap else later).append(c)
    return first + later
