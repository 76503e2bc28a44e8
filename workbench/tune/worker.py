"""The measurement worker: a separate Python process that builds and times candidates.

Started by :class:`~workbench.tune.runner.LocalRunner` as ``python -m workbench.tune.worker FD``
(a fresh interpreter: no ``__main__`` re-import, so it works from notebooks and from scripts
without a ``__main__`` guard). It talks over the socket ``FD`` with pickled tuples:

    ("task", task_id, func, target, inputs, outputs, expected, tolerance)
        -> ("task_ok", task_id, expected)     inputs: every parameter's array; outputs: the
                                              written parameters' indices; expected None: the
                                              worker computes it with the unscheduled func
    ("build", job_id, task_id, func)  -> ("built", job_id, seconds) | ("build_error", job_id, msg)
    ("run", job_id, timing, check)    -> ("ran", job_id, status, latencies, msg, seconds)
                                         the last job run may be run again (a re-measurement)
    ("time", job_id, timing, check)   -> ("ran", job_id, status, latencies, msg, seconds, number,
                                          windows)
                                         the kernel stays (an interleaved re-measurement times
                                         several in turn); number: runs per window it used,
                                         windows: windows per repeat
    ("drop", job_ids)                 -> nothing; frees those kernels
    anything that fails outside a candidate -> ("error", kind, msg)

A kernel that crashes the process, or hangs, is the parent's business: it sees the socket close
or its deadline pass, kills this process and starts another. Everything the parent needs to
record a failure with its reason is either sent back or in this process's log (stderr).
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal
import socket
import sys
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any, Optional

import numpy as np

from ..codegen import build
from ..codegen.arrays import aligned, canonical_dtype
from ..codegen.llvm.runtime import set_max_threads
from ..target import host_cores
from ..codegen.kernel import timing_args
from ..codegen.timing import time_runs


class _Task:
    """One workload's data, kept for every candidate of it: pristine inputs, reused arrays."""

    def __init__(self, func, target, inputs, outputs, expected, tolerance):
        self.func, self.target = func, target
        self.pristine = [np.array(a) for a in inputs]
        # 64-byte aligned, as users' arrays from wb.workloads.random_args and TVM's tensors;
        # with numpy's own dtype objects, not the unpickled copies: the kernel's native entry
        # takes only those (else every timed call went through ctypes, ~2.5 us more)
        self.arrays = [canonical_dtype(aligned(np.array(a))) for a in inputs]
        self.outputs = list(outputs)
        self.expected = expected
        self.rtol, self.atol = tolerance

    def reset(self) -> None:
        """Restore inputs (a bad kernel may have scribbled on them); poison the outputs, so an
        element a candidate forgets to write is caught."""
        for k, (work, pristine) in enumerate(zip(self.arrays, self.pristine)):
            if k in self.outputs:
                work.fill(np.nan if work.dtype.kind == "f" else -12345)
            else:
                np.copyto(work, pristine)

    def mismatch(self) -> Optional[str]:
        """None if every output matches the expected one, else what differs."""
        for k, exp in zip(self.outputs, self.expected):
            got = self.arrays[k]
            scale = float(np.max(np.abs(exp))) if exp.size else 0.0
            atol = self.atol * max(scale, 1e-30)
            if not np.allclose(got, exp, rtol=self.rtol, atol=atol, equal_nan=True):
                bad = ~np.isclose(got, exp, rtol=self.rtol, atol=atol, equal_nan=True)
                first = tuple(int(i) for i in np.argwhere(bad)[0])
                return (
                    f"output {self.func.params[k].name}: {int(bad.sum())} of {bad.size} "
                    f"elements differ; at {first}: got {got[first].item()!r}, expected "
                    f"{exp[first].item()!r}"
                )
        return None


def time_entry(entry, args, number: int, repeat: int, min_repeat_ms: float, windows: int = 1) -> list[float]:
    """Seconds per run, one value per repeat, the way TVM's time evaluator measures:
    ``number`` grows until a repeat lasts ``min_repeat_ms``; with ``windows`` > 1 a repeat's
    value is its fastest window (see :func:`workbench.codegen.timing.time_runs`)."""
    timed = time_runs(
        entry, timing_args(args), number=number, repeat=repeat, min_repeat_ms=min_repeat_ms, windows=windows
    )
    return list(timed.samples)


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        last = tb[-1]
        text += f"  [{os.path.basename(last.filename)}:{last.lineno} in {last.name}]"
    return text


