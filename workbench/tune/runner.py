"""Builder and runner: compile and time candidates in isolated worker processes.

    runner = LocalRunner(workers=2, measure=MeasureConfig(build_timeout=30, run_timeout=20))
    task = Task(func, "llvm", reference=wb.workloads.reference("GMM"))
    results = runner.measure([MeasureInput(task, sch.func) for sch in candidates])
    results[0].status, results[0].latencies, results[0].error

A batch goes in two phases (DESIGN decision 6):

1. **build** — candidates are compiled in parallel by the workers (``python -m
   workbench.tune.worker``), each under ``build_timeout``; a worker keeps its kernels;
2. **run** — one candidate at a time (parallel timing on a few cores distorts every number):
   its worker resets the workload's inputs, poisons the outputs, runs the kernel once and
   compares the outputs with the expected ones (the numpy ``reference`` of the task, else the
   unscheduled function), then times it like TVM (``number`` runs per repeat, grown until a
   repeat lasts ``min_repeat_ms``; ``repeat`` values), all under ``run_timeout``.

A crash (the worker's socket closes: a segfault, an abort) or a deadline passed (the worker is
killed) fails that candidate with the reason; the worker is replaced before the next job, and
kernels that died with it are rebuilt. Statuses: ``ok``, ``build_error``, ``run_error``,
``timeout``, ``wrong_result``.

Measuring on a machine shared with other work:

* workers bound libgomp's spin-waiting, for libraries that load it (parallel loops run on
  workbench's own pool, which spins as little; :func:`workbench.codegen.llvm.runtime.bound_spinning`,
  set in their environment before libgomp loads) and run parallel regions on at most the CPUs
  this process may use: a spinning thread must not hold a core the other threads of its own
  region are waiting for;
* a candidate whose repeats disagree by more than ``max_spread`` (max / min) is measured once
  more; if it is still that noisy its result says so (``noisy``), and the database keeps the
  flag with the record;
* each result carries the 1-minute load average read after it ran (``load``): above the CPUs
  available (:func:`machine_busy`), other work was competing for them and the tuner says so.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import weakref
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Optional, Sequence, Union, cast

import numpy as np

from ..codegen.llvm.runtime import bound_spinning
from ..target import Target, host_cores
from ..codegen.timing import spread_of
from ..ir.func import PrimFunc
from ..workloads import output_params
from .measure import MeasureConfig


@dataclass(eq=False)
class Task:
    """A workload to measure candidates of: the unscheduled ``func``, the target and how to
    check results (``reference(*inputs) -> expected output``, numpy; None: the unscheduled
    function built for the target is the reference). Inputs are random, drawn once (``seed``).
    ``target``: a ``Target`` (a string is parsed)."""

    func: PrimFunc
    target: Union[str, Target] = "llvm"  # a Target once constructed
    reference: Optional[Callable[..., Any]] = None
    seed: int = 0
    rtol: float = 1e-3
    atol: float = 1e-4  # relative to the largest |expected| value
    _data: Optional[tuple] = field(default=None, repr=False)

    def __post_init__(self):
        self.target = Target.of(self.target)
        # per task object: two tasks of one function may differ in inputs or reference
        self.key = f"{self.func.name}-{uuid.uuid4().hex[:12]}"

    # Pickled (to a Dask worker) with the target as text: a Target caches what it read of the
    # host (CPU model, cores), and the machine that measures must read its own.
    def __getstate__(self) -> dict:
        return {**self.__dict__, "target": str(self.target)}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, target=Target(state["target"]))

    def data(self) -> tuple[list[np.ndarray], list[int], Optional[list[np.ndarray]]]:
        """(every parameter's array, indices of the outputs, expected outputs or None)."""
        if self._data is None:
            outputs = output_params(self.func)
            rng = np.random.default_rng(self.seed)
            arrays = []
            for k, buf in enumerate(self.func.params):
                dtype = np.dtype(buf.dtype)
                if k in outputs:
                    arrays.append(np.zeros(buf.shape, dtype))
                elif dtype.kind == "f":
                    arrays.append(rng.uniform(-1.0, 1.0, size=buf.shape).astype(dtype))
                elif dtype.kind == "b":
                    arrays.append(rng.integers(0, 2, size=buf.shape).astype(dtype))
                else:
                    arrays.append(rng.integers(-8, 8, size=buf.shape).astype(dtype))
            expected = None
            if self.reference is not None:
                inputs = [a for k, a in enumerate(arrays) if k not in outputs]
                out = self.reference(*inputs)
                out = list(out) if isinstance(out, (tuple, list)) else [out]
                expected = [
                    np.asarray(o, dtype=arrays[k].dtype).reshape(arrays[k].shape)
                    for o, k in zip(out, outputs)
                ]
            self._data = (arrays, outputs, expected)
        return self._data


@dataclass(eq=False)
class MeasureInput:
    """A candidate: the scheduled function of ``task`` (sent to a worker pickled)."""

    task: Task
    func: PrimFunc


@dataclass
class MeasureResult:
    status: str  # ok | build_error | run_error | timeout | wrong_result
    latencies: list[float] = field(default_factory=list)  # seconds, one per repeat
    error: str = ""
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    noisy: bool = False  # repeats still more than max_spread apart when re-measured
    load: Optional[float] = None  # 1-minute load average right after it ran (None: unknown)
    number: Optional[int] = None  # runs per repeat (per window), where the runner says
    windows: Optional[int] = None  # windows per repeat, where the runner says

    @property
    def latency(self) -> float:
        """Median of the repeats (as :attr:`Record.latency`); inf unless ok."""
        return float(np.median(self.latencies)) if self.status == "ok" and self.latencies else float("inf")

    @property
    def spread(self) -> float:
        """``max / min`` of the repeats (1.0 without any)."""
        return spread_of(self.latencies)


def load_average() -> Optional[float]:
    """The machine's 1-minute load average (None where the OS does not tell)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def machine_busy(load: Optional[float], cores: Optional[int] = None) -> bool:
    """Whether a load average says other work competed for our CPUs: more runnable threads,
    on average over the last minute, than the CPUs this process may use. (Tuning itself keeps
    at most that many busy: workers build in parallel, one measures at a time.)"""
    return load is not None and load > (cores or host_cores())


def remeasure_if_noisy(
    first: MeasureResult, again: Callable[[], MeasureResult], max_spread: float
) -> MeasureResult:
    """``first``, or when its repeats are more than ``max_spread`` apart (max / min), the
    result of measuring once more (``again()``), flagged ``noisy`` if it is still that spread.
    A failed second measurement leaves the first one, flagged."""
    if first.status != "ok" or first.spread <= max_spread:
        return first
    second = again()
    if second.status != "ok":
        first.noisy = True
        return first
    second.noisy = second.spread > max_spread
    second.build_seconds = first.build_seconds
    second.run_seconds += first.run_seconds
    return second


def _max_load(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return b if a is None else a if b is None else max(a, b)


def _rounds_result(
    samples: list[float], last: Optional[MeasureResult], config: MeasureConfig
) -> MeasureResult:
    """The result of an interleaved re-measurement: one latency per round."""
    result = MeasureResult("ok", list(samples))
    if last is not None:
        result.build_seconds, result.load = last.build_seconds, last.load
    result.noisy = result.spread > config.max_spread
    return result


class MeasureInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) during :meth:`Runner.measure`: its unfinished candidates were dropped
    and its workers stopped; ``results`` holds what finished before (None for the others, in
    input order), so the tuner can commit them. A ``KeyboardInterrupt``: code that knows
    nothing of it stops as for any interrupt."""

    def __init__(self, results: Sequence[Optional[MeasureResult]]):
        super().__init__("measurement interrupted")
        self.results = list(results)


class Runner:
    """Base class: ``measure(inputs) -> results`` in the same order. ``close()`` frees it.
    ``config``: the runner's measurement settings.

    On Ctrl-C a runner stops its unfinished work at once and raises
    :class:`MeasureInterrupted` with the results that finished (a plain KeyboardInterrupt
    loses them, nothing more).
    """

    config: MeasureConfig = MeasureConfig()

    def measure(
        self, inputs: Sequence[MeasureInput], config: Optional[MeasureConfig] = None
    ) -> list[MeasureResult]:
        """Results in input order. ``config`` replaces the runner's settings for this call
        (``dataclasses.replace(runner.config, number=1)``)."""
        raise NotImplementedError

    def measure_interleaved(
        self, inputs: Sequence[MeasureInput], rounds: int, config: Optional[MeasureConfig] = None
    ) -> list[MeasureResult]:
        """Time ``inputs`` in alternation: ``rounds`` rounds, each timing every candidate once
        (one repeat, at least ``min_repeat_ms``), starting one further along each round; a
        result's ``latencies`` are its rounds' values. Candidates compared this way met the
        same conditions (a burst of other work slows all of them, not one).

        This base version measures each round as one batch (``measure``, built again each
        round); :class:`LocalRunner` keeps the kernels and alternates them one repeat at a
        time."""
        config = self.config if config is None else config
        n = len(inputs)
        samples: list[list[float]] = [[] for _ in inputs]
        out: list[Optional[MeasureResult]] = [None] * n
        first: list[Optional[MeasureResult]] = [None] * n
        for r in range(rounds):
            order = [k for k in ((r + j) % n for j in range(n)) if out[k] is None]
            if not order:
                break
            one = replace(config, repeat=1, check=config.check and r == 0)
            for k, res in zip(order, self.measure([inputs[k] for k in order], one)):
                if res.status != "ok":
                    out[k] = res
                    continue
                samples[k] += res.latencies[:1]
                if first[k] is None:
                    first[k] = res
                else:
                    res.load = _max_load(res.load, first[k].load)  # type: ignore[union-attr]
                    first[k] = res
        return [
            out_k if (out_k := out[k]) is not None else _rounds_result(samples[k], first[k], config)
            for k in range(n)
        ]

    def current_load(self) -> Optional[float]:
        """The load of the machine that measures, now (1-minute average; None: unknown)."""
        return load_average()

    def close(self) -> None:
        pass

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @staticmethod
    def create(spec: Any = "local", **kwargs: Any) -> "Runner":
        """``"local"`` (:class:`LocalRunner`) or a ``Runner`` returned unchanged."""
        if isinstance(spec, Runner):
            return spec
        if spec == "local":
            return LocalRunner(**kwargs)
        raise ValueError(f"unknown runner {spec!r}: use 'local' or a Runner instance")


class _Worker:
    """One worker process, its socket and what it holds (registered tasks)."""

    def __init__(self, index: int):
        self.index = index
        self.proc: Optional[subprocess.Popen] = None
        self.conn: Optional[Connection] = None
        self.log = tempfile.NamedTemporaryFile(prefix=f"wb-worker{index}-", suffix=".log", delete=False)
        self.tasks: set[str] = set()
        self.generation = 0  # bumped at each restart: kernels of an older one are gone

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        parent, child = socket.socketpair()
        pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [pkg_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
        bound_spinning(env)  # libgomp reads it when it loads, at the worker's first build
        self.log.seek(0)
        self.log.truncate()
        # a process group of its own: Ctrl-C in the notebook or terminal interrupts the tuner,
        # not the workers (the tuner then shuts them down itself). Not a session of its own
        # (start_new_session): Linux schedules each session as one group (autogroup), and on a
        # loaded machine a worker alone in a new group timed parallel kernels 3-4x slower than
        # the tuner's own process ran them (SFM: 560-870 us against 190 us, load 14 on 2 CPUs)
        isolate: dict[str, Any] = (
            {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "workbench.tune.worker", str(child.fileno())],
            pass_fds=(child.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            env=env,
            **isolate,
        )
        child.close()
        self.conn = Connection(parent.detach())
        self.tasks = set()
        self.generation += 1

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()
        if self.conn is not None:
            self.conn.close()
        self.conn = None

    def request_exit(self) -> None:
        """Ask an idle worker to exit (a busy one is killed by :meth:`stop`)."""
        if self.alive:
            assert self.conn is not None  # set while the process lives
            try:
                self.conn.send(("exit",))
            except OSError:
                pass

    def stop(self, timeout: float = 2.0) -> None:
        if self.alive:
            assert self.proc is not None
            self.request_exit()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def death(self) -> str:
        """Why the worker ended (signal or exit code) and the last lines of its log."""
        self.kill()
        code = self.proc.returncode if self.proc is not None else None
        if code is not None and code < 0:
            try:
                what = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                what = f"killed by signal {-code}"
        else:
            what = f"exited with code {code}"
        try:
            with open(self.log.name, errors="replace") as f:
                lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("run ")]
        except OSError:
            lines = []
        # faulthandler's headline says what happened ("Fatal Python error: Segmentation
        # fault"); otherwise the last lines of the log (a C library's abort message, ...)
        fatal = [ln for ln in lines if ln.startswith("Fatal Python error")]
        tail = fatal[-1] if fatal else " | ".join(lines[-3:])
        return f"worker {what}" + (f" ({tail})" if tail else "")


class LocalRunner(Runner):
    """Measure on this machine with ``workers`` processes (see the module docstring)."""

    def __init__(self, workers: Optional[int] = None, *, measure: Optional[MeasureConfig] = None):
        self.workers = [_Worker(k) for k in range(workers or max(1, min(host_cores(), 4)))]
        self.config = measure or MeasureConfig()
        self._jobs = 0
        self._finalizer = weakref.finalize(self, _shutdown, self.workers)

    def close(self) -> None:
        self._finalizer()

    # ------------------------------------------------------------------------------------------
    def measure(
        self, inputs: Sequence[MeasureInput], config: Optional[MeasureConfig] = None
    ) -> list[MeasureResult]:
        config = self.config if config is None else config
        results: list[Optional[MeasureResult]] = [None] * len(inputs)
        try:
            self._measure(inputs, results, config)
        except KeyboardInterrupt:
            # a worker may be deep in a build or a kernel (it ignores SIGINT: own session):
            # kill them all now; each is started again on the next measure
            for worker in self.workers:
                worker.kill()
            raise MeasureInterrupted(results) from None
        return results  # type: ignore[return-value]

    def _measure(self, inputs, results, config: MeasureConfig) -> None:
        timing, run_timeout = config.timing, config.run_timeout
        tries = [0] * len(inputs)
        todo = list(range(len(inputs)))
        while todo:
            for k in todo:
                tries[k] += 1
            built = self._build_all(inputs, todo, results, config)
            todo = []
            for k, worker, gen, job, build_s in built:
                if worker.generation != gen or not worker.alive:
                    if tries[k] > config.max_retries:  # lost with a crashing neighbour, again
                        results[k] = MeasureResult(
                            "run_error", error="kernel lost: its worker kept crashing on other candidates"
                        )
                    else:
                        todo.append(k)
                    continue
                first = self._run(worker, job, build_s, timing, run_timeout, config.check)
                results[k] = first  # finished: kept if the re-measurement is interrupted
                results[k] = remeasure_if_noisy(
                    first,
                    lambda: self._run(worker, job, build_s, timing, run_timeout, False),
                    config.max_spread,
                )

    def measure_interleaved(
        self, inputs: Sequence[MeasureInput], rounds: int, config: Optional[MeasureConfig] = None
    ) -> list[MeasureResult]:
        """See :meth:`Runner.measure_interleaved`: the candidates are built once (in parallel);
        their kernels stay in the workers, which time them in turn, one repeat each, the
        number of runs per repeat sized at the first round."""
        config = self.config if config is None else config
        results: list[Optional[MeasureResult]] = [None] * len(inputs)
        try:
            self._interleave(inputs, rounds, results, config)
        except KeyboardInterrupt:
            for worker in self.workers:
                worker.kill()
            raise MeasureInterrupted([None] * len(inputs)) from None
        return results  # type: ignore[return-value]

    def _interleave(self, inputs, rounds: int, results, config: MeasureConfig) -> None:
        built = self._build_all(inputs, range(len(inputs)), results, config)
        live = {k: (worker, gen, job, build_s) for k, worker, gen, job, build_s in built}
        samples: dict[int, list[float]] = {k: [] for k in live}
        number: dict[int, int] = {}  # runs per window, sized at the first round
        windows: dict[int, int] = {}
        last: dict[int, MeasureResult] = {}
        order = sorted(live)
        for r in range(max(rounds, 1)):
            for k in order[r % len(order) :] + order[: r % len(order)] if order else []:
                if k not in live:
                    continue
                worker, gen, job, build_s = live[k]
                if worker.generation != gen or not worker.alive:
                    results[k] = MeasureResult(
                        "run_error", error="kernel lost: its worker crashed on another candidate"
                    )
                    del live[k]
                    continue
                if k in number:
                    timing = {"number": number[k], "repeat": 1, "min_repeat_ms": 0.0, "windows": windows[k]}
                else:
                    timing = {**config.timing, "number": 1, "repeat": 1}
                check = config.check and r == 0
                res = self._time_once(worker, job, build_s, timing, config.run_timeout, check)
                if res.status != "ok":
                    results[k] = res
                    del live[k]
                    continue
                samples[k] += res.latencies
                number[k] = res.number or 1
                windows[k] = res.windows or 1
                res.load = _max_load(res.load, last[k].load if k in last else None)
                last[k] = res
        for k in live:
            results[k] = _rounds_result(samples[k], last.get(k), config)
        jobs: dict[_Worker, list[int]] = {}
        for worker, gen, job, _ in (b[1:] for b in built):
            if worker.alive and worker.generation == gen:
                jobs.setdefault(worker, []).append(job)
        for worker, ids in jobs.items():
            assert worker.conn is not None  # alive
            try:
                worker.conn.send(("drop", ids))
            except OSError:
                pass

    def _ensure(self, worker: _Worker) -> None:
        if not worker.alive:
            worker.kill()
            worker.start()

    def _build_all(self, inputs, indices, results, config: MeasureConfig) -> list[tuple]:
        """Build the candidates ``indices`` on the workers in parallel; returns
        (index, worker, generation, job id, build seconds) for the ones that built."""
        queue = list(indices)
        busy: dict[_Worker, tuple[int, str, float, int]] = {}  # -> (index, step, deadline, job)
        built = []

        def dispatch(worker: _Worker, k: int) -> None:
            task = inputs[k].task
            self._ensure(worker)
            assert worker.conn is not None  # a live worker has its socket
            deadline = time.monotonic() + config.build_timeout
            if task.key not in worker.tasks:
                # without a numpy reference the worker also builds and runs the unscheduled
                # function once: allow it a run's time as well
                deadline += config.run_timeout
                arrays, outputs, expected = task.data()
                worker.conn.send(
                    (
                        "task",
                        task.key,
                        task.func,
                        str(task.target),  # the worker parses it: its host's CPU, not ours
                        arrays,
                        outputs,
                        expected,
                        (task.rtol, task.atol),
                    )
                )
                busy[worker] = (k, "task", deadline, -1)
            else:
                self._jobs += 1
                worker.conn.send(("build", self._jobs, task.key, inputs[k].func))
                busy[worker] = (k, "build", deadline, self._jobs)

        while queue or busy:
            for worker in self.workers:
                if queue and worker not in busy:
                    dispatch(worker, queue.pop(0))
            timeout = max(0.0, min(d for _, _, d, _ in busy.values()) - time.monotonic())
            # busy workers are live ones: each has its socket
            ready = wait([cast(Connection, w.conn) for w in busy], timeout=timeout)
            for worker in list(busy):
                k, step, deadline, job = busy[worker]
                if worker.conn in ready:
                    try:
                        msg = worker.conn.recv()
                    except (EOFError, OSError):
                        del busy[worker]
                        results[k] = MeasureResult(
                            "build_error", error=f"crashed while building: {worker.death()}"
                        )
                        continue
                    del busy[worker]
                    if msg[0] == "task_ok":
                        worker.tasks.add(msg[1])
                        task = inputs[k].task
                        if task.data()[2] is None:  # computed by the worker: share it
                            task._data = (task._data[0], task._data[1], msg[2])
                        dispatch(worker, k)
                    elif msg[0] == "built":
                        built.append((k, worker, worker.generation, msg[1], msg[2]))
                    elif msg[0] == "build_error":
                        results[k] = MeasureResult("build_error", error=msg[2])
                    else:  # ("error", kind, text): preparing the workload failed
                        results[k] = MeasureResult("build_error", error=f"{msg[1]}: {msg[2]}")
                elif time.monotonic() >= deadline:
                    del busy[worker]
                    worker.kill()
                    what = "building" if step == "build" else "preparing the workload"
                    limit = config.build_timeout + (0 if step == "build" else config.run_timeout)
                    results[k] = MeasureResult("timeout", error=f"{what} took longer than {limit:g} s")
        built.sort(key=lambda b: b[0])
        return built

    def _run(
        self, worker: _Worker, job: int, build_s: float, timing: dict, run_timeout: float, check: bool
    ) -> MeasureResult:
        result = self._run_once(worker, job, build_s, timing, run_timeout, check)
        result.load = load_average()
        return result

    def _run_once(
        self, worker: _Worker, job: int, build_s: float, timing: dict, run_timeout: float, check: bool
    ) -> MeasureResult:
        return self._exchange(worker, ("run", job, timing, check), build_s, run_timeout)

    def _time_once(
        self, worker: _Worker, job: int, build_s: float, timing: dict, run_timeout: float, check: bool
    ) -> MeasureResult:
        """One repeat of an interleaved re-measurement (the kernel stays in the worker)."""
        result = self._exchange(worker, ("time", job, timing, check), build_s, run_timeout)
        result.load = load_average()
        return result

    def _exchange(self, worker: _Worker, message: tuple, build_s: float, run_timeout: float) -> MeasureResult:
        t0 = time.monotonic()
        if not worker.alive:  # a re-measurement after the worker died
            return MeasureResult("run_error", error="worker lost before running", build_seconds=build_s)
        assert worker.conn is not None  # a live worker has its socket
        try:
            worker.conn.send(message)
        except OSError:  # it died after building (killed from outside, out of memory)
            return MeasureResult(
                "run_error", error=f"worker lost before running: {worker.death()}", build_seconds=build_s
            )
        if not wait([worker.conn], timeout=run_timeout):
            worker.kill()
            return MeasureResult(
                "timeout",
                error=f"running took longer than {run_timeout:g} s (hang or far too slow)",
                build_seconds=build_s,
                run_seconds=time.monotonic() - t0,
            )
        try:
            msg = worker.conn.recv()
        except (EOFError, OSError):
            return MeasureResult(
                "run_error",
                error=f"crashed while running: {worker.death()}",
                build_seconds=build_s,
                run_seconds=time.monotonic() - t0,
            )
        if msg[0] == "error":
            return MeasureResult("run_error", error=f"{msg[1]}: {msg[2]}", build_seconds=build_s)
        _, _, status, latencies, error, run_s, *sizes = msg
        result = MeasureResult(status, list(latencies), error, build_s, run_s)
        result.number = sizes[0] if sizes else None
        result.windows = sizes[1] if len(sizes) > 1 else None
        return result


def _shutdown(workers: list[_Worker]) -> None:
    for worker in workers:  # all at once: stopping takes one exit's time, not one per worker
        worker.request_exit()
    deadline = time.monotonic() + 2.0
    for worker in workers:
        worker.stop(timeout=max(0.0, deadline - time.monotonic()))
        try:
            worker.log.close()
            os.unlink(worker.log.name)
        except OSError:
            pass
