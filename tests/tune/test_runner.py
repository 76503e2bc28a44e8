"""The builder/runner: isolated workers, time limits, correctness checks, restarts."""

import math
import time
from dataclasses import replace

import numpy as np
import pytest

import workbench as wb
from workbench.ir import index as ir_index
from workbench.ir.expr import IntImm, Var
from workbench.tune import LocalRunner, MeasureConfig, MeasureInput, Task
from workbench.tune.worker import time_entry

from tunehelpers import crash, gmm_space, hang, small, wrong

SHAPE = wb.workloads.small("GMM")


@pytest.fixture(scope="module")
def runner():
    r = LocalRunner(
        workers=2, measure=MeasureConfig(build_timeout=20, run_timeout=2.0, repeat=2, min_repeat_ms=5)
    )
    yield r
    r.close()


def scheduled(seed):
    sch = wb.Schedule(small("GMM"), seed=seed)
    gmm_space(sch)
    return sch.func


def test_good_candidates_are_timed(runner):
    task = Task(small("GMM"), "llvm", reference=wb.workloads.reference("GMM", **SHAPE))
    results = runner.measure([MeasureInput(task, scheduled(s)) for s in range(3)])
    for r in results:
        assert r.status == "ok", r.error
        assert len(r.latencies) == 2 and all(0 < x < math.inf for x in r.latencies)
        assert r.latency == pytest.approx(np.median(r.latencies))


def test_faults_fail_only_their_candidate(runner):
    """A segfault, a hang and a wrong result each fail with a reason; the candidates around
    them (some built on the worker that died) are measured normally."""
    task = Task(small("GMM"), "llvm", reference=wb.workloads.reference("GMM", **SHAPE))
    f = scheduled(0)
    funcs = [f, crash(f), scheduled(1), hang(f), scheduled(2), wrong(f), scheduled(3)]
    t0 = time.monotonic()
    results = runner.measure([MeasureInput(task, g) for g in funcs])
    statuses = [r.status for r in results]
    assert statuses == ["ok", "run_error", "ok", "timeout", "ok", "wrong_result", "ok"], [
        (r.status, r.error) for r in results
    ]
    assert "SIGSEGV" in results[1].error
    assert "longer than 2 s" in results[3].error
    assert "elements differ" in results[5].error
    assert time.monotonic() - t0 < 30
    again = runner.measure([MeasureInput(task, scheduled(4))])  # the pool is healthy
    assert again[0].status == "ok"


def test_unscheduled_function_is_the_default_reference(runner):
    """Without a numpy reference the worker computes the expected output itself."""
    task = Task(small("GMM"), "llvm")
    results = runner.measure([MeasureInput(task, scheduled(0)), MeasureInput(task, wrong(scheduled(0)))])
    assert [r.status for r in results] == ["ok", "wrong_result"]
    assert task.data()[2] is not None  # shared with the other workers from now on


def test_build_errors_are_reported(runner):
    task = Task(small("GMM"), "llvm")
    f = small("GMM")
    loop = next(f.loops())
    broken = ir_index.replace(f, loop, replace(loop, extent=Var("n")))  # an unbound extent
    result = runner.measure([MeasureInput(task, broken)])[0]
    assert result.status == "build_error" and "variable 'n'" in result.error


def test_unwritten_output_elements_are_caught(runner):
    """Outputs are poisoned before the check run, so a kernel skipping elements fails even
    when an earlier candidate left correct values behind in the same arrays."""
    task = Task(small("GMM"), "llvm")
    f = small("GMM")
    i = list(f.loops())[1]
    half = ir_index.replace(f, i, replace(i, extent=IntImm(8, "int32")))
    results = runner.measure([MeasureInput(task, f), MeasureInput(task, half)])
    assert [r.status for r in results] == ["ok", "wrong_result"]


def test_time_entry_grows_number_to_min_repeat():
    calls = []
    lat = time_entry(lambda: calls.append(1), [], number=1, repeat=3, min_repeat_ms=5)
    assert len(lat) == 3 and len(calls) > 30


def test_measure_settings_go_to_the_runner_tune_starts_not_to_one_passed_in():
    assert wb.tune.MeasureConfig is MeasureConfig
    assert MeasureConfig(repeat=5).timing == {"number": 3, "repeat": 5, "min_repeat_ms": 25.0, "windows": 25}
    assert MeasureConfig(windows=1).timing["windows"] == 1
    with LocalRunner(workers=1) as mine, pytest.raises(TypeError, match="measure="):
        wb.tune(small("GMM"), trials=1, database=None, runner=mine, measure=MeasureConfig(repeat=5))


def test_a_task_holds_a_parsed_target_and_pickles_it_as_text():
    """A Task sent to a Dask worker must not carry what its Target read of this host (CPU
    model, cores): the measuring machine parses the text again."""
    import pickle

    from workbench.target import Target

    task = Task(small("GMM"), "llvm -num-cores=2")
    assert isinstance(task.target, Target) and str(task.target) == "llvm -num-cores=2"
    assert task.target.mcpu  # cached on this host's Target
    copy = pickle.loads(pickle.dumps(task))
    assert copy.target == task.target and "mcpu" not in copy.target.__dict__ and copy.key == task.key
