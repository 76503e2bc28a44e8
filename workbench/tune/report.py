"""What tuning reports as it goes: batch events for callbacks and the UI, a plain-text progress
bar for terminals, and the summary at the end.

A callback is a function called with each :class:`BatchEvent`, or an object with any of
``on_start(tasks)``, ``on_batch(event)``, ``on_end(summary)`` and ``on_interrupt(stop)`` (Ctrl-C:
a :class:`~workbench.tune.tuning.TuneInterrupted`, instead of ``on_end``).
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, TextIO

from .runner import machine_busy


@dataclass
class BatchEvent:
    """One measured batch of one task."""

    task: str  # the task's name
    task_index: int
    batch: int  # batches measured so far in this session, all tasks
    candidates: list  # Candidate objects (``.sch``, ``.trace``, ``.predicted``)
    results: list  # MeasureResult objects, same order
    best: float  # the task's best latency so far (seconds; inf if none)
    best_trace: Any  # the trace of that best (None if none)
    trials: int  # the task's measured trials (resumed ones included)
    total_trials: int  # all tasks
    budget: int
    elapsed: float  # seconds since tune() started
    search_seconds: float  # spent proposing this batch
    measure_seconds: float  # spent building and running it
    flops: Optional[int] = None  # per run of the task, when known
    load: Optional[float] = None  # highest 1-minute load average read while measuring it
    cores: int = 1  # CPUs the tuner may use

    @property
    def busy(self) -> bool:
        """Other work competed for our CPUs while this batch was measured."""
        return machine_busy(self.load, self.cores)

    @property
    def noisy(self) -> int:
        """Candidates whose repeats disagreed even when measured again."""
        return sum(r.noisy for r in self.results)

    @property
    def latencies(self) -> list[float]:
        """Mean measured seconds per candidate (inf for a failed one)."""
        return [r.latency for r in self.results]

    @property
    def predicted(self) -> list[Optional[float]]:
        return [c.predicted for c in self.candidates]

    @property
    def failures(self) -> list[tuple[str, str]]:
        return [(r.status, r.error) for r in self.results if r.status != "ok"]


@dataclass
class TaskSummary:
    name: str
    trials: int
    failed: int
    best: float  # seconds (inf: nothing worked)
    flops: Optional[int] = None
    baseline: Optional[float] = None  # the unscheduled function, seconds
    numpy: Optional[float] = None  # the numpy reference, seconds
    measured_at: Optional[str] = None  # a symbolic task: the shape_hint it was tuned at ("n=512")
    symbolic_ok: bool = True  # a symbolic task: some measured trace applies to the symbolic function
    # the final interleaved re-measurement of the top candidates (None: not done): its
    # "candidates", "rounds", "confirmed" (the machine was quiet meanwhile), "load",
    # "changed" (the pick differs from the search's best) and "searched" (that best, seconds)
    final: Optional[dict] = None

    @property
    def confirmed(self) -> Optional[bool]:
        """Whether the pick was re-measured on a quiet machine (None: not re-measured)."""
        return None if self.final is None else bool(self.final["confirmed"])

    @property
    def gflops(self) -> Optional[float]:
        if self.flops and math.isfinite(self.best) and self.best > 0:
            return self.flops / self.best / 1e9
        return None

    @property
    def speedup(self) -> Optional[float]:
        """Unscheduled / best."""
        if self.baseline and math.isfinite(self.best):
            return self.baseline / self.best
        return None

    @property
    def vs_numpy(self) -> Optional[float]:
        """numpy / best (above 1: faster than numpy)."""
        if self.numpy and math.isfinite(self.best):
            return self.numpy / self.best
        return None


@dataclass
class TuneSummary:
    tasks: list[TaskSummary] = field(default_factory=list)
    seconds: float = 0.0
    measured: int = 0  # trials measured in this session
    load: Optional[float] = None  # highest 1-minute load average read while measuring
    cores: int = 1  # CPUs the tuner could use
    busy_records: int = 0  # records measured while the machine was busy
    noisy_records: int = 0  # records whose repeats disagreed even when re-measured
    remeasured_busy: int = 0  # busy records measured again once the load had dropped
    emulated: bool = False  # cuda-emulate: candidates checked for correctness, times are the emulator's

    @property
    def busy(self) -> bool:
        """Other work competed for our CPUs during measurement: the timings are suspect."""
        return self.busy_records > 0

    def warnings(self) -> list[str]:
        """What makes this session's timings suspect, one sentence each (none: trust them)."""
        out = []
        if self.busy:
            out.append(
                f"the machine was busy: 1-minute load average up to {self.load:.1f} on "
                f"{self.cores} CPU(s) while {self.busy_records} of the records were "
                f"measured (flagged 'busy' in the database); their timings include "
                f"waiting for other work — tune again on a quiet machine"
            )
        for t in self.tasks:
            if t.final is not None and not t.final["confirmed"]:
                load = t.final.get("load")
                at = f" (1-minute load average {load:.1f} on {self.cores} CPU(s))" if load is not None else ""
                out.append(
                    f"{t.name}: the pick could not be confirmed on a quiet machine: the machine "
                    f"was still busy{at} during the final re-measurement of its top "
                    f"{t.final['candidates']} candidates; they were timed in alternation (the "
                    f"same conditions for each), but the figures include waiting for other work"
                )
        if self.noisy_records:
            out.append(
                f"{self.noisy_records} record(s) were noisy: their repeats still "
                f"differed by more than the runner's max_spread (max / min) when "
                f"measured again (flagged 'noisy')"
            )
        return out

    def __str__(self) -> str:
        if self.emulated:  # an emulator's seconds say nothing of a GPU's: no rates, no ratios
            head = f"{'task':<18} {'trials':>6} {'failed':>6} {'correct':>8}"
            rows = [
                f"{t.name[:18]:<18} {t.trials:>6} {t.failed:>6} {t.trials - t.failed:>8}" for t in self.tasks
            ]
        else:
            head = (
                f"{'task':<18} {'trials':>6} {'failed':>6} {'best ms':>10} {'GFLOP/s':>8} "
                f"{'x unsched':>9} {'x numpy':>8}"
            )
            rows = [
                f"{t.name[:18]:<18} {t.trials:>6} {t.failed:>6} "
                f"{_ms(t.best):>10} {_num(t.gflops, '.1f'):>8} "
                f"{_num(t.speedup, '.2f'):>9} {_num(t.vs_numpy, '.2f'):>8}"
                for t in self.tasks
            ]
        lines = [head, "-" * len(head), *rows]
        per = f", {self.seconds / self.measured:.2f} s per trial" if self.measured else ""
        lines.append(f"{self.measured} trials measured in {self.seconds:.1f} s{per}")
        for t in self.tasks:
            if t.measured_at is not None:
                lines.append(
                    f"{t.name}: symbolic shape, measured at {t.measured_at}; the schedule applies to any size"
                    if t.symbolic_ok
                    else f"{t.name}: symbolic shape, measured at {t.measured_at}; no measured schedule "
                    f"applies to the symbolic function (see the records' errors)"
                )
        if self.remeasured_busy:
            lines.append(
                f"{self.remeasured_busy} candidate(s) measured while busy were measured again when quiet"
            )
        for t in self.tasks:
            if t.final is not None and not self.emulated:
                what = (
                    "a different pick than the search's best"
                    if t.final["changed"]
                    else "the search's best kept"
                )
                lines.append(
                    f"{t.name}: top {t.final['candidates']} re-measured in {t.final['rounds']} "
                    f"interleaved rounds ({what}; {'quiet' if t.final['confirmed'] else 'busy'})"
                )
        if self.emulated:
            lines.append(
                "cuda-emulate checks candidates for correctness only (on this CPU, with GPU "
                "semantics); the search ranks them by the emulator's time, not a GPU's"
            )
        else:
            lines += [f"warning: {w}" for w in self.warnings()]
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4f}" if math.isfinite(seconds) else "-"


