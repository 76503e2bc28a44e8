"""Timing compiled code: runs per repeat chosen by duration, a result that says how stable it was.

    t = kernel.time(a, b, c)        # 5 repeats of >= 25 ms, each its fastest ~1 ms window; t: the median
    t * 1e3, t < other              # a float, seconds
    t.min, t.max, t.spread          # spread = max / min over the repeats (1.0: all agreed)
    repr(t)                         # 0.0321 ms ± 2% (median of 5 repeats, each the fastest of 25 × 31 runs)

As TVM's time evaluator: a repeat runs the code ``number`` times back to back, and ``number``
is grown until a repeat lasts ``min_repeat_ms``, so that timer resolution and call overhead do
not dominate small kernels. The median of the repeats is the value (not the best, which a lucky
repeat sets, nor the mean, which one descheduled repeat on a shared machine sets). Unlike TVM,
a repeat counts its fastest window of ``number`` runs (``WINDOWS`` windows of ~1 ms by default),
the same statistic for ``kernel.time``, ``model.time`` and the tuner's records (see
:func:`time_runs`).
"""

from __future__ import annotations

import math
import numbers
import statistics
import time
from typing import Any, Callable, Optional, Sequence

#: default length of one repeat when ``number`` is not given
MIN_REPEAT_MS = 25.0
#: default windows per repeat (each its fastest), for ``kernel.time``, ``model.time`` and the tuner
WINDOWS = 25


