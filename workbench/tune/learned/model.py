"""The decision model: proposes each sampling decision of a trace, in trace order, given the
tensor sentence so far (workload, target, the decisions already made).

It is a *scorer*: one classifier over (context, candidate decision) rows says how likely the
candidate is to belong to a fast program — a record in the top ``top_fraction`` of its task —
and the proposal distribution over a decision's valid candidates is ``softmax(logit / T)``.
All decisions share one encoding (:func:`features`), so what it learns about tiling a spatial
loop of extent 64 into four parts transfers to another workload's loop of that kind; the
context carries the decisions so far (the inner tile volume already chosen, the previous
decision), which makes the proposal autoregressive. ``backend="xgb"`` (gradient-boosted trees,
the default) or ``"linear"`` (logistic regression in numpy); ``docs/design.md`` says which
measured better and by how much::

    model = DecisionModel.train([db_a, db_b])          # databases of measured records
    sch = Schedule(func, seed=0)
    trace.apply_to_schedule(sch, decision_provider=model.provider(sch, trace, "llvm"))
    model.distribution(sch, k)                           # {decision: p} for sampling step k
    model.save("model/"); DecisionModel.load("model/")
"""

from __future__ import annotations

import json
import math
import os
import random
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from ...schedule import Schedule
from ...schedule.primitives.compute_location import compute_location_candidates
from ...ir.index import index
from ..database.base import Database
from .sentence import (
    KINDS,
    TensorSentence,
    Word,
    block_axes,
    sentence_of_record,
    target_features,
    word_of,
    workload_features,
)

#: at most this many candidates of one decision are scored (a random subset beyond)
MAX_CANDIDATES = 600
#: columns per decision encoding (:func:`decision_features`)
DECISION_COLUMNS = 8
FORMAT = "workbench.decision_model/1"


# encoding --------------------------------------------------------------------------------------


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else 0.0


def decision_features(word: Word, decision: Any) -> list[float]:
    """A decision as :data:`DECISION_COLUMNS` numbers: a tiling's log2 factors (innermost
    first), outermost factor and inner volume; a categorical's value and index; a compute
    location's position and whether it inlines or stays at the root."""
    if decision is None:
        return [0.0] * DECISION_COLUMNS
    if word.kind == "tile":
        logs = [_log2(f) for f in decision]
        inner = logs[::-1][:4] + [0.0] * (4 - min(len(logs), 4))
        total = _log2(word.extent) or 1.0
        return inner + [logs[0], sum(logs[1:]), logs[-1] / total, logs[0] / total]
    if word.kind == "cat":
        value = word.candidates[decision] if 0 <= decision < len(word.candidates) else 0
        span = max(len(word.candidates) - 1, 1)
        return [_log2(1 + value), float(decision), decision / span, 0.0, 0.0, 0.0, 0.0, 0.0]
    return [
        float(decision),
        float(decision == -2),
        float(decision == -1),
        float(decision >= 0),
        0.0,
        0.0,
        0.0,
        0.0,
    ]


#: the context columns of :func:`context_features` (after workload and target features)
CONTEXT_NAMES = (
    "kind_tile",
    "kind_cat",
    "kind_loc",
    "axis_S",
    "axis_R",
    "axis_O",
    "pos",
    "last",
    "log2_extent",
    "n",
    "log2_max_inner",
    "index",
    "words",
    "inner_S_so_far",
    "inner_R_so_far",
    "outer_S_so_far",
    "tiles_so_far",
)


