"""``tune()``: search the design space of one or several functions, measuring in batches.

    db = wb.tune(func, target="llvm", trials=64, database="tuning.sqlite", seed=0)
    rec = db.best(func, "llvm")

Each round the task scheduler picks a task; its search strategy proposes a batch of new,
validated candidates; the runner builds and times them in worker processes; the batch is
committed to the database, the cost model learns from it and the callbacks hear about it.
Tuning into a database that already has records of a task resumes it: those trials are not
measured again, count toward ``trials`` and train the cost model first. Records of the
database's *other* workloads on the same target train it too (transfer, see
:func:`workbench.tune.cost_model.transfer_records`): a new task's first batch is then ranked by
the model rather than picked at random.

Tuning on a busy machine (a laptop, a shared server): a candidate measured while other work
competed for the CPUs (1-minute load average above them: its record is flagged ``busy``) is
measured again after a later batch, once the load has dropped; and at the end the fastest
candidates (``MeasureConfig.final_top_k`` of the quiet ones and as many of the busy ones, and
the task's initial schedules: the baseline a pick must beat, e.g. a model's default schedules) are
timed again *in alternation*, ``final_rounds`` rounds, so that they are compared under the
same conditions. Both are stored as records (``meta["remeasure"]``: ``"busy"`` / ``"final"``;
they are not trials), and ``db.best`` returns the re-measured pick (see
:func:`workbench.tune.database.base.pick`). When the machine was still busy during that final
re-measurement, the summary says that the pick could not be confirmed on a quiet machine.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import signal
import sys
import threading
import time
from dataclasses import replace
from typing import Any, Mapping, Optional, Sequence, Union

from ..codegen.cuda.launch import gpu_unavailable
from ..target import Target, host_cores
from ..errors import BuildError, ScheduleError
from ..ir.func import PrimFunc
from .cost_model import CostModel, transfer_records
from .database.base import Database, Record, func_hash, latest_per_trace, pick, trace_hash
from .measure import MeasureConfig
from .report import BatchEvent, ProgressBar, TaskSummary, TuneSummary, _isatty, dispatch
from .runner import LocalRunner, MeasureInput, MeasureInterrupted, MeasureResult, Runner, Task, machine_busy
from .scheduler import TaskScheduler, TaskState
from .search import Candidate, SearchContext, SearchStrategy
from .symbolic import check_shape_hint, generalize_trace, hint_text, specialize
from .task import TuneTask, as_tasks, make_space
from .worker import time_entry


class TuneInterrupted(KeyboardInterrupt):
    """``tune()`` stopped by Ctrl-C; every finished record is in the database.

    ``trials``: the tasks' records now (resumed ones included) out of ``budget``; ``measured``:
    those measured by this call; ``records``: every record in the database file ``path``;
    ``resume``: how to go on (callers such as the CLI set their own command line);
    ``database``: the :class:`Database` itself.
    """

    def __init__(
        self,
        trials: int,
        budget: int,
        measured: int,
        database: Database,
        resume: str = "the same tune() call (its records count toward trials)",
    ):
        self.trials, self.budget, self.measured = trials, budget, measured
        self.database, self.resume = database, resume
        self.records, self.path = len(database), database.path
        super().__init__()

    def __str__(self) -> str:
        return (
            f"interrupted after {self.trials} trials ({self.measured} measured now); "
            f"{self.records} records in {self.path or 'memory'}; resume with {self.resume}"
        )


@contextlib.contextmanager
def interrupts_deferred():
    """Hold Ctrl-C back until the block ends (a finished batch is committed, not rolled
    back). Only the main thread receives KeyboardInterrupt; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is None or previous == signal.SIG_IGN:  # not Python's to defer
        yield
        return
    caught: list = []
    signal.signal(signal.SIGINT, lambda *sig: caught.append(sig))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            if callable(previous):
                previous(*caught[0])
            else:  # SIG_DFL: what it would have done
                os.kill(os.getpid(), signal.SIGINT)


