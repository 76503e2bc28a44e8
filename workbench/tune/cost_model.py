"""Cost models: predict how fast a candidate will be, from its features, before measuring it.

A model scores candidates (higher = faster) and learns from measured ones::

    model = XGBModel()                        # or "xgb", "random", a CostModel subclass
    model.update(candidates, results)         # each candidate: a Schedule or a PrimFunc
    scores = model.predict(candidates)        # np.ndarray, one score per candidate
    model.save("model.json"); model = XGBModel.load("model.json")

Scores are *normalized throughputs*: for each workload, ``best latency / latency`` of its
measured records (1.0 for the best so far, 0 for a failed candidate), so several workloads of
very different sizes train one model. Only the order of scores matters to the search.

A user model subclasses :class:`CostModel` and implements ``update`` and ``predict`` (features
from :mod:`workbench.tune.features` are optional: a model may look at the IR directly).
"""

from __future__ import annotations

import json
import os
import random
import warnings
from typing import Any, Optional, Sequence

import numpy as np

from . import features as _features
from .database.base import Database, func_hash, target_str
from .runner import MeasureResult


def _func(candidate: Any):
    return getattr(candidate, "func", candidate)


def _group(candidate: Any) -> Any:
    """The workload a candidate belongs to (to normalize its throughput within)."""
    sch = candidate
    hist = getattr(sch, "history", None)
    if hist:
        return func_hash(hist[0][1])
    return getattr(candidate, "workload", None)


