"""Cost models learn to rank candidates from their features; they save and load."""

import numpy as np
import pytest

import workbench as wb
from workbench.tune import CostModel, MeasureResult, RandomModel, RidgeModel, XGBModel
from workbench.tune import cost_model as cm

from tunehelpers import gmm_space, small


def candidates(n):
    out = []
    for seed in range(n):
        sch = wb.Schedule(small("GMM"), seed=seed)
        gmm_space(sch)
        out.append(sch)
    return out


def fake_latency(sch):
    """Faster with a wider vector loop and more parallel tasks (what the features can see)."""
    loops = list(sch.func.loops())
    vec = next(l.extent.value for l in loops if l.kind.value == "vectorized")
    par = next(l.extent.value for l in loops if l.kind.value == "parallel")
    return 1e-3 * (1 + 8 / vec) * (1 + 4 / par)


def ranking_quality(model, n_train=40, n_test=24):
    schs = candidates(n_train + n_test)
    lat = [fake_latency(s) for s in schs]
    model.update(schs[:n_train], [MeasureResult("ok", [x]) for x in lat[:n_train]])
    pred = model.predict(schs[n_train:])
    # scores are throughputs: high score = low latency, so correlate with -latency ranks
    return np.corrcoef(np.argsort(np.argsort(pred)), np.argsort(np.argsort(-np.array(lat[n_train:]))))[0, 1]


@pytest.mark.skipif(not cm.has_xgboost(), reason="xgboost not installed")
def test_xgb_learns_to_rank_and_round_trips(tmp_path):
    model = XGBModel()
    assert ranking_quality(model) > 0.6
    path = str(tmp_path / "model.json")
    model.save(path)
    again = XGBModel.load(path)
    schs = candidates(8)
    assert np.allclose(model.predict(schs), again.predict(schs))


@pytest.mark.skipif(not cm.has_xgboost(), reason="xgboost not installed")
def test_xgb_ranks_by_default_and_regresses_on_request():
    assert XGBModel().params["objective"] == "rank:pairwise"
    reg = XGBModel(objective="reg:squarederror")
    assert ranking_quality(reg) > 0.6
    # the ranking objective forms pairs within a workload: two workloads of very different
    # latencies train one model, each group contiguous in the training matrix
    model = XGBModel()
    schs = candidates(24)
    lat = [fake_latency(s) for s in schs]
    model.update(schs[:12], [MeasureResult("ok", [x]) for x in lat[:12]])
    model.groups += ["other"] * 12
    model.x = np.vstack([model.x, model.features(schs[12:])])
    model.latencies = np.concatenate([model.latencies, 100 * np.array(lat[12:])])
    model.fit(model.x, model.targets())
    assert model.booster.num_boosted_rounds() == model.num_rounds


def test_targets_are_normalized_throughputs():
    model = RidgeModel()
    schs = candidates(3)
    model.update(
        schs, [MeasureResult("ok", [2e-3]), MeasureResult("ok", [1e-3]), MeasureResult("timeout", [], "hung")]
    )
    assert model.targets().tolist() == [0.5, 1.0, 0.0]


def test_without_xgboost_the_model_says_so_and_still_learns(monkeypatch):
    monkeypatch.setattr(cm, "has_xgboost", lambda: False)
    with pytest.warns(RuntimeWarning, match="xgboost is not installed"):
        model = XGBModel()
    assert ranking_quality(model) > 0.3


def test_random_model_and_shortcuts(tmp_path):
    assert isinstance(CostModel.create("random"), RandomModel)
    assert isinstance(CostModel.create("xgb"), XGBModel)
    mine = RandomModel(seed=1)
    assert CostModel.create(mine) is mine
    scores = mine.predict(candidates(5))
    assert scores.shape == (5,) and len(set(scores.tolist())) == 5
    with pytest.raises(ValueError, match="unknown cost model"):
        CostModel.create("oracle")


def test_a_user_model_is_a_small_subclass():
    class PreferVectors(CostModel):
        def update(self, candidates, results):
            self.seen = len(candidates)

        def predict(self, candidates):
            return np.array(
                [float(sum(l.kind.value == "vectorized" for l in c.func.loops())) for c in candidates]
            )

    model = CostModel.create(PreferVectors)
    assert model.predict(candidates(2)).tolist() == [1.0, 1.0]


def test_a_model_saved_with_another_feature_set_is_refused_by_name(tmp_path):
    model = RidgeModel()
    schs = candidates(6)
    model.update(schs, [MeasureResult("ok", [fake_latency(s)]) for s in schs])
    path = str(tmp_path / "model.json")
    model.save(path)
    data = dict(np.load(path + ".data.npz"))
    data["x"] = data["x"][:, :-3]  # as an older workbench, with fewer features, saved it
    np.savez(path + ".data.npz", **data)
    with pytest.raises(ValueError, match=r"saved with \d+ features per candidate"):
        RidgeModel.load(path)