@contextlib.contextmanager
def interrupts_noticed():
    """Remember every Ctrl-C while tuning, besides raising it as usual: a KeyboardInterrupt
    that lands in a finalizer (``__del__`` of an LLVM or XGBoost object, a weakref callback) is
    printed and dropped by Python, so the session also stops at the next batch when this
    says one came. Yields a list that gets one entry per SIGINT; main thread only."""
    noticed: list = []
    if threading.current_thread() is not threading.main_thread():
        yield noticed
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # SIG_IGN / SIG_DFL / not set from Python: leave it alone
        yield noticed
        return

    def handler(signum, frame):
        noticed.append(signum)
        previous(signum, frame)

    signal.signal(signal.SIGINT, handler)
    try:
        yield noticed
    finally:
        signal.signal(signal.SIGINT, previous)


#: records of a task replayed to warm up the cost model when resuming (the most recent ones)
MAX_WARMUP_RECORDS = 256
#: records of the database's other workloads (same target) the cost model learns from first
#: (:func:`workbench.tune.cost_model.transfer_records`); 0 turns the transfer off
MAX_TRANSFER_RECORDS = 256


def tune(
    func_or_list: Union[PrimFunc, str, TuneTask, Sequence[Any]],
    *,
    target: Any = "llvm",
    trials: int = 64,
    database: Union[str, Database] = "tuning.sqlite",
    seed: int = 0,
    strategy: Any = "evolutionary",
    cost_model: Any = "xgb",
    space: Any = None,
    callbacks: Sequence[Any] = (),
    num_trials_per_iter: int = 16,
    task_scheduler: Any = "gradient",
    runner: Optional[Runner] = None,
    workers: Optional[int] = None,
    measure: Optional[MeasureConfig] = None,
    verbose: Optional[bool] = None,
    baseline: bool = True,
    shape_hint: Optional[Mapping[str, int]] = None,
) -> Database:
    """Tune ``func_or_list`` and return the database holding every measured record.

    Parameters
    ----------
    func_or_list : a ``PrimFunc``, a workload name (``"GMM"``), a :class:`TuneTask`, or a list.
    trials : the budget of measured candidates, over all tasks (records already in the
        database count).
    database : a path (``.sqlite``: SQLite, ``.jsonl``: JSON lines) or a ``Database``.
    strategy : ``"evolutionary"``, ``"replay_trace"``, ``"replay_func"`` or a SearchStrategy.
    cost_model : ``"xgb"``, ``"random"`` or a CostModel (one model serves all tasks).
    space : the design space (see :func:`workbench.tune.task.make_space`); None: the target's
        default schedule rules.
    callbacks : functions called with each :class:`BatchEvent`, or objects with ``on_start`` /
        ``on_batch`` / ``on_end`` / ``on_interrupt``.
    task_scheduler : ``"gradient"`` (Ansor's) or ``"round_robin"``.
    runner : a Runner; None starts a :class:`LocalRunner` with ``workers`` and ``measure``,
        closed at the end.
    measure : the time limits, timing and checks (a :class:`MeasureConfig`) of the runner
        ``tune`` starts; a runner passed in has its own.
    verbose : print a progress bar and the summary (None: only on a terminal).
    baseline : the summary also times the unscheduled function and the numpy reference.
    shape_hint : for a function of symbolic shape, the size of each size variable to tune at
        (``{"n": 512}``): the search measures the function specialized to that size, and each
        measured trace is carried back to the symbolic function (a split whose tiles were drawn
        at ``n = 512`` keeps its inner factors and gets ``None`` for the outer one, see
        :mod:`workbench.tune.symbolic`) and stored under it, with the hint in the record's
        ``meta["shape_hint"]``: ``db.best(symbolic_func).schedule()`` then builds a kernel for
        any ``n``. A symbolic function without a hint is refused.

    Raises
    ------
    TuneInterrupted
        A KeyboardInterrupt, on Ctrl-C, after committing every finished record and stopping
        the runner's workers.
    """
    if runner is not None and measure is not None:
        raise TypeError("tune: measure= sets up the runner tune starts; a runner passed in has its own")
    tasks, hints = _hinted_tasks(as_tasks(func_or_list), shape_hint)
    target = Target.of(target)  # the only parse: everything below takes the object
    if runner is None:
        _check_runs_here(target)
    db = Database.open(database)
    model = CostModel.create(cost_model, seed=seed)
    callbacks = list(callbacks)
    if verbose or (verbose is None and _isatty(sys.stderr)):
        callbacks.append(ProgressBar())
    own_runner = runner is None
    runner = runner or LocalRunner(workers, measure=measure or MeasureConfig())
    session = None
    try:
        try:
            session = _Session(
                tasks,
                target,
                db,
                model,
                runner,
                seed,
                strategy,
                space,
                TaskScheduler.create(task_scheduler, seed=seed),
                callbacks,
                hints,
            )
            with interrupts_noticed() as session.interrupts:
                session.run(trials, num_trials_per_iter)
                session.finalize()
            summary = session.summary(baseline)
        except KeyboardInterrupt as exc:
            if session is not None:
                stop = session.interrupted(exc, trials)
            else:  # while preparing: nothing measured yet
                stop = TuneInterrupted(sum(len(db.records(t.func, target)) for t in tasks), trials, 0, db)
            dispatch(callbacks, "on_interrupt", stop)
            raise stop from None
        dispatch(callbacks, "on_end", summary)
    finally:
        if own_runner:
            runner.close()
    return db


