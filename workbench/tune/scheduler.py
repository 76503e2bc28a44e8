"""Task schedulers: which task gets the next measured batch when several are tuned at once.

* :class:`RoundRobin` cycles through the tasks.
* :class:`GradientBased` is Ansor's (section 6 of its paper): after a warm-up round for every
  task, it picks the task whose weighted best latency is expected to fall fastest per trial —
  a mix of the recent improvement rate (backward window) and an optimistic forward estimate
  (``best / trials so far``) — with an epsilon-greedy share of random picks. The objective is
  the sum over tasks of ``weight * best latency``.

A task whose search has run dry (no new candidate) is finished; so is one out of budget.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional, Sequence


@dataclass
class TaskState:
    """What the scheduler knows of one task."""

    weight: float = 1.0
    trials: int = 0  # measured (including resumed records)
    best: float = float("inf")
    history: list[tuple[int, float]] = field(default_factory=list)  # (trials, best) per batch
    done: bool = False

    def record(self, trials: int, latencies: Sequence[float]) -> None:
        self.trials += trials
        self.best = min([self.best, *latencies])
        self.history.append((self.trials, self.best))


class TaskScheduler:
    """Base class: ``next(states) -> index`` of the task to tune next (None: all done)."""

    def next(self, states: Sequence[TaskState]) -> Optional[int]:
        raise NotImplementedError

    @staticmethod
    def create(spec="gradient", seed: int = 0) -> "TaskScheduler":
        if isinstance(spec, TaskScheduler):
            return spec
        if spec == "round_robin":
            return RoundRobin()
        if spec == "gradient":
            return GradientBased(seed=seed)
        raise ValueError(f"unknown task scheduler {spec!r}: use 'gradient' or 'round_robin'")


class RoundRobin(TaskScheduler):
    def __init__(self):
        self.position = -1

    def next(self, states):
        for step in range(1, len(states) + 1):
            k = (self.position + step) % len(states)
            if not states[k].done:
                self.position = k
                return k
        return None


class GradientBased(TaskScheduler):
    """Ansor's gradient-based allocation (``alpha`` mixes backward and forward gradients,
    ``window`` batches back for the backward one, ``eps`` random picks)."""

    def __init__(self, alpha: float = 0.2, window: int = 3, eps: float = 0.05, seed: int = 0):
        self.alpha, self.window, self.eps = alpha, window, eps
        self.rng = random.Random(seed)

    def gradient(self, s: TaskState) -> float:
        """d(weight * best latency) / d trials, estimated (negative = improving)."""
        if not s.history or s.best == float("inf"):
            return -float("inf")  # no working candidate yet: anything found is a gain
        past = s.history[-1 - self.window] if len(s.history) > self.window else None
        backward = 0.0
        if past is not None and s.trials > past[0] and past[1] != float("inf"):
            backward = (s.best - past[1]) / (s.trials - past[0])
        forward = -s.best / max(s.trials, 1)
        return s.weight * (self.alpha * backward + (1 - self.alpha) * forward)

    def next(self, states):
        live = [k for k, s in enumerate(states) if not s.done]
        if not live:
            return None
        fresh = [k for k in live if not states[k].history]
        if fresh:  # warm-up: every task gets one batch first
            return fresh[0]
        if self.rng.random() < self.eps:
            return self.rng.choice(live)
        return min(live, key=lambda k: self.gradient(states[k]))