def _num(x: Optional[float], fmt: str) -> str:
    return format(x, fmt) if x is not None else "-"


def dispatch(callbacks: Sequence[Any], hook: str, payload: Any) -> None:
    """Call ``hook`` on every callback (plain functions get batch events only)."""
    for cb in callbacks:
        method = getattr(cb, hook, None)
        if method is not None:
            method(payload)
        elif (
            hook == "on_batch"
            and callable(cb)
            and not any(hasattr(cb, h) for h in ("on_start", "on_batch", "on_end", "on_interrupt"))
        ):
            cb(payload)


class ProgressBar:
    """Plain-text progress: a bar redrawn in place on a terminal, one line per batch
    elsewhere (``lines=True``), and the summary at the end."""

    def __init__(self, stream: Optional[TextIO] = None, lines: Optional[bool] = None, width: int = 24):
        self.stream = stream or sys.stderr
        self.lines = not _isatty(self.stream) if lines is None else lines
        self.width = width
        self._t0 = time.monotonic()

    def on_start(self, tasks: Sequence[Any]) -> None:
        self._t0 = time.monotonic()
        names = ", ".join(t.name for t in tasks[:6]) + (" ..." if len(tasks) > 6 else "")
        print(f"tuning {len(tasks)} task(s): {names}", file=self.stream, flush=True)

    def on_batch(self, e: BatchEvent) -> None:
        done = min(e.total_trials, e.budget)
        filled = int(self.width * done / max(e.budget, 1))
        bar = "#" * filled + "." * (self.width - filled)
        ok = sum(r.status == "ok" for r in e.results)
        rate = f" {e.flops / e.best / 1e9:.1f} GFLOP/s" if e.flops and math.isfinite(e.best) else ""
        busy = f", machine busy: load {e.load:.1f} > {e.cores} CPUs" if e.busy else ""
        text = (
            f"[{bar}] {done}/{e.budget} {e.task}: best {_ms(e.best)} ms{rate} "
            f"({ok}/{len(e.results)} ok, {e.elapsed:.0f} s{busy})"
        )
        if self.lines:
            print(text, file=self.stream, flush=True)
        else:
            print("\r" + text.ljust(100)[:119], end="", file=self.stream, flush=True)

    def on_end(self, summary: TuneSummary) -> None:
        if not self.lines:
            print(file=self.stream)
        print(summary, file=self.stream, flush=True)

    def on_interrupt(self, stop: Any) -> None:
        if not self.lines:
            print(file=self.stream, flush=True)  # end the bar's line; the caller says the rest


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