def transfer_records(
    database: Database, target: Any, exclude: Sequence[str] = (), limit: int = 256, per_workload: int = 64
) -> tuple[list[Any], list[MeasureResult]]:
    """Schedules and results of ``database``'s trials of *other* workloads on ``target`` (those
    whose hash is not in ``exclude``): what a cost model learns from before a new task has more
    than a few records of its own.

    At tens of records the model ranks poorly (``bench/cost_model_rank.py``, held-out Spearman
    on TVM's records, six workloads: 0.48 / 0.55 at 16 / 32 records of the workload alone, 0.55 /
    0.59 with the other workloads' records). The scores are normalized per workload and the
    ranking pairs are formed within one, so another workload teaches which features make a
    candidate faster than its siblings, not absolute speeds. Each workload's function is parsed
    back from its stored IR text (workloads whose text does not parse are skipped) and at most
    ``per_workload`` of its trials, spread over its tune (the search's early random picks and
    its later refined ones alike), ``limit`` in all, are replayed on it."""
    skip, want = set(exclude), target_str(target)
    entries = [e for e in database.workloads() if e.target == want and e.hash not in skip and e.ir]
    if not entries or limit <= 0:
        return [], []
    from ..ir.func import PrimFunc
    from ..ir.parser import parse

    per = max(1, min(per_workload, limit // len(entries)))
    cands: list[Any] = []
    results: list[MeasureResult] = []
    for entry in entries:
        recs = database.records_of(entry)
        if not recs:
            continue
        try:
            func = parse(entry.ir)
        except Exception:  # text of another version: skip the workload
            continue
        if not isinstance(func, PrimFunc):
            continue
        picks = sorted({int(i) for i in np.linspace(0, len(recs) - 1, num=min(per, len(recs)))})
        for i in picks:
            rec = recs[i]
            try:
                sch = rec.schedule(func)
            except Exception:  # a record of another space / an unregistered primitive
                continue
            cands.append(sch)
            results.append(MeasureResult(rec.status, rec.latencies, rec.error))
    return cands, results


class CostModel:
    """Base class (see the module docstring). ``update`` may be called many times."""

    def update(self, candidates: Sequence[Any], results: Sequence[MeasureResult]) -> None:
        raise NotImplementedError

    def predict(self, candidates: Sequence[Any]) -> np.ndarray:
        raise NotImplementedError

    def save(self, path: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be saved")

    @classmethod
    def load(cls, path: str) -> "CostModel":
        raise NotImplementedError(f"{cls.__name__} cannot be loaded")

    @staticmethod
    def create(spec: Any = "xgb", seed: int = 0) -> "CostModel":
        """``"xgb"``, ``"random"``, a ``CostModel`` (returned unchanged) or a class."""
        if isinstance(spec, CostModel):
            return spec
        if isinstance(spec, type) and issubclass(spec, CostModel):
            return spec()
        if spec == "xgb":
            return XGBModel(seed=seed)
        if spec == "random":
            return RandomModel(seed=seed)
        raise ValueError(f"unknown cost model {spec!r}: use 'xgb', 'random' or a CostModel")


class RandomModel(CostModel):
    """Uniform random scores: the search without a learned guide (a baseline)."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    def update(self, candidates, results) -> None:
        pass

    def predict(self, candidates) -> np.ndarray:
        return np.array([self.rng.random() for _ in candidates])

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump({"model": "random"}, f)

    @classmethod
    def load(cls, path: str) -> "RandomModel":
        return cls()


class FeatureModel(CostModel):
    """Shared plumbing of models over feature vectors: the training set and its targets.

    Keeps every measured row (features, workload, latency) and recomputes the normalized
    throughputs on each update, since a new best changes every score of its workload.
    """

    def __init__(self):
        self.x = np.zeros((0, len(_features.FEATURE_NAMES)))
        self.groups: list[str] = []
        self.latencies = np.zeros(0)

    def features(self, candidates: Sequence[Any]) -> np.ndarray:
        return _features.extract_many([_func(c) for c in candidates])

    def update(self, candidates, results) -> None:
        if not candidates:
            return
        self.x = np.vstack([self.x, self.features(candidates)])
        self.groups += [str(_group(c)) for c in candidates]
        self.latencies = np.concatenate([self.latencies, [r.latency for r in results]])
        self.fit(self.x, self.targets())

    def targets(self) -> np.ndarray:
        """best latency of the row's workload / the row's latency (0 when it failed)."""
        y = np.zeros(len(self.latencies))
        groups = np.array(self.groups)
        for g in set(self.groups):
            mask = groups == g
            lat = self.latencies[mask]
            best = lat[np.isfinite(lat)].min() if np.isfinite(lat).any() else None
            y[mask] = 0.0 if best is None else np.where(np.isfinite(lat), best / lat, 0.0)
        return y

    def predict(self, candidates) -> np.ndarray:
        if not len(candidates):
            return np.zeros(0)
        return self.predict_features(self.features(candidates))

    def fit(self, x: np.ndarray, y: np.ndarray) -> None:
        raise NotImplementedError

    def predict_features(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _save_data(self, path: str, extra: dict) -> None:
        np.savez(
            path + ".data.npz", x=self.x, latencies=self.latencies, groups=np.array(self.groups, dtype=str)
        )
        with open(path, "w") as f:
            json.dump(extra, f)

    def _load_data(self, path: str) -> dict:
        with open(path) as f:
            extra = json.load(f)
        data = np.load(path + ".data.npz")
        width = self.x.shape[1]  # this model's, as its constructor set it
        if data["x"].ndim == 2 and data["x"].shape[1] != width:
            raise ValueError(
                f"{path}: this cost model was saved with {data['x'].shape[1]} features per "
                f"candidate; this version of workbench computes {width}. Train a new one (tuning "
                "retrains from the database's records)."
            )
        self.x, self.latencies = data["x"], data["latencies"]
        self.groups = [str(g) for g in data["groups"]]
        return extra


class RidgeModel(FeatureModel):
    """Ridge regression on the features: the stand-in for :class:`XGBModel` without xgboost.

    Much weaker than boosted trees (it cannot model thresholds such as "fits in cache"), but
    it needs only numpy and still ranks better than chance once a few dozen records exist.
    """

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha
        self.coef: Optional[np.ndarray] = None

    def fit(self, x, y) -> None:
        self.mean, self.std = x.mean(axis=0), x.std(axis=0) + 1e-9
        z = np.hstack([(x - self.mean) / self.std, np.ones((len(x), 1))])
        reg = self.alpha * np.eye(z.shape[1])
        reg[-1, -1] = 0.0
        self.coef = np.linalg.solve(z.T @ z + reg, z.T @ y)

    def predict_features(self, x) -> np.ndarray:
        if self.coef is None:
            return np.zeros(len(x))
        z = np.hstack([(x - self.mean) / self.std, np.ones((len(x), 1))])
        return z @ self.coef

    def save(self, path: str) -> None:
        self._save_data(path, {"model": "ridge", "alpha": self.alpha})

    @classmethod
    def load(cls, path: str) -> "RidgeModel":
        model = cls()
        model.alpha = model._load_data(path)["alpha"]
        if len(model.x):
            model.fit(model.x, model.targets())
        return model


def has_xgboost() -> bool:
    try:
        import xgboost  # noqa: F401
    except ImportError:
        return False
    return True


class XGBModel(FeatureModel):
    """Gradient-boosted trees (xgboost) on the features, retrained on every update.

    ``objective``: ``"rank:pairwise"`` (the default) learns the order of the candidates of each
    workload, the pairs formed within a workload only; ``"reg:squarederror"`` regresses the
    normalized throughput (TVM's choice). Only the order matters to the search, and on TVM's
    tuning records (``bench/cost_model_rank.py``, six workloads, 16 / 32 training records)
    the ranking objective's held-out Spearman correlation was 0.48 / 0.55 against 0.41 / 0.48.

    Without the ``xgboost`` package (a dependency of workbench: ``xgboost-cpu`` on Linux and
    Windows) the model warns and uses :class:`RidgeModel`'s regression instead.
    """

    def __init__(
        self,
        seed: int = 0,
        num_rounds: int = 60,
        max_depth: int = 6,
        learning_rate: float = 0.2,
        objective: str = "rank:pairwise",
    ):
        super().__init__()
        self.seed = seed
        self.params = {
            "max_depth": max_depth,
            "eta": learning_rate,
            "min_child_weight": 1,
            "subsample": 0.9,
            "objective": objective,
            "seed": seed,
            "nthread": 1,
            "verbosity": 0,
        }
        self.num_rounds = num_rounds
        self.booster: Any = None
        self.fallback: Optional[RidgeModel] = None
        if not has_xgboost():
            warnings.warn(
                "xgboost is not installed: XGBModel falls back to ridge regression "
                "(pip install xgboost-cpu, or xgboost, for the real model)",
                RuntimeWarning,
                stacklevel=2,
            )
            self.fallback = RidgeModel()

    def fit(self, x, y) -> None:
        if self.fallback is not None:
            self.fallback.fit(x, y)
            return
        import xgboost as xgb

        if str(self.params.get("objective", "")).startswith("rank:") and len(self.groups) == len(y):
            # ranking pairs within a workload: its rows contiguous, one group each
            groups = np.array(self.groups)
            order = np.argsort(groups, kind="stable")
            dtrain = xgb.DMatrix(x[order], label=y[order])
            dtrain.set_group(np.unique(groups[order], return_counts=True)[1])
        else:
            dtrain = xgb.DMatrix(x, label=y)
        self.booster = xgb.train(self.params, dtrain, num_boost_round=self.num_rounds)

    def predict_features(self, x) -> np.ndarray:
        if self.fallback is not None:
            return self.fallback.predict_features(x)
        if self.booster is None:
            return np.zeros(len(x))
        import xgboost as xgb

        return self.booster.predict(xgb.DMatrix(x))

    def save(self, path: str) -> None:
        extra = {"model": "xgb", "params": self.params, "num_rounds": self.num_rounds}
        if self.booster is not None:
            extra["booster"] = path + ".booster.json"
            self.booster.save_model(extra["booster"])
        self._save_data(path, extra)

    @classmethod
    def load(cls, path: str) -> "XGBModel":
        model = cls()
        extra = model._load_data(path)
        model.params, model.num_rounds = extra["params"], extra["num_rounds"]
        if extra.get("booster") and model.fallback is None and os.path.exists(extra["booster"]):
            import xgboost as xgb

            model.booster = xgb.Booster()
            model.booster.load_model(extra["booster"])
        elif len(model.x):
            model.fit(model.x, model.targets())
        return model
