"""Turning a design-space trace into a finished candidate: replay it (with its decisions, or
new ones), then run the postprocessors — what random search, the evolutionary search's
mutants and the tests all do."""

from __future__ import annotations

import random
from typing import Iterable, Optional, Union

from ..errors import ScheduleError
from ..ir.func import PrimFunc
from ..schedule import Schedule, Trace
from .postprocs import Postproc, run_postprocs, without_postproc


def replay(
    func: PrimFunc,
    trace: Trace,
    postprocs: Iterable[Postproc] = (),
    seed: Optional[int] = None,
    resample: bool = False,
) -> tuple[Optional[Schedule], Optional[str]]:
    """``(schedule, None)`` for a finished candidate, or ``(None, reason)`` when replaying the
    trace failed or a postprocessor rejected it.

    ``resample``: draw every unpinned decision anew from ``seed`` (a random point of the
    space) instead of keeping the recorded ones (with pins: :func:`resample_around_pins`).
    Any postprocessing part of ``trace`` is dropped first: ``postprocs`` redo it.
    """
    try:
        if resample and trace.pinned:
            sch = resample_around_pins(func, trace, seed=seed)
        else:
            sch = Schedule(func, seed=seed)
            without_postproc(trace).apply_to_schedule(
                sch, decision_provider=Trace.resample if resample else None
            )
    except ScheduleError as exc:
        return None, f"replay: {exc}"
    reason = run_postprocs(sch, postprocs)
    return (None, reason) if reason is not None else (sch, None)


def sample(
    func: PrimFunc, space: Union[Schedule, Trace], postprocs: Iterable[Postproc], seed: Optional[int] = None
) -> tuple[Optional[Schedule], Optional[str]]:
    """A random candidate of one design space (a schedule or its trace): :func:`replay` with
    new decisions."""
    trace = space.trace if isinstance(space, Schedule) else space
    return replay(func, trace, postprocs, seed=seed, resample=True)


def resample_around_pins(
    func: PrimFunc, trace: Trace, seed: Optional[int] = None, fresh_tries: int = 4
) -> Schedule:
    """A schedule of ``func`` with ``trace`` replayed, its pinned decisions as pinned and
    the free ones drawn anew (any postprocessing part of ``trace`` dropped).

    A pinned decision is only valid for some values of the free ones (a pinned compute
    location needs the loop it names to survive the tilings drawn before it; a pinned tiling
    the extent of its loop), and the replay refuses a pin that no longer fits rather than
    moving it. So: ``fresh_tries`` independent draws first; then, on each failure, the last
    free decision before the failing step goes back to its recorded value and the replay is
    retried. When the recorded decisions replay (the pins were valid in the space they were
    set in) this ends in a valid schedule; otherwise the last ``ScheduleError`` is raised.
    """
    trace = without_postproc(trace)
    rng = random.Random(seed)
    last: Optional[ScheduleError] = None
    for _ in range(fresh_tries):
        sch = Schedule(func, seed=rng.randrange(2**31))
        try:
            trace.apply_to_schedule(sch, decision_provider=Trace.resample)
            return sch
        except ScheduleError as exc:
            last = exc
    position = {id(inst): k for k, inst in enumerate(trace.insts)}
    keep: set[int] = set()
    while True:
        if last is not None:  # the culprit is most likely the last free draw before the failure
            failed = getattr(last, "step", len(trace.insts) - 1)
            culprit = next(
                (
                    k
                    for k in range(min(failed, len(trace.insts) - 1), -1, -1)
                    if trace.insts[k].kind.is_sampling and not trace.insts[k].pinned and k not in keep
                ),
                None,
            )
            if culprit is None:
                raise last
            keep.add(culprit)
        sch = Schedule(func, seed=rng.randrange(2**31))
        try:
            trace.apply_to_schedule(
                sch, decision_provider=lambda inst, d: d if position[id(inst)] in keep else None
            )
            return sch
        except ScheduleError as exc:
            last = exc
