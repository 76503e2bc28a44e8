"""``Kernel.time`` and ``TimingResult``: a float (the median) that keeps its repeats; runs per
repeat chosen by duration. Clocks are injected: nothing here depends on the machine's speed."""

import math
import pickle

import numpy as np
import pytest

import workbench as wb
from workbench.codegen import Kernel
from workbench.codegen import TimingResult
from workbench.codegen import kernel as kernel_module
from workbench.codegen.timing import WINDOWS, format_seconds, time_runs
from workbench.graph import Graph
from workbench.graph import executor as executor_module
from workbench.tune import MeasureConfig, worker


def test_timing_result_is_its_median_as_a_float():
    t = TimingResult([3e-5, 1e-5, 2e-5, 2.2e-5, 1.9e-5], number=40)
    assert isinstance(t, float) and t == 2e-5 and t.median == 2e-5
    assert t * 1e3 == pytest.approx(0.02) and type(t * 1e3) is float
    assert t < 3e-5 and max([t, 1e-6]) is t and round(t, 6) == 2e-5
    assert (t.min, t.max, t.number, t.repeat) == (1e-5, 3e-5, 40, 5)
    assert t.samples == (3e-5, 1e-5, 2e-5, 2.2e-5, 1.9e-5)
    assert t.spread == pytest.approx(3.0)  # max / min
    assert t.deviation == pytest.approx(0.5)  # (3e-5 - 2e-5) / 2e-5
    assert repr(t) == "0.02 ms ± 50% (median of 5 × 40 runs)"
    assert str(t) == f"{t}" == "2e-05" and f"{t * 1e3:.3f}" == "0.020"  # as a float prints


def test_timing_result_round_trips_and_handles_edge_values():
    t = TimingResult([1.5e-3, 1.6e-3], number=2)
    back = pickle.loads(pickle.dumps(t))
    assert back == t and back.samples == t.samples and back.number == 2
    assert TimingResult([0.0, 0.0], 1).spread == 1.0
    assert TimingResult([0.0, 1e-9], 1).spread == math.inf
    assert TimingResult([12.5], 1).spread == 1.0 and repr(TimingResult([12.5], 1)).startswith("12.5 s")
    assert format_seconds(3.21e-5) == "0.0321 ms" and format_seconds(1.78e-3) == "1.78 ms"
    with pytest.raises(ValueError, match="at least one sample"):
        TimingResult([], 1)


class FakeClock:
    """A clock that advances only when the timed function runs: ``cost(k)`` seconds for run k."""

    def __init__(self, cost):
        self.now, self.runs, self.cost = 0.0, 0, cost

    def __call__(self):
        return self.now

    def run(self):
        self.now += self.cost(self.runs)
        self.runs += 1


def test_explicit_number_runs_exactly_that_often():
    clock = FakeClock(lambda k: 1e-3)
    t = time_runs(clock.run, number=7, repeat=3, warmup=2, clock=clock)
    assert clock.runs == 2 + 7 * 3
    assert t.samples == pytest.approx((1e-3,) * 3) and t.number == 7


def test_number_grows_until_a_repeat_lasts_min_repeat_ms():
    clock = FakeClock(lambda k: 1e-4)  # 0.1 ms per run
    t = time_runs(clock.run, number=1, repeat=4, min_repeat_ms=10, clock=clock)
    assert t.number >= 100 and t.number * 1e-4 >= 10e-3
    assert t.samples == pytest.approx((1e-4,) * 4) and t.spread == pytest.approx(1.0)


def test_a_stalled_repeat_stops_early_and_shows_in_the_spread():
    stall_at = []

    def cost(k):
        if stall_at and k == stall_at[0]:
            return 5.0  # one run stalls for 5 s
        return 1e-4

    clock = FakeClock(cost)
    t0 = time_runs(clock.run, number=1, repeat=1, min_repeat_ms=10, clock=clock)
    # inside the second repeat below (after 5 probing runs and the calibrating repeat)
    stall_at.append(clock.runs + 5 + t0.number + 3)
    before = clock.runs
    t = time_runs(clock.run, number=t0.number, repeat=3, min_repeat_ms=10, clock=clock)
    # probes + calibration (1 repeat) + 3 repeats, the stalled one cut short after <= 8 runs more
    assert clock.runs - before < 4 * t.number + 5
    assert t.spread > 100 and t.median == pytest.approx(1e-4)


