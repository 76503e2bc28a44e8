"""``MeasureConfig``: how candidates are built and timed, said once for every runner.

config = MeasureConfig(run_timeout=60, repeat=5)
wb.tune(func, trials=64, measure=config)                       # the LocalRunner tune starts
LocalRunner(workers=2, measure=config)
wb.tune.DaskRunner("tcp://host:8786", measure=config)          # applied on each Dask worker
runner.measure(inputs, replace(runner.config, number=1))       # settings for one call
"""

from __future__ import annotations

from dataclasses import dataclass

from ..codegen.timing import MIN_REPEAT_MS, WINDOWS


@dataclass(frozen=True)
class MeasureConfig:
    """Time limits, timing and checks of a measurement (see :mod:`workbench.tune.runner`).

    ``build_timeout`` / ``run_timeout``: seconds a candidate may take to compile / to run
    (its check and every repeat); past them it is recorded as ``timeout``. Timing as TVM's:
    ``number`` runs per repeat to start with, grown until a repeat lasts ``min_repeat_ms``;
    ``repeat`` values. ``windows``: each repeat is cut into that many windows (of about
    ``min_repeat_ms / windows``, a millisecond by default) and counts its fastest one, so that
    a kernel's figure is what it does between the slices of other work on the CPUs, not how
    much of them it met (see :func:`workbench.codegen.timing.time_runs`; 1: TVM's plain
    repeats). ``check``: compare the outputs with the expected ones before timing.
    ``max_retries``: how often a candidate whose kernel was lost with a crashing neighbour is
    built again. ``max_spread``: repeats further apart than this (max / min) are measured
    once more, and flagged ``noisy`` if they still are.

    Surviving a busy machine (see :mod:`workbench.tune.tuning`): ``remeasure_busy``: a
    candidate measured while other work competed for the CPUs (its record flagged ``busy``)
    is measured again once the load has dropped. ``final_top_k`` / ``final_rounds``: at the
    end of a tune the ``final_top_k`` fastest candidates (and as many of the fastest measured
    while busy) are timed again in alternation, ``final_rounds`` rounds of one repeat each;
    the pick (``db.best``) is the one whose fastest round is fastest. 0 turns it off.
    """

    build_timeout: float = 30.0
    run_timeout: float = 20.0
    number: int = 3
    repeat: int = 3
    min_repeat_ms: float = MIN_REPEAT_MS
    windows: int = WINDOWS  # as kernel.time's: a record and a user's timing are the same statistic
    check: bool = True
    max_retries: int = 2
    max_spread: float = 2.0
    remeasure_busy: bool = True
    final_top_k: int = 4
    final_rounds: int = 5

    @property
    def timing(self) -> dict:
        """``number``, ``repeat``, ``min_repeat_ms`` and ``windows``, as the measurement worker
        takes them."""
        return {
            "number": self.number,
            "repeat": self.repeat,
            "min_repeat_ms": self.min_repeat_ms,
            "windows": self.windows,
        }