class Worker:
    """The message loop (see the module docstring)."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self.tasks: dict[Any, _Task] = {}
        self.kernels: dict[Any, tuple[Any, Any]] = {}  # job -> (task_id, kernel)
        self.last_run: tuple[Any, Any, Any] = (None, None, None)  # (job, task_id, kernel)

    def serve(self) -> None:
        while True:
            try:
                msg = self.conn.recv()
            except EOFError:  # the parent went away
                return
            try:
                reply = getattr(self, "on_" + msg[0])(*msg[1:])
            except Exception as exc:  # our own failure (bad message, reference run): report it
                reply = ("error", msg[0], _error_text(exc))
            if reply is not None:
                self.conn.send(reply)

    def on_exit(self) -> None:
        sys.exit(0)

    def on_task(self, task_id, func, target, inputs, outputs, expected, tolerance):
        task = _Task(func, target, inputs, outputs, expected, tolerance)
        if task.expected is None:
            # an unscheduled function has no thread bindings: a GPU cannot run it, the CPU can
            kind = str(getattr(target, "kind", target)).split()[0]
            kernel = build(func, "llvm" if kind.startswith("cuda") else target)
            task.reset()
            kernel(*task.arrays)
            task.expected = [task.arrays[k].copy() for k in task.outputs]
        self.tasks[task_id] = task
        return ("task_ok", task_id, task.expected)

    def on_build(self, job_id, task_id, func):
        t0 = time.perf_counter()
        try:
            kernel = build(func, self.tasks[task_id].target)
        except Exception as exc:  # a candidate the backend rejects: its failure, not ours
            return ("build_error", job_id, _error_text(exc))
        self.kernels[job_id] = (task_id, kernel)
        return ("built", job_id, time.perf_counter() - t0)

    def on_run(self, job_id, timing, check):
        if job_id in self.kernels:
            self.last_run = (job_id, *self.kernels.pop(job_id))
        elif self.last_run[0] != job_id:
            raise KeyError(f"no kernel of job {job_id}")
        _, task_id, kernel = self.last_run
        task = self.tasks[task_id]
        t0 = time.perf_counter()
        task.reset()
        print(f"run {job_id}", file=sys.stderr, flush=True)  # names the culprit of a crash
        try:
            kernel.entry(*task.arrays)  # the check run doubles as the warm-up
            if check:
                wrong = task.mismatch()
                if wrong is not None:
                    return ("ran", job_id, "wrong_result", [], wrong, time.perf_counter() - t0)
            latencies = time_entry(kernel.entry, task.arrays, **timing)
        except Exception as exc:
            return ("ran", job_id, "run_error", [], _error_text(exc), time.perf_counter() - t0)
        return ("ran", job_id, "ok", latencies, "", time.perf_counter() - t0)

    def on_time(self, job_id, timing, check):
        task_id, kernel = self.kernels[job_id]
        task = self.tasks[task_id]
        t0 = time.perf_counter()
        print(f"run {job_id}", file=sys.stderr, flush=True)
        try:
            if check:
                task.reset()
            # also the warm-up: the candidate timed just before used the caches
            kernel.entry(*task.arrays)
            if check:
                wrong = task.mismatch()
                if wrong is not None:
                    return ("ran", job_id, "wrong_result", [], wrong, time.perf_counter() - t0, 0)
            timed = time_runs(kernel.entry, timing_args(task.arrays), **timing)
        except Exception as exc:
            return ("ran", job_id, "run_error", [], _error_text(exc), time.perf_counter() - t0, 0)
        return (
            "ran",
            job_id,
            "ok",
            list(timed.samples),
            "",
            time.perf_counter() - t0,
            timed.number,
            timed.windows,
        )

    def on_drop(self, job_ids) -> None:
        for job_id in job_ids:
            self.kernels.pop(job_id, None)


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies, so an orphan never spins in a hung kernel."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # elsewhere the parent's closed socket still ends an idle worker


def main(argv: list[str]) -> None:
    _die_with_parent()
    set_max_threads(host_cores())  # a "-num-cores=8" kernel on 2 CPUs: 2 threads, no more
    faulthandler.enable()  # a segfault prints the Python stack to the log the parent reads
    sock = socket.socket(fileno=int(argv[0]))
    Worker(Connection(sock.detach())).serve()


if __name__ == "__main__":
    main(sys.argv[1:])