def test_a_stalled_first_run_does_not_size_the_repeats():
    # the first run stalls for 40 ms (a scheduler tick on a loaded machine): `number` is sized
    # on the typical run all the same, so the repeats are many runs and the median is 0.1 ms
    clock = FakeClock(lambda k: 40e-3 if k == 0 else 1e-4)
    t = time_runs(clock.run, number=1, repeat=5, min_repeat_ms=10, clock=clock)
    assert t.number >= 100 and t.median == pytest.approx(1e-4)


class SlicedClock:
    """A CPU shared with other work in scheduler slices: ours and theirs alternate, each slice
    0.5-4 ms long (drawn from ``seed``). A run needs ``cost`` seconds of our slices; the
    clock keeps going through theirs, so a run that meets one of them lasts that much longer."""

    def __init__(self, cost, seed=0):
        self.rng = np.random.default_rng(seed)
        self.cost, self.now, self.runs = cost, 0.0, 0
        self.end = self.rng.uniform(0.5e-3, 4e-3)  # of our current slice

    def __call__(self):
        return self.now

    def run(self):
        left = self.cost
        while left > 0:
            step = min(left, self.end - self.now)
            self.now += step
            left -= step
            if self.now >= self.end:  # theirs, then our next slice
                self.now += self.rng.uniform(0.5e-3, 4e-3)
                self.end = self.now + self.rng.uniform(0.5e-3, 4e-3)
        self.runs += 1


@pytest.mark.parametrize("cost", [2e-6, 4e-5, 3e-4])
def test_windows_give_the_uncontended_time_where_whole_repeats_meet_other_work(cost):
    """Half the CPU goes to other work: every 25 ms repeat meets several of its slices, so its
    median is about twice the kernel's time; a repeat's fastest 1 ms window met none."""
    plain = time_runs((c := SlicedClock(cost)).run, repeat=5, min_repeat_ms=25, clock=c)
    windowed = time_runs((c := SlicedClock(cost)).run, repeat=5, min_repeat_ms=25, windows=25, clock=c)
    assert plain.median > 1.5 * cost
    assert windowed.samples == pytest.approx((cost,) * 5, rel=1e-6)
    assert windowed.windows > 1 and windowed.number * cost <= 2 * 25e-3 / windowed.windows


def test_windows_rank_two_kernels_by_their_uncontended_time_whatever_the_slices():
    """Kernels 5 % apart, timed under other work with slices drawn from four seeds: the windowed
    value ranks them right every time; the median of whole repeats does not."""

    def timed(cost, seed, windows):
        clock = SlicedClock(cost, seed=seed)
        return time_runs(clock.run, repeat=3, min_repeat_ms=25, windows=windows, clock=clock).median

    wrong_plain = 0
    for seed in range(4):
        fast, slow = timed(40e-6, seed, 25), timed(42e-6, seed + 100, 25)
        assert fast == pytest.approx(40e-6) and slow == pytest.approx(42e-6)
        wrong_plain += timed(40e-6, seed, 1) >= timed(42e-6, seed + 100, 1)
    assert wrong_plain >= 1


def test_a_long_kernel_gets_fewer_windows_not_a_longer_repeat():
    clock = FakeClock(lambda k: 10e-3)  # 10 ms per run: 25 windows would make a 250 ms repeat
    t = time_runs(clock.run, number=1, repeat=3, min_repeat_ms=25, windows=25, clock=clock)
    assert t.number == 1 and 1 <= t.windows <= 3 and clock.runs <= 1 + 1 + 3 * 3
    assert t.samples == pytest.approx((10e-3,) * 3)
    # an explicit number (min_repeat_ms 0): exactly `windows` windows of `number` runs
    clock = FakeClock(lambda k: 1e-3)
    t = time_runs(clock.run, number=4, repeat=2, windows=3, clock=clock)
    assert clock.runs == 4 * 3 * 2 and t.windows == 3 and t.number == 4
    assert pickle.loads(pickle.dumps(t)).windows == 3


