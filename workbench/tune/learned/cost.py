"""A decision-aware cost model that ranks: the program features plus the trace's decisions (as
the tensor sentence encodes them) and the workload, trained with a pairwise ranking objective
within each workload, so records of other tasks help (:meth:`DecisionAwareModel.pretrain`)
instead of fighting over one regression scale. ``rank_metrics`` is how it was judged.
"""

from __future__ import annotations

import json
import weakref
from typing import Any, Iterable, Sequence

import numpy as np

from ...ir.func import PrimFunc
from ...ir.parser import parse
from ..cost_model import XGBModel
from ..database.base import Database
from ..runner import MeasureResult
from .model import decision_features
from .sentence import sentence_of

#: decisions encoded per candidate (a longer trace's later decisions are left out)
SLOTS = 12
#: columns per encoded decision: its :func:`decision_features`, axis S / R, log2 extent
SLOT_COLUMNS = 8 + 3
_SENTENCES: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()


def decision_vector(candidate: Any, target: str = "llvm") -> np.ndarray:
    """The workload features and the first :data:`SLOTS` decisions of a candidate's trace
    (zeros for a bare function)."""
    trace = getattr(candidate, "trace", None)
    base = getattr(trace, "base_func", None) if trace is not None else None
    width = 9 + SLOTS * SLOT_COLUMNS
    if base is None:
        return np.zeros(width)
    ir = _SENTENCES.get(base)
    if ir is None:
        ir = _SENTENCES[base] = (str(base),)
    sentence = sentence_of(trace, ir[0], target)
    out = list(sentence.workload)
    for word in sentence.words[:SLOTS]:
        out += decision_features(word, word.decision)
        out += [
            float(word.axis == "S"),
            float(word.axis == "R"),
            float(np.log2(word.extent)) if word.extent > 0 else 0.0,
        ]
    out += [0.0] * (width - len(out))
    return np.asarray(out, dtype=float)


class DecisionAwareModel(XGBModel):
    """:class:`XGBModel` with decision features (``decisions``) and a ranking objective
    (``objective="rank:pairwise"``, groups = workloads; ``"reg:squarederror"`` regresses the
    normalized throughput like ``XGBModel``)."""

    def __init__(
        self,
        seed: int = 0,
        num_rounds: int = 60,
        max_depth: int = 6,
        learning_rate: float = 0.2,
        objective: str = "rank:pairwise",
        decisions: bool = True,
    ):
        super().__init__(seed, num_rounds, max_depth, learning_rate)
        self.params["objective"] = objective
        self.decisions = decisions
        width = self.x.shape[1] + (9 + SLOTS * SLOT_COLUMNS if decisions else 0)
        self.x = np.zeros((0, width))

    def features(self, candidates: Sequence[Any]) -> np.ndarray:
        program = super().features(candidates)
        if not self.decisions:
            return program
        return np.hstack([program, np.array([decision_vector(c) for c in candidates])])

    def pretrain(self, candidates: Sequence[Any], results: Sequence[Any]) -> None:
        """Learn from other tasks' measured records first (their own ranking groups)."""
        self.update(candidates, results)

    def fit(self, x, y) -> None:
        if self.fallback is not None or not str(self.params["objective"]).startswith("rank:"):
            super().fit(x, y)
            return
        import xgboost as xgb

        groups = np.array(self.groups)
        names = {g: k for k, g in enumerate(dict.fromkeys(self.groups))}
        qid = np.array([names[g] for g in groups])
        order = np.argsort(qid, kind="stable")
        dtrain = xgb.DMatrix(x[order], label=y[order], qid=qid[order])
        self.booster = xgb.train(self.params, dtrain, num_boost_round=self.num_rounds)

    def save(self, path: str) -> None:
        super().save(path)
        with open(path) as f:
            extra = json.load(f)
        extra.update(model="decision_aware", decisions=self.decisions)
        with open(path, "w") as f:
            json.dump(extra, f)

    @classmethod
    def load(cls, path: str) -> "DecisionAwareModel":
        with open(path) as f:
            extra = json.load(f)
        model = cls(decisions=extra.get("decisions", True))
        model._load_data(path)
        model.params, model.num_rounds = extra["params"], extra["num_rounds"]
        if len(model.x):
            model.fit(model.x, model.targets())
        return model

    @classmethod
    def pretrained(
        cls, databases: Iterable[Any], limit_per_task: int = 32, **kwargs: Any
    ) -> "DecisionAwareModel":
        """A model trained on the records of ``databases`` (paths or ``Database`` objects):
        each workload's function is parsed back from its stored IR text, the records replayed
        on it. Workloads whose text does not parse are skipped."""
        model = cls(**kwargs)
        cands, results = [], []
        for db in databases:
            own = not hasattr(db, "workloads")
            db = Database.open(db) if own else db
            try:
                for entry in db.workloads():
                    try:
                        func = parse(entry.ir)
                    except Exception:  # text of another version: skip the workload
                        continue
                    if not isinstance(func, PrimFunc):  # a workload is one function
                        continue
                    for rec in db.records_of(entry)[:limit_per_task]:
                        try:
                            cands.append(rec.schedule(func))
                        except Exception:
                            continue
                        results.append(MeasureResult(rec.status, rec.latencies, rec.error))
            finally:
                if own:
                    db.close()
        if cands:
            model.pretrain(cands, results)
        return model


def rank_metrics(predicted: Sequence[float], latencies: Sequence[float], k: int = 16) -> tuple[float, float]:
    """(Spearman rank correlation of predicted score and throughput, top-``k`` recall: the
    share of the ``k`` fastest records among the ``k`` best predicted) over records that ran."""
    pred = np.asarray(predicted, dtype=float)
    lat = np.asarray(latencies, dtype=float)
    ok = np.isfinite(lat)
    pred, lat = pred[ok], lat[ok]
    if len(lat) < 3:
        return float("nan"), float("nan")
    ra = np.argsort(np.argsort(pred)).astype(float)
    rb = np.argsort(np.argsort(-lat)).astype(float)
    rho = float(np.corrcoef(ra, rb)[0, 1]) if ra.std() > 0 and rb.std() > 0 else 0.0
    k = min(k, len(lat))
    best = set(np.argsort(lat)[:k])
    picked = set(np.argsort(-pred, kind="stable")[:k])
    return rho, len(best & picked) / k
