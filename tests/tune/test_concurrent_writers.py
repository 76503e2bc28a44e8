"""Several processes adding to one database file: nothing lost, nothing duplicated."""

import subprocess
import sys

import pytest

import workbench as wb
from workbench.tune import Database

WRITER = """
import workbench as wb
from workbench.schedule.trace import JSON_FORMAT
from workbench.tune import Database, Record
func = wb.workloads.get("GMM", **wb.workloads.small("GMM"))
db = Database.open({path!r})
for batch in range({batches}):
    db.add([Record.of(func, "llvm", {{"format": JSON_FORMAT, "insts": []}}, [1e-3],
                      writer={writer}, batch=batch, k=k) for k in range({per_batch})])
"""


@pytest.mark.parametrize("suffix", ["sqlite", "jsonl"])
def test_four_processes_one_file(tmp_path, suffix):
    path = str(tmp_path / f"shared.{suffix}")
    writers, batches, per_batch = 4, 20, 5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER.format(path=path, batches=batches, per_batch=per_batch, writer=w)]
        )
        for w in range(writers)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * writers
    func = wb.workloads.get("GMM", **wb.workloads.small("GMM"))
    records = Database.open(path).records(func)
    keys = [(r.meta["writer"], r.meta["batch"], r.meta["k"]) for r in records]
    assert len(keys) == writers * batches * per_batch == len(set(keys))
    for w in range(writers):  # each writer's batches whole and in its order
        mine = [(b, k) for ww, b, k in keys if ww == w]
        assert mine == [(b, k) for b in range(batches) for k in range(per_batch)]
