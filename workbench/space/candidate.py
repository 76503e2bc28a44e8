"""Turning a design-space trace into a finished candidate: replay it (with its decisions, or
new ones), then run the postprocessors — what random search, the evolutionary search's
mutants and the tests all do."""

from __future__ import annotations

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
    space) instead of keeping the recorded ones. Any postprocessing part of ``trace`` is
    dropped first: ``postprocs`` redo it.
    """
    sch = Schedule(func, seed=seed)
    try:
        without_postproc(trace).apply_to_schedule(sch, decision_provider=Trace.resample if resample else None)
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