def _hinted_tasks(
    tasks: list[TuneTask], shape_hint: Optional[Mapping[str, int]]
) -> tuple[list[TuneTask], list[Optional[tuple[PrimFunc, dict]]]]:
    """Tasks of symbolic shape specialized to ``shape_hint``; per task, (the symbolic function,
    the sizes) where it was one, else None."""
    out: list[TuneTask] = []
    hints: list[Optional[tuple[PrimFunc, dict]]] = []
    for task in tasks:
        if not task.func.is_symbolic:
            out.append(task)
            hints.append(None)
            continue
        if shape_hint is None:
            names = ", ".join(v.name for v in task.func.size_vars)
            raise ValueError(
                f"tune: {task.name} has a symbolic shape (size variables {names}): pass "
                f"shape_hint={{{', '.join(repr(v.name) + ': 512' for v in task.func.size_vars)}}} "
                f"or another representative size to measure at; the schedule found applies to any size"
            )
        sizes = check_shape_hint(task.func, shape_hint)
        out.append(replace(task, func=specialize(task.func, sizes)))
        hints.append((task.func, sizes))
    if shape_hint is not None and not any(hints):
        raise ValueError("tune: shape_hint is for functions of symbolic shape (wb.var sizes); none is")
    return out, hints


def _check_runs_here(target: Target) -> None:
    """The local runner measures on this machine: refuse a CPU target whose code cannot run
    here (another architecture, extensions the host lacks) before any work."""
    if target.kind == "cuda":
        why = gpu_unavailable()
        if why is not None:
            raise BuildError(
                f"tune: cannot measure on target {target}: no GPU here ({why}); "
                f"--target cuda-emulate checks candidates on the CPU, for "
                f"correctness only"
            )
        return
    reason = target.cannot_run() if target.kind == "llvm" else None
    if reason is not None:
        raise BuildError(
            f"tune: cannot measure on this host: {reason}; pass a runner that measures on such a machine"
        )


