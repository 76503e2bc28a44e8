"""Ctrl-C (SIGINT) stops a tune at any point: workers gone, finished records kept, resumable.

Each test runs a real tuning process and sends it SIGINT with ``os.kill``. The child marks the
phase it is in (a file) so the signal lands in the search, the build or the run; in the run a
candidate hangs, so the worker is in the middle of a kernel when the tuner stops.
"""

import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid

import pytest

import workbench as wb
from workbench.tune import Database, TuneTask

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = """
import os, sys, time
sys.path.insert(0, {here!r})
import tunehelpers
from workbench.space import Postproc, ScheduleFn
from workbench.tune import LocalRunner, MeasureConfig, TuneInterrupted, TuneTask, tune

phase, marker, path = sys.argv[1:4]
batches = []

def mark(name):
    if name == phase and batches and not os.path.exists(marker):
        open(marker, "w").close()
        if name == "search":
            time.sleep(60)          # stay in the search until interrupted

class Mark(Postproc):
    def apply(self, sch):
        mark("search")
        if phase == "run" and batches:
            sch.inject_fault(2)     # the kernel hangs: the worker is busy when SIGINT comes
        return True

class Runner(LocalRunner):
    def _build_all(self, *args):
        mark("build")
        return super()._build_all(*args)

    def _run_once(self, *args):
        mark("run")
        return super()._run_once(*args)

task = TuneTask.workload("GMM", b=1, n=32, m=32, k=32)
space = ScheduleFn(tunehelpers.gmm_space, postprocs=["disallow_dynamic_loop", Mark()])
try:
    tune(task, trials=400, database=path, space=space, num_trials_per_iter=4,
         strategy="replay_trace", cost_model="random", callbacks=[batches.append],
         runner=Runner(workers=2, measure=MeasureConfig(run_timeout=60)), verbose=False, baseline=False)
except TuneInterrupted as stop:
    print(stop)
    sys.exit(130)
"""


def tagged_processes(tag):
    """Pids of live processes whose environment holds ``tag`` (the child and its workers)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if tag.encode() in f.read():
                    with open(f"/proc/{pid}/stat") as st:
                        if st.read().split(")")[-1].split()[0] != "Z":
                            pids.append(int(pid))
        except OSError:
            continue
    return pids


def count(path):
    try:
        with sqlite3.connect(path, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def default_sigint():
    """In the child: SIGINT at its default, as from a terminal (pytest itself may run with it
    ignored, e.g. as a background job)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt(cmd, ready, tag, deadline=120.0, sig=signal.SIGINT):
    """Start ``cmd`` (SIGINT at its default, as from a terminal), wait until ``ready()``, send
    ``sig``; returns (exit status, stdout + stderr, seconds it took to stop)."""
    env = {**os.environ, "WB_TEST_TAG": tag}
    child = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, preexec_fn=default_sigint
    )
    try:
        end = time.monotonic() + deadline
        while not ready() and time.monotonic() < end and child.poll() is None:
            time.sleep(0.02)
        assert child.poll() is None, child.communicate()[0]
        assert ready(), "the tuner never reached the phase"
        t0 = time.monotonic()
        os.kill(child.pid, sig)
        out, _ = child.communicate(timeout=30)
        return child.returncode, out, time.monotonic() - t0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def gone(tag, wait=10.0):
    """Whether every tagged process ended (a worker told by the kernel that its parent died
    may take a moment)."""
    end = time.monotonic() + wait
    while tagged_processes(tag) and time.monotonic() < end:
        time.sleep(0.05)
    return tagged_processes(tag) == []


@pytest.mark.parametrize("phase", ["search", "build", "run"])
def test_sigint_stops_cleanly_in_every_phase(tmp_path, phase):
    path, marker = str(tmp_path / "t.sqlite"), str(tmp_path / "marker")
    tag = uuid.uuid4().hex
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(here=HERE))
    status, out, _ = interrupt(
        [sys.executable, str(script), phase, marker, path], lambda: os.path.exists(marker), tag
    )
    assert status == 130, out
    assert "Traceback" not in out
    n = count(path)
    assert n >= 4  # the first batch, at least
    assert f"interrupted after {n} trials" in out and f"{n} records in {path}" in out
    assert gone(tag)  # no worker left behind
    records = Database.open(path).records(TuneTask.workload("GMM", b=1, n=32, m=32, k=32).func)
    assert len(records) == n and len({r.trace_hash for r in records}) == n