def context_features(
    workload: Sequence[float],
    target: Sequence[float],
    prefix: Sequence[Word],
    word: Word,
    index: int,
    n_words: int,
) -> list[float]:
    """What a decision is conditioned on: the workload, the target, what it decides, and the
    decisions so far (summarized: the inner tile volume and outer parallel extent already
    chosen, and the previous decision itself)."""
    inner_s = inner_r = outer_s = 0.0
    tiles = 0
    for w in prefix:
        if w.kind == "tile" and w.decision:
            tiles += 1
            if w.axis == "R":
                inner_r += _log2(w.decision[-1])
            else:
                inner_s += _log2(w.decision[-1])
                outer_s += _log2(w.decision[0])
    prev = prefix[-1] if prefix else None
    prev_kind = [float(prev is not None and prev.kind == k) for k in ("tile", "cat", "loc")]
    return (
        list(workload)
        + list(target)
        + [float(word.kind == k) for k in ("tile", "cat", "loc")]
        + [float(word.axis == a) for a in ("S", "R", "O")]
        + [
            float(word.pos),
            float(word.last),
            _log2(word.extent),
            float(word.n),
            _log2(word.max_inner),
            float(index),
            float(n_words),
            inner_s,
            inner_r,
            outer_s,
            float(tiles),
        ]
        + prev_kind
        + (decision_features(prev, prev.decision) if prev else [0.0] * DECISION_COLUMNS)
    )


def rows_of(sentence: TensorSentence) -> list[list[float]]:
    """One feature row per decision of a sentence (context + the decision made)."""
    out = []
    for k, word in enumerate(sentence.words):
        ctx = context_features(
            sentence.workload, sentence.target, sentence.words[:k], word, k, len(sentence.words)
        )
        out.append(ctx + decision_features(word, word.decision))
    return out


