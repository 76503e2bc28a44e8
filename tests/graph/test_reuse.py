"""The course day's exercise: tune ResNet-18 into a database, build ResNet-34 from it."""

import numpy as np
import pytest

import workbench as wb
from workbench.tune.database.base import func_hash

torch = pytest.importorskip(
    "torch", reason="PyTorch is the optional extra 'torch' (pip install torch==2.13.0)"
)
zoo = pytest.importorskip("workbench.graph.zoo")


def test_resnet34_reuses_the_resnet18_database(tmp_path):
    r18 = wb.from_torch(*zoo.get("resnet18", **zoo.TINY["resnet18"]))
    db = wb.tune_model(
        r18,
        "llvm",
        trials=4,  # fewer trials than tasks: some of ResNet-18's tasks stay without a record
        database=str(tmp_path / "r18.sqlite"),
        num_trials_per_iter=2,
        strategy="replay_trace",
        cost_model="random",
        workers=1,
        seed=0,
    )
    tuned18 = {t.key for t in r18.task_list() if db.best(t.func, "llvm") is not None}
    assert 0 < len(tuned18) < len(r18.task_list())

    # ResNet-34: the same stages with more blocks, and here a 100-class head (a new dense task)
    size = dict(zoo.TINY["resnet34"], classes=100)
    module, example = zoo.get("resnet34", **size)
    r34 = wb.from_torch(module, example)
    model = wb.build_model(r34, "llvm", database=db)
    tasks = r34.task_list()
    keys18 = {t.key for t in r18.task_list()}
    new = [t for t in tasks if t.key not in keys18]
    assert [t.name for t in new] == ["fused_dense_add"]
    # a hit exactly where ResNet-18's tuning left a record; the new task and the rest miss
    assert model.tuned == [t.key in tuned18 for t in tasks]
    assert sum(model.tuned) == len(tuned18)  # every tuned ResNet-18 task is one of ResNet-34's
    report = model.report()
    assert report.splitlines()[0] == f"{len(tuned18)} of {len(tasks)} tasks from the database:"
    assert report.splitlines()[-1] == "  fused_dense_add x1: default schedule"
    # the key the database files records under is the one the graph deduplicates tasks by
    assert all(func_hash(t.func) == t.key for t in tasks)
    with torch.no_grad():
        ref = module(*example).numpy()
    (out,) = model(example[0].numpy())
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)