class _Session:
    """The state of one ``tune`` call: per-task contexts, strategies and scheduler states."""

    def __init__(
        self,
        tasks: list[TuneTask],
        target: Target,
        db: Database,
        model: CostModel,
        runner: Runner,
        seed: int,
        strategy: Any,
        space: Any,
        scheduler: TaskScheduler,
        callbacks: list,
        hints: Optional[list] = None,
    ):
        self.tasks, self.target, self.db, self.model = tasks, target, db, model
        self.hints = hints or [None] * len(tasks)
        self.generalized: dict = {}  # (task, trace hash) -> (trace, None) or (None, error)
        self.runner, self.scheduler, self.callbacks = runner, scheduler, callbacks
        self.t0 = time.monotonic()
        self.measured = 0
        self.batches = 0
        self.failed = [0] * len(tasks)
        self.measure_tasks = [Task(t.func, target, t.reference, seed=seed) for t in tasks]
        self.cores = host_cores()
        self.load: Optional[float] = None  # highest load average read while measuring
        self.busy_records = self.noisy_records = 0
        self.remeasured_busy = 0  # busy records measured again once the load dropped
        self.pending_busy: list[set[str]] = [set() for _ in tasks]  # trace hashes to re-measure
        self.finals: dict[int, dict] = {}  # task -> what its final re-measurement found
        self.new_trials = [0] * len(tasks)  # measured by this session
        self.states = [TaskState(weight=t.weight) for t in tasks]
        self.measuring: Optional[tuple[int, list]] = None  # (task, candidates) being measured
        self.started: set[int] = set()  # tasks whose initial schedules went into a batch
        self.interrupts: list = []  # SIGINTs noticed while running (interrupts_noticed)
        self.contexts: list[SearchContext] = []
        self.strategies: list[SearchStrategy] = []
        for k, task in enumerate(tasks):
            gen = make_space(space, target)
            if len(tasks) > 1:
                gen = gen.clone()  # mutators remember their task's function
            ctx = SearchContext(task.func, target, gen, db, model, seed=seed + k)
            strat = SearchStrategy.create(strategy)
            if len(tasks) > 1 and isinstance(strategy, SearchStrategy):
                strat = copy.deepcopy(strategy)
            strat.initialize(ctx)
            self.contexts.append(ctx)
            self.strategies.append(strat)
            records = db.records(task.func, target)
            if records:  # resuming: they count (re-measurements of them are not trials)
                self.states[k].record(len(records), [r.latency for r in records])
                self.failed[k] = sum(not r.ok for r in records)
        dispatch(callbacks, "on_start", tasks)

    def _warm_up(self) -> None:
        """Train the cost model on the latest stored records of every task (resuming) and on
        the database's records of other workloads on the same target (transfer: the model
        ranks a new task's first candidates with what it learned elsewhere)."""
        cands, results = transfer_records(
            self.db, self.target, [func_hash(t.func) for t in self.tasks], limit=MAX_TRANSFER_RECORDS
        )
        for task in self.tasks:
            for rec in self.db.records(task.func, self.target)[-MAX_WARMUP_RECORDS:]:
                try:
                    sch = rec.schedule()
                except Exception:  # a record of another space / an unregistered primitive
                    continue
                cands.append(sch)
                results.append(MeasureResult(rec.status, rec.latencies, rec.error))
        if cands:
            self.model.update(cands, results)

    def run(self, trials: int, per_batch: int) -> None:
        if sum(s.trials for s in self.states) < trials:
            self._warm_up()
        while True:
            if self.interrupts:  # a Ctrl-C that a finalizer swallowed still stops the tune
                raise KeyboardInterrupt
            total = sum(s.trials for s in self.states)
            if total >= trials:
                return
            k = self.scheduler.next(self.states)
            if k is None:
                return
            self._batch(k, min(per_batch, trials - total), trials)

    def _batch(self, k: int, n: int, budget: int) -> None:
        task, state = self.tasks[k], self.states[k]
        t0 = time.monotonic()
        first = self._initial(k)[:n]
        cands = first + (self.strategies[k].propose(n - len(first)) if n > len(first) else [])
        search_s = time.monotonic() - t0
        if not cands:
            state.done = True  # the space has no new candidate left
            return
        t0 = time.monotonic()
        self.measuring = (k, cands)
        results = self.runner.measure([MeasureInput(self.measure_tasks[k], c.func) for c in cands])
        measure_s = time.monotonic() - t0
        with interrupts_deferred():  # measured: store it whole, then stop if asked to
            self._commit(k, cands, results)
        loads = [r.load for r in results if r.load is not None]
        batch_load = max(loads) if loads else None
        if batch_load is not None:
            self.load = max(batch_load, self.load or 0.0)
        self.model.update([c.sch for c in cands], results)
        self.strategies[k].notify(cands, results)
        self.batches += 1
        self._remeasure_busy(k)
        best = self.db.best(task.func, self.target)
        dispatch(
            self.callbacks,
            "on_batch",
            BatchEvent(
                task.name,
                k,
                self.batches,
                cands,
                results,
                state.best,
                best.trace if best is not None else None,
                state.trials,
                sum(s.trials for s in self.states),
                budget,
                time.monotonic() - self.t0,
                search_s,
                measure_s,
                task.flops,
                batch_load,
                self.cores,
            ),
        )

    def _initial(self, k: int) -> list[Candidate]:
        """Task ``k``'s initial schedules not measured yet (once per session: its first batch)."""
        if k in self.started:
            return []
        self.started.add(k)
        ctx, out = self.contexts[k], []
        for sch in self.tasks[k].initial_schedules:
            cand = Candidate(sch)
            if cand.hash not in ctx.seen:
                ctx.seen.add(cand.hash)
                out.append(cand)
        return out

    def _commit(self, k: int, cands: list, results: list) -> None:
        """Store measured candidates of task ``k`` as one batch and count them."""
        self.measuring = None
        self.db.add(
            [
                Record.of(
                    self.tasks[k].func,
                    self.target,
                    c.trace,
                    r.latencies,
                    r.status,
                    r.error,
                    predicted=c.predicted,
                    build_seconds=r.build_seconds,
                    run_seconds=r.run_seconds,
                    **self._warnings(r),
                )
                for c, r in zip(cands, results)
            ]
        )
        if self.hints[k] is not None:
            self.db.add([self._generalized(k, c, r) for c, r in zip(cands, results)])
        for c, r in zip(cands, results):
            if r.status == "ok" and machine_busy(r.load, self.cores):
                self.pending_busy[k].add(getattr(c, "hash", None) or trace_hash(c.trace))
        self.states[k].record(len(cands), [r.latency for r in results])
        self.failed[k] += sum(r.status != "ok" for r in results)
        self.new_trials[k] += len(cands)
        self.measured += len(cands)

    def _symbolic_trace(self, k: int, trace: Any, key: str) -> tuple[Any, str]:
        """``trace`` (measured on task ``k`` specialized to its hint) carried over to the
        symbolic function, once per trace: (the trace, "") or (None, why it does not apply)."""
        func, sizes = self.hints[k]
        if (k, key) not in self.generalized:
            try:
                self.generalized[(k, key)] = (generalize_trace(trace, func), "")
            except (ScheduleError, ValueError) as exc:
                self.generalized[(k, key)] = (
                    None,
                    f"the trace measured at {hint_text(sizes)} does not apply "
                    f"to the symbolic function: {exc}",
                )
        return self.generalized[(k, key)]

    def _generalized_remeasure(self, k: int, rec: Record) -> Record:
        """A re-measured record of a hinted task, for the symbolic function (same meta)."""
        func, sizes = self.hints[k]
        trace, why = self._symbolic_trace(k, rec.trace, rec.trace_hash)
        meta = {**rec.meta, "shape_hint": dict(sizes)}
        if trace is None:
            return Record.of(func, self.target, rec.trace_json, [], "build_error", why, **meta)
        return Record.of(func, self.target, trace, rec.latencies, **meta)

    def _generalized(self, k: int, cand: Any, result: MeasureResult) -> Record:
        """The record of a candidate of a hinted task, for the symbolic function: its trace
        carried over (a failed record saying why where it does not apply)."""
        func, sizes = self.hints[k]
        trace, why = self._symbolic_trace(k, cand.trace, trace_hash(cand.trace))
        common = dict(predicted=cand.predicted, shape_hint=dict(sizes), **self._warnings(result, count=False))
        if trace is None:
            return Record.of(func, self.target, cand.trace, [], "build_error", why, **common)
        return Record.of(func, self.target, trace, result.latencies, result.status, result.error, **common)

    @property
    def config(self) -> MeasureConfig:
        return getattr(self.runner, "config", None) or MeasureConfig()

    def _busy_now(self) -> tuple[bool, Optional[float]]:
        load = self.runner.current_load()
        return machine_busy(load, self.cores), load

    def _remeasure_busy(self, k: int) -> None:
        """Measure again the task's candidates that were measured while the machine was busy,
        if it is not any more (stored as new records of the same traces: the latest counts)."""
        pending = self.pending_busy[k]
        if not pending or not self.config.remeasure_busy or self._busy_now()[0]:
            return
        task = self.tasks[k]
        recs = self.db.records(task.func, self.target, remeasured=True)
        recs = [r for r in recs if r.ok and r.trace_hash in pending]
        pending.clear()
        latest = {r.trace_hash: r for r in recs}
        again, scheds = [], []
        for rec in latest.values():
            if not rec.busy:
                continue  # measured again already (quiet)
            try:
                sch = rec.schedule()
            except Exception:  # a trace this space cannot replay any more: keep its record
                continue
            again.append(rec)
            scheds.append(sch)
        if not again:
            return
        results = self.runner.measure([MeasureInput(self.measure_tasks[k], s.func) for s in scheds])
        with interrupts_deferred():
            self._store_remeasured(k, again, results, {"remeasure": "busy"})
        self.remeasured_busy += sum(r.status == "ok" for r in results)
        for rec, res in zip(again, results):
            if res.status == "ok" and machine_busy(res.load, self.cores):
                pending.add(rec.trace_hash)  # busy again: next time

    def _store_remeasured(self, k: int, recs: list, results: list, meta: dict) -> list[Record]:
        """New records of ``recs``' traces with the re-measured ``results`` (failed ones are
        not stored: the earlier measurement stands)."""
        out = []
        for rec, res in zip(recs, results):
            if res.status != "ok":
                continue
            flags = {}
            if res.noisy:
                flags["noisy"] = round(res.spread, 3)
            if machine_busy(res.load, self.cores):
                assert res.load is not None
                flags["busy"] = round(res.load, 2)
            out.append(
                Record.of(
                    self.tasks[k].func,
                    self.target,
                    rec.trace_json,
                    res.latencies,
                    build_seconds=res.build_seconds,
                    run_seconds=res.run_seconds,
                    **meta,
                    **flags,
                )
            )
        self.db.add(out)
        return out

    def finalize(self) -> None:
        """Re-measure each task's top candidates in alternation and store them: the pick."""
        config = self.config
        if config.final_top_k <= 0 or config.final_rounds <= 0:
            return
        for k, task in enumerate(self.tasks):
            records = self.db.records(task.func, self.target, remeasured=True)
            if not self.new_trials[k] and any(not r.trial for r in records if "final" in r.meta):
                continue  # nothing new since its last final re-measurement
            current = latest_per_trace(records)
            if not current:
                continue
            by_latency = sorted(current, key=lambda r: r.latency)
            quiet = [r for r in by_latency if not r.busy][: config.final_top_k]
            busy = [r for r in by_latency if r.busy][: config.final_top_k]
            # and the task's initial schedules, whatever their figure: the baseline the pick must
            # beat in the same rounds (tune_model's default schedules: measured once under load,
            # ResNet-18's stem fell outside the top candidates, and the pick, 0.91 ms quiet,
            # replaced a default of 0.66 ms)
            initial = {trace_hash(sch.trace) for sch in task.initial_schedules}
            kept = {r.trace_hash for r in quiet + busy}
            baselines = [r for r in by_latency if r.trace_hash in initial and r.trace_hash not in kept]
            chosen = sorted(quiet + busy + baselines, key=lambda r: r.latency)
            before = pick(records)
            cands, scheds = [], []
            for rec in chosen:
                try:
                    scheds.append(rec.schedule())
                except Exception:
                    continue
                cands.append(rec)
            if len(cands) < 2 and not any(r.busy for r in cands):
                continue  # nothing to compare, and its figure was taken on a quiet machine
            t0 = time.monotonic()
            busy_before, load_before = self._busy_now()
            inputs = [MeasureInput(self.measure_tasks[k], s.func) for s in scheds]
            results = self.runner.measure_interleaved(inputs, config.final_rounds)
            busy_after, load_after = self._busy_now()
            loads = [x for x in [load_before, load_after, *(r.load for r in results)] if x is not None]
            load = max(loads) if loads else None
            group = f"{time.time():.6f}-{k}"
            # each round is already its fastest window when the runner times in windows (other
            # work only adds time): what differs between rounds is how many cores the machine
            # had (a core held for seconds by other work), and one round that happened to get
            # both must not pick a candidate: the median round decides. Without windows a
            # round can lose a whole scheduler tick, and the fastest round decides.
            stat = "median" if getattr(config, "windows", 1) > 1 else "min"
            final = {"group": group, "rounds": config.final_rounds, "stat": stat}
            meta = {"remeasure": "final", "final": final}
            with interrupts_deferred():
                stored = self._store_remeasured(k, cands, results, meta)
            if not stored:
                continue
            if self.hints[k] is not None:  # the symbolic function's records follow the pick
                self.db.add([self._generalized_remeasure(k, rec) for rec in stored])
            after = pick(self.db.records(task.func, self.target, remeasured=True))
            self.finals[k] = {
                "candidates": len(stored),
                "rounds": config.final_rounds,
                "confirmed": not (busy_before or busy_after or machine_busy(load, self.cores)),
                "load": load,
                "changed": before is not None and after is not None and before.trace_hash != after.trace_hash,
                "searched": before.latency if before is not None else math.inf,
                "seconds": time.monotonic() - t0,
            }

    def interrupted(self, exc: KeyboardInterrupt, budget: int) -> TuneInterrupted:
        """After Ctrl-C: commit what finished of the batch being measured; how far we got.
        (A second Ctrl-C here stops at once: the commit is one transaction.)"""
        if self.measuring is not None and isinstance(exc, MeasureInterrupted):
            k, cands = self.measuring
            done = [(c, r) for c, r in zip(cands, exc.results) if r is not None]
            if done:
                self._commit(k, *map(list, zip(*done)))
        self.measuring = None
        return TuneInterrupted(sum(s.trials for s in self.states), budget, self.measured, self.db)

    def _warnings(self, result: MeasureResult, count: bool = True) -> dict:
        """The record's ``noisy`` / ``busy`` flags (see :class:`Record`), counted."""
        flags = {}
        if result.noisy:
            flags["noisy"] = round(result.spread, 3)
            self.noisy_records += count
        if result.status == "ok" and machine_busy(result.load, self.cores):
            assert result.load is not None  # machine_busy is False without one
            flags["busy"] = round(result.load, 2)
            self.busy_records += count
        return flags

    def summary(self, baseline: bool) -> TuneSummary:
        out = TuneSummary(
            seconds=time.monotonic() - self.t0,
            measured=self.measured,
            load=self.load,
            cores=self.cores,
            busy_records=self.busy_records,
            noisy_records=self.noisy_records,
            remeasured_busy=self.remeasured_busy,
            emulated=self.target.kind == "cuda-emulate",
        )
        for k, task in enumerate(self.tasks):
            best = self.db.best(task.func, self.target)
            row = TaskSummary(
                task.name,
                self.states[k].trials,
                self.failed[k],
                best.latency if best is not None else math.inf,
                task.flops,
            )
            if self.hints[k] is not None:
                func, sizes = self.hints[k]
                row.measured_at = hint_text(sizes)
                symbolic_best = self.db.best(func, self.target)
                row.symbolic_ok = symbolic_best is not None
            final = self.finals.get(k)
            if final is not None:
                row.final = final
            if baseline:
                row.baseline, row.numpy = self._baselines(k)
            out.tasks.append(row)
        return out

    def _baselines(self, k: int) -> tuple[Optional[float], Optional[float]]:
        """Seconds of the unscheduled function (measured like a candidate, once) and of the
        numpy reference (in this process), None where unavailable."""
        task, mtask = self.tasks[k], self.measure_tasks[k]
        # an unscheduled function at a paper shape can take seconds per run: time it once
        res = self.runner.measure(
            [MeasureInput(mtask, task.func)],
            replace(self.runner.config, number=1, repeat=1, min_repeat_ms=0.0, windows=1, run_timeout=120.0),
        )
        unscheduled = res[0].latency if res[0].status == "ok" else None
        numpy_s = None
        if task.reference is not None:
            arrays, outputs, _ = mtask.data()
            inputs = [a for j, a in enumerate(arrays) if j not in outputs]
            numpy_s = min(time_entry(task.reference, inputs, number=1, repeat=3, min_repeat_ms=25.0))
        return unscheduled, numpy_s