def tilings(extent: int, parts: int, max_inner: int = 0) -> list[tuple[int, ...]]:
    """Every ordered factorization of ``extent`` into ``parts`` factors, innermost at most
    ``max_inner`` (0: no limit)."""
    out: list[tuple[int, ...]] = []

    def extend(prefix: tuple, rest: int, left: int) -> None:
        if left == 1:
            if not max_inner or parts == 1 or rest <= max_inner:
                out.append(prefix + (rest,))
            return
        for d in range(1, rest + 1):
            if rest % d == 0:
                extend(prefix + (d,), rest // d, left - 1)

    extend((), extent, parts)
    return out


# the model --------------------------------------------------------------------------------------


class DecisionModel:
    """See the module docstring. ``temperature`` sharpens (below 1) or flattens proposals."""

    def __init__(
        self,
        backend: str = "xgb",
        temperature: float = 0.5,
        top_fraction: float = 0.2,
        num_rounds: int = 60,
        max_depth: int = 2,
        seed: int = 0,
    ):
        if backend not in ("xgb", "linear"):
            raise ValueError(f"unknown decision-model backend {backend!r}: 'xgb' or 'linear'")
        if not temperature > 0:
            raise ValueError(f"temperature must be positive, got {temperature!r}")
        self.backend, self.temperature, self.top_fraction = backend, temperature, top_fraction
        self.num_rounds, self.max_depth, self.seed = num_rounds, max_depth, seed
        self.booster: Any = None
        self.coef: Any = None  # the linear backend's weights, means and scales
        self.mean: Any = None
        self.std: Any = None
        self.trained_on: dict = {}

    # training ----------------------------------------------------------------------------
    @classmethod
    def train(cls, databases: Iterable[Any], target: Optional[str] = None, **kwargs: Any) -> "DecisionModel":
        """A model trained on every record of ``databases`` (paths or ``Database`` objects;
        only ``target``'s records when given)."""
        model = cls(**kwargs)
        model.fit(list(tasks_of(databases, target).values()))
        return model

    def fit(self, tasks: Sequence[Sequence[tuple[TensorSentence, float]]]) -> "DecisionModel":
        """Train on measured sentences grouped by task: ``[[(sentence, latency), ...], ...]``
        (latency ``inf``: failed). Within each task the fastest ``top_fraction`` are the
        positive examples, every other record a negative one."""
        x, y = [], []
        n_records = 0
        for records in tasks:
            lat = np.array([r[1] for r in records], dtype=float)
            ok = np.isfinite(lat)
            if ok.sum() < 2:
                continue
            cut = np.quantile(lat[ok], self.top_fraction)
            for sentence, latency in records:
                rows = rows_of(sentence)
                x += rows
                y += [float(latency <= cut)] * len(rows)
                n_records += 1
        if not x or len(set(y)) < 2:
            raise ValueError(
                "the decision model needs measured records of at least one task "
                "with two or more successful candidates"
            )
        xa, ya = np.asarray(x, dtype=float), np.asarray(y)
        if self.backend == "xgb":
            import xgboost as xgb

            params = {
                "objective": "binary:logistic",
                "max_depth": self.max_depth,
                "eta": 0.15,
                "subsample": 0.9,
                "min_child_weight": 2,
                "seed": self.seed,
                "nthread": 1,
                "verbosity": 0,
            }
            self.booster = xgb.train(params, xgb.DMatrix(xa, label=ya), self.num_rounds)
        else:
            self.coef = _logistic(xa, ya, self)
        self.trained_on = {"tasks": len(tasks), "records": n_records, "rows": len(x)}
        return self

    def logits(self, rows: np.ndarray) -> np.ndarray:
        """log-odds that each (context, decision) row belongs to a fast program."""
        if self.backend == "xgb":
            if self.booster is None:
                raise RuntimeError("the decision model is not trained (DecisionModel.train)")
            return self.booster.inplace_predict(rows, predict_type="margin")
        if self.coef is None:
            raise RuntimeError("the decision model is not trained (DecisionModel.train)")
        z = np.hstack([(rows - self.mean) / self.std, np.ones((len(rows), 1))])
        return z @ self.coef

    # proposing ----------------------------------------------------------------------------
    def probabilities(
        self,
        workload: Sequence[float],
        target: Sequence[float],
        prefix: Sequence[Word],
        word: Word,
        candidates: Sequence[Any],
        index: int,
        n_words: int,
        temperature: Optional[float] = None,
    ) -> np.ndarray:
        """The proposal distribution over ``candidates`` of the decision ``word`` (its
        context; its decision is ignored), at ``temperature`` (default: the model's)."""
        ctx = context_features(workload, target, prefix, word, index, n_words)
        rows = np.array([ctx + decision_features(word, c) for c in candidates], dtype=float)
        z = np.asarray(self.logits(rows), dtype=float) / (temperature or self.temperature)
        z = np.exp(z - z.max())
        return z / z.sum()

    def provider(
        self,
        sch: Schedule,
        trace: Any,
        target: Any = "llvm",
        rng: Optional[random.Random] = None,
        temperature: Optional[float] = None,
    ) -> "Proposer":
        """A ``decision_provider`` replaying ``trace`` onto ``sch`` (a fresh schedule of the
        trace's function) with each unpinned decision drawn from this model (at
        ``temperature``, default the model's)."""
        return Proposer(
            self, sch, trace, target, rng or random.Random(self.seed), temperature or self.temperature
        )

    def distribution(self, sch: Schedule, k: int, target: Any = "llvm") -> dict:
        """``{decision: probability}`` the model gives the sampling instruction at position
        ``k`` of ``sch.trace``, given the decisions before it (for the pin panel); tilings are
        tuples."""
        inst = sch.trace[k]
        if not inst.kind.is_sampling or inst.kind.name not in KINDS:
            raise ValueError(
                f"instruction {k} ({inst.kind.name}) is not a sampling instruction "
                f"the decision model knows ({', '.join(KINDS)})"
            )
        base = sch.history[0][1]
        ir = str(base)
        words, word, cands = _live_context(
            sch.trace.insts[:k], inst, inst.args, sch.history[k][1], sch.symbols, ir
        )
        n_words = sum(i.kind.name in KINDS for i in sch.trace.insts)
        probs = self.probabilities(
            workload_features(ir), target_features(target), words, word, cands, len(words), n_words
        )
        return {c: float(p) for c, p in zip(cands, probs)}

    # persistence --------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Write the model into the folder ``path`` (created): ``decision_model.json`` and the
        booster (xgb) or the coefficients (linear)."""
        os.makedirs(path, exist_ok=True)
        meta = {
            "format": FORMAT,
            "backend": self.backend,
            "temperature": self.temperature,
            "top_fraction": self.top_fraction,
            "num_rounds": self.num_rounds,
            "max_depth": self.max_depth,
            "seed": self.seed,
            "trained_on": self.trained_on,
        }
        if self.backend == "xgb":
            if self.booster is None:
                raise RuntimeError("cannot save an untrained decision model")
            self.booster.save_model(os.path.join(path, "decision_model.ubj"))
        else:
            meta.update(coef=self.coef.tolist(), mean=self.mean.tolist(), std=self.std.tolist())
        with open(os.path.join(path, "decision_model.json"), "w") as f:
            json.dump(meta, f, indent=1)

    @classmethod
    def load(cls, path: str) -> "DecisionModel":
        meta_path = os.path.join(path, "decision_model.json")
        if not os.path.exists(meta_path):
            raise FileNotFoundError(
                f"{path}: no decision model here (expected "
                f"decision_model.json; train one with `workbench learn`)"
            )
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("format") != FORMAT:
            raise ValueError(f"{meta_path}: not a decision model ({FORMAT})")
        model = cls(
            meta["backend"],
            meta["temperature"],
            meta["top_fraction"],
            meta["num_rounds"],
            meta["max_depth"],
            meta["seed"],
        )
        model.trained_on = meta.get("trained_on", {})
        if model.backend == "xgb":
            import xgboost as xgb

            model.booster = xgb.Booster()
            model.booster.load_model(os.path.join(path, "decision_model.ubj"))
        else:
            model.coef, model.mean, model.std = (np.array(meta[k]) for k in ("coef", "mean", "std"))
        return model

    def __repr__(self) -> str:
        what = ", ".join(f"{k}={v}" for k, v in self.trained_on.items()) or "untrained"
        return f"<DecisionModel {self.backend} T={self.temperature} ({what})>"


def _logistic(
    x: np.ndarray, y: np.ndarray, model: DecisionModel, l2: float = 1.0, iters: int = 25
) -> np.ndarray:
    """L2-regularized logistic regression by Newton's method on standardized features."""
    model.mean, model.std = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = np.hstack([(x - model.mean) / model.std, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    reg = l2 * np.eye(z.shape[1])
    reg[-1, -1] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (p - y) + reg @ w
        hess = (z * (p * (1 - p))[:, None]).T @ z + reg
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-6:
            break
    return w


# live context -----------------------------------------------------------------------------------


def _live_context(
    prefix_insts: Sequence[Any], inst: Any, args: Mapping[str, Any], func: Any, symbols: dict, ir: str
) -> tuple[list[Word], Word, list]:
    """The words decided so far (from the instructions already applied), the word of ``inst``
    (its context, the live loop extent) and its valid candidates, given the function before it
    and the schedule's symbol table (``args`` are live random variables)."""
    axes = block_axes(ir)
    where: dict = {}
    words: list[Word] = []
    for prev in prefix_insts:
        _track(prev, where)
        if prev.kind.is_sampling and prev.kind.name in KINDS:
            words.append(word_of(prev, prev.decision, where, axes))
    kind = KINDS[inst.kind.name]
    live = _LiveInst(inst.kind, args)
    if kind == "tile":
        loop = index(func).loops.get(symbols.get(args["loop"]))  # type: ignore[arg-type]
        extent = loop.extent.value if loop is not None and hasattr(loop.extent, "value") else 0
        word = word_of(live, None, where, axes, extent=extent)
        cands: list = tilings(extent, word.n, word.max_inner) if extent else []
    elif kind == "cat":
        word = word_of(live, None, where, axes)
        cands = [i for i, p in enumerate(args["probs"]) if p > 0]
    else:
        word = word_of(live, None, where, axes)
        realize = index(func).realizes.get(symbols.get(args["block"]))  # type: ignore[arg-type]
        cands = compute_location_candidates(func, realize.block)[0] if realize is not None else [-1]
    return words, word, cands


class _LiveInst:
    """An instruction's kind with other arguments (the live random variables)."""

    def __init__(self, kind: Any, args: Mapping[str, Any]):
        self.kind, self.args = kind, args


def _track(inst: Any, where: dict) -> None:
    """Remember which block / which loop of which block a random variable stands for."""
    if inst.kind.name == "get_block":
        where[inst.outputs[0]] = ("block", inst.args.get("name"))
    elif inst.kind.name == "get_loops":
        src = where.get(inst.args.get("block"))
        for k, rv in enumerate(inst.outputs):
            where[rv] = ("loop", src[1] if src else None, k)


class Proposer:
    """The ``decision_provider`` of :meth:`DecisionModel.provider`: draws each unpinned
    decision from the model, conditioned on every decision applied before it (pinned ones
    included). ``log_prob`` sums the log-probabilities of its draws; ``proposed`` counts them.
    """

    def __init__(
        self,
        model: DecisionModel,
        sch: Schedule,
        trace: Any,
        target: Any,
        rng: random.Random,
        temperature: float,
    ):
        self.model, self.sch, self.rng, self.temperature = model, sch, rng, temperature
        self.source = list(trace.insts)
        self.position = {id(inst): k for k, inst in enumerate(self.source)}
        self.ir = str(sch.func)
        self.workload = workload_features(self.ir)
        self.target = target_features(target)
        self.n_words = sum(i.kind.name in KINDS for i in self.source)
        self.log_prob = 0.0
        self.proposed = 0

    def __call__(self, inst: Any, decision: Any) -> Any:
        if inst.kind.name not in KINDS:
            return None  # a sampling kind the model does not know
        k = self.position.get(id(inst))
        applied = self.sch.trace.insts
        if k is None or len(applied) != k:
            raise RuntimeError(
                "the decision provider replays the trace it was made for, "
                "from the start, onto a fresh schedule"
            )
        args = self._live_args(inst, applied)
        words, word, cands = _live_context(applied, inst, args, self.sch.func, self.sch.symbols, self.ir)
        if not cands:
            return None
        if len(cands) > MAX_CANDIDATES:
            cands = self.rng.sample(cands, MAX_CANDIDATES)
        probs = self.model.probabilities(
            self.workload, self.target, words, word, cands, len(words), self.n_words, self.temperature
        )
        pick = self.rng.choices(range(len(cands)), weights=probs.tolist())[0]
        self.log_prob += math.log(max(probs[pick], 1e-300))
        self.proposed += 1
        choice = cands[pick]
        return list(choice) if isinstance(choice, tuple) else choice

    def _live_args(self, inst: Any, applied: Sequence[Any]) -> dict:
        """``inst``'s arguments with the source trace's random variables replaced by the live
        ones: the k-th applied instruction produced what the k-th source one did."""
        live: dict = {}
        for j, src in enumerate(self.source[: len(applied)]):
            live.update(zip(src.outputs, applied[j].outputs))
        return {
            name: live.get(v, v) if not isinstance(v, (list, tuple)) else v for name, v in inst.args.items()
        }


# databases --------------------------------------------------------------------------------------


def tasks_of(
    databases: Iterable[Any], target: Optional[str] = None
) -> dict[tuple, list[tuple[TensorSentence, float]]]:
    """``(workload hash, target) -> [(sentence, latency), ...]`` of every record."""
    out: dict[tuple, list] = {}
    for db in databases:
        own = not hasattr(db, "workloads")
        db = Database.open(db) if own else db
        try:
            for entry in db.workloads():
                if target is not None and entry.target != target:
                    continue
                for rec in db.records_of(entry):
                    try:
                        sentence = sentence_of_record(rec)
                    except Exception:  # a trace of primitives this build lacks
                        continue
                    if sentence is not None and sentence.words:
                        out.setdefault((entry.hash, entry.target), []).append((sentence, rec.latency))
        finally:
            if own:
                db.close()
    return out