def cli_tune_cmd(path):
    return [
        "workbench",
        "tune",
        "GMM",
        "--shape",
        "b=1",
        "n=32",
        "m=32",
        "k=32",
        "--trials",
        "8",
        "--per-iter",
        "4",
        "--strategy",
        "replay_trace",
        "--cost-model",
        "random",
        "--workers",
        "2",
        "--db",
        path,
    ]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_cli_interrupt_then_resume(tmp_path, sig):
    """``workbench tune``: SIGINT (Ctrl-C) or SIGTERM (``kill``, ``timeout``) once a batch is
    stored -> the message and status 130; the same command resumes up to the budget, keeping
    every stored record."""
    path = str(tmp_path / "i.sqlite")
    cmd = cli_tune_cmd(path)
    tag = uuid.uuid4().hex
    status, out, _ = interrupt(cmd, lambda: count(path) >= 4, tag, sig=sig)
    assert status == 130, out
    n = count(path)
    assert out.strip().splitlines()[-1] == (
        f"workbench: interrupted after {n} trials ({n} measured now); {n} records in {path}; "
        f"resume with {' '.join(cmd)}"
    )
    assert gone(tag)
    func = wb.workloads.get("GMM", b=1, n=32, m=32, k=32)
    before = Database.open(path).records(func)
    if n < 8:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    after = Database.open(path).records(func)
    assert len(after) == 8 and len({r.trace_hash for r in after}) == 8
    assert [r.trace_hash for r in after[:n]] == [r.trace_hash for r in before]


def test_second_sigint_while_stopping_exits_at_once(tmp_path):
    """Two SIGINTs in quick succession mid-run: the process ends at once, the file passes
    `db check` with only whole batches, no worker remains."""
    from workbench.tune.database.repair import check

    path, marker = str(tmp_path / "t.sqlite"), str(tmp_path / "marker")
    tag = uuid.uuid4().hex
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(here=HERE))
    env = {**os.environ, "WB_TEST_TAG": tag}
    child = subprocess.Popen(
        [sys.executable, str(script), "run", marker, path],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        end = time.monotonic() + 120
        while not os.path.exists(marker) and time.monotonic() < end and child.poll() is None:
            time.sleep(0.02)
        assert os.path.exists(marker), child.communicate()[0]
        os.kill(child.pid, signal.SIGINT)
        time.sleep(0.01)
        if child.poll() is None:
            os.kill(child.pid, signal.SIGINT)
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode in (130, -signal.SIGINT), out
    report = check(path)
    assert report.ok and report.intact >= 4, report
    assert gone(tag)


def test_commit_holds_sigint_back_until_stored():
    """A SIGINT arriving while a finished batch is committed is raised after the commit."""
    from workbench.tune.tuning import interrupts_deferred

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    done = []
    try:
        with pytest.raises(KeyboardInterrupt):
            with interrupts_deferred():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # the handler has run by now: it only noted it
                done.append("stored")
        assert done == ["stored"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped one
def test_an_interrupt_a_finalizer_swallowed_still_stops_the_tune(tmp_path):
    """Python prints and drops a KeyboardInterrupt raised inside ``__del__`` (as LLVM and
    XGBoost objects have); the tuner noticed the SIGINT and stops at the next batch anyway."""
    from workbench.tune import TuneInterrupted

    class Dropped:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs in here: its KeyboardInterrupt is dropped

    class InterruptInAFinalizer:
        def on_batch(self, event):
            if event.batch == 1:
                Dropped()  # created and collected at once

    path = str(tmp_path / "t.sqlite")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a kernel
    try:
        with pytest.raises(TuneInterrupted, match="interrupted after 2 trials"):
            wb.tune(
                TuneTask.workload("GMM", **wb.workloads.small("GMM")),
                trials=40,
                num_trials_per_iter=2,
                database=path,
                baseline=False,
                callbacks=[InterruptInAFinalizer()],
            )
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(Database.open(path)) == 2