def test_bad_arguments():
    with pytest.raises(ValueError, match="number >= 1"):
        time_runs(lambda: None, number=0)
    with pytest.raises(ValueError, match="repeat=0"):
        time_runs(lambda: None, repeat=0)
    with pytest.raises(ValueError, match="windows=0"):
        time_runs(lambda: None, windows=0)


@pytest.fixture
def counted():
    A = wb.placeholder((4,), "float32", name="A")
    B = wb.compute((4,), lambda i: A[i] * 2.0, name="B")
    calls = []
    kernel = Kernel(
        wb.create_func([A, B], name="double"), "python", lambda *arrays: calls.append(1), "def double(): ..."
    )
    return kernel, (np.ones(4, "float32"), np.zeros(4, "float32")), calls


def test_kernel_time_returns_a_timing_result(counted):
    kernel, args, calls = counted
    t = kernel.time(*args, number=3, repeat=2, warmup=1)  # an explicit number: plain repeats
    assert isinstance(t, TimingResult) and (t.number, t.repeat, t.windows) == (3, 2, 1)
    assert len(calls) == 1 + 3 * 2
    calls.clear()
    t = kernel.time(*args, number=3, repeat=2, warmup=0, windows=4)
    assert (t.number, t.windows) == (3, 4) and len(calls) == 3 * 4 * 2
    calls.clear()
    t = kernel.time(*args, repeat=3, min_repeat_ms=1)  # number chosen by duration
    assert t.repeat == 3 and len(calls) >= 1 + 3 * t.number
    assert t >= 0 and t.median == float(t)
    with pytest.raises(ValueError, match="number must be >= 1 or None, got 0"):
        kernel.time(*args, number=0)


@pytest.fixture
def sliced(monkeypatch):
    """``kernel.time`` / ``model.time`` on a :class:`SlicedClock`: half the CPU to other work."""
    clocks = []

    def on_clock(fn, args=(), **kw):
        return time_runs(lambda *a: (fn(*a), clocks[-1].run()), args, clock=clocks[-1], **kw)

    monkeypatch.setattr(kernel_module, "time_runs", on_clock)
    monkeypatch.setattr(executor_module, "time_runs", on_clock)
    monkeypatch.setattr(worker, "time_runs", on_clock)
    return clocks


@pytest.mark.parametrize("cost", [2e-6, 4e-5])
def test_kernel_time_measures_as_the_runner_by_default(counted, sliced, cost):
    """Under other work a plain median of repeats is about twice the kernel's time; by default
    ``kernel.time`` takes the runner's statistic (``MeasureConfig.windows``) and reads the
    kernel uncontended, as its tuning record does; ``windows=1`` is TVM's plain median."""
    kernel, args, _ = counted
    sliced.append(SlicedClock(cost))
    t = kernel.time(*args)
    assert MeasureConfig().windows == WINDOWS and 1 < t.windows <= WINDOWS  # (fewer where runs do not divide)
    assert t.samples == pytest.approx((cost,) * 5, rel=1e-6) and t.median == pytest.approx(cost)
    assert f"each the fastest of {t.windows} × {t.number} runs" in repr(t)
    sliced.append(SlicedClock(cost))
    plain = kernel.time(*args, windows=1)
    assert plain.windows == 1 and plain.median > 1.5 * cost
    # the measuring worker's timing with the runner's settings (what a record holds) agrees
    sliced.append(SlicedClock(cost))
    record = worker.time_entry(kernel.entry, args, **MeasureConfig().timing)
    assert np.median(record) == pytest.approx(t.median, rel=1e-6)


def test_model_time_measures_as_kernel_time(sliced):
    g = Graph()
    g.set_outputs([g.add_node("relu", [g.add_input("x", (4, 4))])])
    model = wb.build_model(g, target="llvm")
    x = np.ones((4, 4), "float32")
    sliced.append(SlicedClock(4e-5))
    t = model.time(x)
    assert 1 < t.windows <= WINDOWS and t.median == pytest.approx(4e-5, rel=1e-3)
    sliced.append(SlicedClock(4e-5))
    assert model.time(x, windows=1).median > 1.5 * 4e-5
    t = model.time(x, number=2, repeat=2)  # explicit: plain repeats of exactly 2 runs
    assert (t.number, t.repeat, t.windows) == (2, 2, 1)
    with pytest.raises(ValueError, match="number must be >= 1 or None, got 0"):
        model.time(x, number=0)
