"""DaskRunner: candidates measured on the worker processes of a Dask LocalCluster."""

import os
import signal
import threading
import time

import pytest

distributed = pytest.importorskip(
    "distributed", reason="the 'dist' extra (dask[distributed]) is not installed"
)

import dask  # noqa: E402

import workbench as wb  # noqa: E402
from workbench.tune import DaskRunner, TuneTask, tune  # noqa: E402

SETTINGS = dict(
    trials=8, num_trials_per_iter=4, strategy="replay_trace", cost_model="random", baseline=False, seed=0
)


def small_task():
    return TuneTask.workload("GMM", **wb.workloads.small("GMM"))


@pytest.fixture(scope="module")
def cluster():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    yield cluster
    cluster.close()


@pytest.fixture
def client(cluster):
    with distributed.Client(cluster) as client:
        yield client


def test_a_dask_tune_measures_what_a_local_tune_measures(client, tmp_path):
    task = small_task()
    local = tune(task, database=str(tmp_path / "local.sqlite"), **SETTINGS).records(task.func)
    with DaskRunner(client) as runner, distributed.get_task_stream(client) as stream:
        db = tune(task, database=str(tmp_path / "dask.sqlite"), runner=runner, **SETTINGS)
    remote = db.records(task.func)
    assert len(remote) == len(local) == SETTINGS["trials"]
    assert sorted(r.trace_hash for r in remote) == sorted(r.trace_hash for r in local)
    assert [r.status for r in remote] == ["ok"] * len(remote), [r.error for r in remote]
    assert all(len(r.latencies) == 3 and min(r.latencies) > 0 for r in remote)
    # the Dask workers measured them, one Dask task per candidate, and one per candidate and
    # round of the final interleaved re-measurement (Runner.measure_interleaved: a batch a round)
    measured = [t for t in stream.data if "_measure_on_worker" in str(t["key"])]
    finals = [r for r in db.records(task.func, remeasured=True) if not r.trial]
    assert finals and len(measured) == SETTINGS["trials"] + sum(r.meta["final"]["rounds"] for r in finals)


def kill_a_measuring_worker(client, killed: list) -> threading.Thread:
    """A thread that SIGKILLs the first Dask worker seen measuring a candidate; appends how
    many candidates that worker held to ``killed``."""
    pids = client.run(os.getpid)

    def watch():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for addr, keys in client.processing().items():
                held = [k for k in keys if "_measure_on_worker" in str(k)]
                if held and addr in pids:
                    os.kill(pids[addr], signal.SIGKILL)
                    killed.append(len(held))
                    return
            time.sleep(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_worker_killed_mid_run_costs_at_most_its_candidates(client, db_path):
    task = small_task()
    killed = []
    watcher = kill_a_measuring_worker(client, killed)
    with DaskRunner(client) as runner:
        db = tune(task, database=db_path, runner=runner, **SETTINGS)
    watcher.join()
    assert killed, "no worker was seen measuring"
    records = db.records(task.func)
    assert len(records) == SETTINGS["trials"]  # the tune completed
    assert len({r.trace_hash for r in records}) == len(records)
    # Dask requeued the dead worker's candidates on the other worker
    assert [r.status for r in records] == ["ok"] * len(records), [r.error for r in records]


def test_without_requeues_the_dead_workers_candidates_fail_alone(cluster, client, db_path):
    cluster.scheduler.allowed_failures = 0  # Dask's setting: fail a task at its first loss
    try:
        task = small_task()
        killed = []
        watcher = kill_a_measuring_worker(client, killed)
        with DaskRunner(client) as runner:
            db = tune(task, database=db_path, runner=runner, **SETTINGS)
        watcher.join()
    finally:
        cluster.scheduler.allowed_failures = dask.config.get("distributed.scheduler.allowed-failures")
    assert killed
    records = db.records(task.func)
    assert len(records) == SETTINGS["trials"]
    failed = [r for r in records if not r.ok]
    # only candidates of the batch in flight: those the dead worker held when it was seen,
    # and any the scheduler gave it before noticing its death (it may, in between)
    assert 1 <= len(failed) <= SETTINGS["num_trials_per_iter"]
    assert all(r.status == "run_error" and "Dask workers died" in r.error for r in failed)


def test_a_bad_address_or_argument_is_one_clear_error():
    with pytest.raises(ConnectionError, match="cannot reach a Dask scheduler"):
        DaskRunner("tcp://127.0.0.1:9", connect_timeout=0.5)
    with pytest.raises(TypeError, match="distributed.Client or a scheduler address"):
        DaskRunner(8786)


def test_the_cli_measures_on_a_dask_scheduler(cluster, db_path, capsys):
    from workbench.cli import main

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
                db_path,
                "--strategy",
                "replay_trace",
                "--cost-model",
                "random",
                "--dask",
                cluster.scheduler_address,
            ]
        )
        == 0
    )
    assert "records in" in capsys.readouterr().out
    records = wb.tune.Database.open(db_path).records(small_task().func)
    assert [r.status for r in records] == ["ok"] * 4


def test_the_cli_refuses_an_unreachable_scheduler_in_one_line(db_path, capsys, monkeypatch):
    from workbench.cli import main

    monkeypatch.setattr(wb.tune.dask_runner, "CONNECT_TIMEOUT", 0.5)
    assert (
        main(["tune", "GMM", "--small", "--trials", "4", "--db", db_path, "--dask", "tcp://127.0.0.1:9"]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot reach a Dask scheduler" in err