class TimingResult(float):
    """Seconds per run: the median over repeats, with the repeats kept.

    Attributes: ``samples`` (seconds per run of each repeat, in order), ``number`` (runs per
    repeat, or per window), ``windows`` (windows of ``number`` runs per repeat, the repeat's
    value its fastest; 1: plain repeats), ``repeat``, ``median`` (the value itself), ``min``,
    ``max``, ``spread`` (``max / min``: 1.0 when every repeat agreed; the tuner re-measures a
    candidate above 2) and
    ``deviation`` (the largest distance of a repeat from the median, relative to it: the
    ``±`` of the printed form).
    """

    samples: tuple[float, ...]
    number: int
    windows: int

    def __new__(cls, samples: Sequence[float], number: int, windows: int = 1) -> "TimingResult":
        if not samples:
            raise ValueError("TimingResult needs at least one sample")
        self = super().__new__(cls, statistics.median(samples))
        self.samples = tuple(float(x) for x in samples)
        self.number = int(number)
        self.windows = int(windows)  # windows of `number` runs per repeat (each its fastest)
        return self

    @property
    def median(self) -> float:
        return float(self)

    @property
    def repeat(self) -> int:
        return len(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    @property
    def spread(self) -> float:
        """``max / min`` of the repeats (inf when the fastest took no measurable time)."""
        return spread_of(self.samples)

    @property
    def deviation(self) -> float:
        """Largest ``|repeat - median| / median``."""
        med = float(self)
        if med <= 0:
            return 0.0
        return max(abs(x - med) for x in self.samples) / med

    def __repr__(self) -> str:
        runs = f"{self.repeat} × {self.number} runs"
        if self.windows > 1:
            runs = f"{self.repeat} repeats, each the fastest of {self.windows} × {self.number} runs"
        return f"{format_seconds(float(self))} ± {self.deviation * 100:.2g}% (median of {runs})"

    def __str__(self) -> str:  # print(t, "s") and f"{t}" as for any float
        return float.__repr__(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    def __reduce__(self):
        return (TimingResult, (self.samples, self.number, self.windows))


def format_seconds(seconds: float) -> str:
    """``0.0321 ms``, ``1.78 ms``, ``12.3 s``: milliseconds up to 10 s."""
    if not math.isfinite(seconds):
        return str(seconds)
    if seconds >= 10:
        return f"{seconds:.4g} s"
    return f"{seconds * 1e3:.4g} ms"


def time_runs(
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    *,
    number: int = 1,
    repeat: int = 5,
    min_repeat_ms: float = 0.0,
    warmup: int = 0,
    clock: Callable[[], float] = time.perf_counter,
    windows: int = 1,
) -> TimingResult:
    """Time ``fn(*args)``: ``repeat`` repeats of ``number`` runs each, after ``warmup`` runs.

    With ``min_repeat_ms > 0``, ``number`` is where calibration starts: it grows (the short
    repeats are discarded) until one repeat lasts ``min_repeat_ms``, and a repeat then stops
    early once it has lasted ten times that (at least 50 ms) — on a loaded machine a kernel
    can stall for a scheduler tick now and then, and ``number`` was sized on the fast runs.
    With ``min_repeat_ms == 0`` every repeat is exactly ``number`` runs.

    ``windows > 1``: a repeat is cut into that many back-to-back windows of ``number`` runs each,
    and its value is its fastest window (``number`` is then sized so that a window lasts
    ``min_repeat_ms / windows``; a kernel longer than that gets fewer windows, at least one,
    so a repeat still lasts about ``min_repeat_ms``). Other work on the CPUs only ever adds
    time, and it comes in scheduler slices of milliseconds: a window of about a millisecond
    runs whole between two of them often enough, where a 25 ms repeat almost never does (GMM-128,
    37 us quiet: median of 25 ms repeats 72-307 us with two busy loops on 2 cores, fastest
    1 ms window 37-38 us). So the value is what the kernel does uncontended, the lower bound
    Python's ``timeit`` recommends (its ``min``), per repeat: the ``repeat`` values still say
    how well repeats agree.
    """
    counts = (number, repeat, warmup, windows)
    if not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in counts) or not isinstance(
        min_repeat_ms, numbers.Real
    ):
        raise TypeError(
            f"time: number, repeat, warmup and windows are ints, min_repeat_ms a number; got "
            f"number={number!r}, repeat={repeat!r}, warmup={warmup!r}, windows={windows!r}, "
            f"min_repeat_ms={min_repeat_ms!r}"
        )
    if number < 1 or repeat < 1 or warmup < 0 or windows < 1 or not 0 <= min_repeat_ms < math.inf:
        raise ValueError(
            f"time: need number >= 1, repeat >= 1, warmup >= 0, windows >= 1 and "
            f"min_repeat_ms >= 0, got number={number}, repeat={repeat}, "
            f"warmup={warmup}, windows={windows}, min_repeat_ms={min_repeat_ms}"
        )
    for _ in range(warmup):
        fn(*args)
    cap = max(10 * min_repeat_ms / 1e3, 0.05) if min_repeat_ms > 0 else math.inf
    min_s = min_repeat_ms / 1e3 / windows  # what `number` runs (one window) should last

    def one_repeat(n: int) -> tuple[float, int]:
        runs = 0
        t0 = clock()
        while runs < n:
            fn(*args)
            runs += 1
            if not runs & 7 and clock() - t0 > cap:
                break
        return clock() - t0, runs

    if min_s > 0:
        # size `number` on the median of a few single runs, not on the first: on a loaded
        # machine one run stalled by a scheduler tick (4-68 ms for a 20 us parallel kernel)
        # would make every repeat a single run, and the median a stall
        probe: list[float] = []
        while len(probe) < 5 and sum(probe) < min_s:
            t0 = clock()
            fn(*args)
            probe.append(clock() - t0)
        typical = max(sorted(probe)[len(probe) // 2], 1e-9)
        number = min(max(number, int(min_s / typical * 1.1) + 1), 1 << 30)
        while number < 1 << 30:
            dt, runs = one_repeat(number)
            if dt >= min_s:
                break
            per_run = max(dt / runs, 1e-9)
            number = max(int(number * 1.618) + 1, int(min_s / per_run * 1.1) + 1)
        if windows > 1:  # a long kernel: as many windows as fill min_repeat_ms, at least one
            # (sized on the typical run: a calibration repeat stalled by other work is long)
            windows = max(1, min(windows, round(min_repeat_ms / 1e3 / (number * typical))))
    samples = []
    for _ in range(repeat):
        best, t0 = math.inf, clock()
        for _ in range(windows):
            dt, runs = one_repeat(number)
            best = min(best, dt / runs)
            if clock() - t0 > cap:
                break
        samples.append(best)
    return TimingResult(samples, number, windows)


def timing_plan(
    number: Optional[int], repeat: int, min_repeat_ms: float, warmup: int, windows: Optional[int]
) -> dict:
    """``time_runs``' keywords for the user-facing timers (``kernel.time``, ``model.time``):
    ``number`` None sizes the windows by duration, ``WINDOWS`` of them per repeat unless said
    (the tuner's statistic); an explicit ``number`` is taken as is, one window unless said."""
    if isinstance(number, numbers.Real) and number < 1:  # 0 would read as None below; types: time_runs
        raise ValueError(f"time: number must be >= 1 or None, got {number}")
    if windows is None:
        windows = WINDOWS if number is None else 1
    return {
        "number": number or 1,
        "repeat": repeat,
        "warmup": warmup,
        "min_repeat_ms": min_repeat_ms if number is None else 0.0,
        "windows": windows,
    }


def spread_of(samples: Sequence[float]) -> float:
    """``max / min`` of ``samples``: 1.0 when they agree (or there are none), inf when the
    fastest took no measurable time."""
    if not samples:
        return 1.0
    lo, hi = min(samples), max(samples)
    return hi / lo if lo > 0 else (1.0 if hi == 0 else math.inf)


__all__ = [
    "TimingResult",
    "time_runs",
    "format_seconds",
    "spread_of",
    "MIN_REPEAT_MS",
    "WINDOWS",
    "timing_plan",
]
