"""Tuning tasks: what ``tune`` is asked to optimize, and the design space of each.

``tune`` accepts a ``PrimFunc``, a workload name (``"GMM"``: paper shape, checked against the
workload's numpy reference), a :class:`TuneTask`, or a list of those. A space is whatever
:func:`workbench.space.as_space` takes (None: the target's default rules), or schedules /
traces — possibly with pinned decisions — whose decisions the search explores
(:class:`TraceSpace`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence, Union, cast

from .. import workloads
from ..errors import ScheduleError
from ..target import Target
from ..ir.func import PrimFunc
from ..ir.structural import structural_equal
from ..schedule import Schedule, Trace
from ..schedule.rv import RV
from ..space import SpaceGenerator, as_space, resample_around_pins, without_postproc


@dataclass(eq=False)
class TuneTask:
    """One function to tune. ``reference(*inputs) -> expected output`` (numpy) checks every
    candidate (None: the unscheduled function is the reference); ``flops`` per run gives
    GFLOP/s; ``weight`` counts its latency that many times in the task scheduler's objective
    (how often it runs in a model). ``initial_schedules``: schedules of ``func`` (e.g. a hand or default
    schedule) measured in the task's first batch beside the search's proposals, so the tuner's
    pick is never slower than the best of them as measured; they join the database as
    records like any candidate."""

    func: PrimFunc
    name: str = ""
    reference: Optional[Callable[..., Any]] = None
    flops: Optional[int] = None
    weight: float = 1.0
    shape: dict = field(default_factory=dict)
    initial_schedules: Sequence[Schedule] = ()

    def __post_init__(self):
        if not isinstance(self.func, PrimFunc):
            raise TypeError(f"TuneTask needs a PrimFunc, got {type(self.func).__name__}")
        self.name = self.name or self.func.name
        for k, sch in enumerate(self.initial_schedules):
            if not isinstance(sch, Schedule):
                what = type(sch).__name__
                raise TypeError(f"TuneTask {self.name}: initial_schedules[{k}] is a {what}, not a Schedule")
            if not structural_equal(sch.trace.base_func, self.func):
                raise ValueError(
                    f"TuneTask {self.name}: initial_schedules[{k}] schedules another function than the task's"
                )

    @classmethod
    def workload(cls, name: str, **shape: Any) -> "TuneTask":
        """A registered workload at its paper shape, or with ``shape`` overrides."""
        wl = workloads.lookup(name)
        try:
            flops = workloads.flops(wl.name, **shape)
        except ValueError:
            flops = None
        return cls(
            workloads.get(wl.name, **shape),
            wl.name,
            workloads.reference(wl.name, **shape),
            flops,
            shape=dict(shape),
        )


def as_tasks(what: Any) -> list[TuneTask]:
    """Tasks from a function, a workload name, a task, or a list of those."""
    if isinstance(what, (PrimFunc, str, TuneTask)):
        what = [what]
    tasks = []
    for item in what:
        if isinstance(item, TuneTask):
            tasks.append(item)
        elif isinstance(item, PrimFunc):
            tasks.append(TuneTask(item))
        elif isinstance(item, str):
            tasks.append(TuneTask.workload(item))
        else:
            raise TypeError(
                f"tune: cannot tune a {type(item).__name__}; pass a PrimFunc, a workload name or a TuneTask"
            )
    if not tasks:
        raise ValueError("tune: nothing to tune (an empty list)")
    return tasks


def _trace_of(x: Any) -> Optional[Trace]:
    if isinstance(x, Schedule):
        return x.trace
    if isinstance(x, Trace):
        return x
    return None


class TraceSpace(SpaceGenerator):
    """A design space given as traces (pinned decisions included): each sample replays one of
    them with fresh unpinned decisions.

    Pins are kept or refused, never replaced. A trace whose pins do not replay on the function
    (the value is not valid there: a tiling that does not multiply to the loop's extent, a
    compute location the loop nest does not have) is dropped with a warning; when no trace
    is left, generating the space raises a ``ValueError`` naming each pin and why. Every
    sample keeps every pin of its trace; :meth:`admits` tells a candidate that does from one
    that does not (a database record of an earlier, unpinned search)."""

    def __init__(self, traces: Sequence[Trace], postprocs=None, mutator_probs=None):
        super().__init__(postprocs, mutator_probs)
        self.traces = [t.copy() for t in traces]
        if not self.traces:
            raise ValueError("TraceSpace needs at least one trace")
        self._checked: Optional[tuple[PrimFunc, list[Trace]]] = None
        self._signatures: Optional[list[tuple[tuple[str, ...], dict[int, Any]]]] = None

    def usable(self, func: PrimFunc) -> list[Trace]:
        """The traces (design-space part) whose pins hold on ``func``."""
        if self._checked is not None and self._checked[0] is func:
            return self._checked[1]
        usable, refused = [], []
        for n, trace in enumerate(self.traces):
            replayable, why = _keep_pins(func, without_postproc(trace))
            if replayable is not None:
                usable.append(replayable)
            else:
                refused.append(f"design space {n}: {why}")
        if not usable:
            raise ValueError(
                f"tune: the pinned decisions cannot be kept on {func.name}; a pin is never "
                f"replaced by another value, so there is nothing to search:\n  " + "\n  ".join(refused)
            )
        if refused:
            warnings.warn(
                f"tune: {len(refused)} of {len(self.traces)} design spaces dropped, their pins do "
                f"not fit {func.name}:\n  " + "\n  ".join(refused),
                stacklevel=2,
            )
        self._checked = (func, usable)
        self._signatures = [
            (
                tuple(i.kind.name for i in t.insts),
                {k: _as_list(i.decision) for k, i in enumerate(t.insts) if i.pinned},
            )
            for t in usable
        ]
        return usable

    def admits(self, trace: Trace) -> bool:
        """Whether ``trace`` (a candidate's, postprocessing included or not) is a program of
        one of these traces with every pin of it kept (and flagged pinned, so that mutating
        it leaves them be)."""
        if self._signatures is None or all(not pins for _, pins in self._signatures):
            return True
        insts = trace.insts
        cut = next((k for k, i in enumerate(insts) if i.kind.name == "enter_postproc"), len(insts))
        kinds = tuple(i.kind.name for i in insts[:cut])
        return any(
            kinds == sig and all(_kept(insts[k], d) for k, d in pins.items())
            for sig, pins in self._signatures
        )

    def _generate(self, func: PrimFunc, seed: Optional[int]) -> list[Schedule]:
        out = []
        for k, trace in enumerate(self.usable(func)):
            k_seed = None if seed is None else seed + k
            if trace.pinned:  # free decisions drawn anew, the pins exactly as given
                out.append(resample_around_pins(func, trace, seed=k_seed))
            else:
                sch = Schedule(func, seed=k_seed)
                trace.apply_to_schedule(sch, decision_provider=Trace.resample)
                out.append(sch)
        return out


def _as_list(decision: Any) -> Any:
    return list(decision) if isinstance(decision, tuple) else decision


def _kept(inst: Any, pin: Any) -> bool:
    return inst.pinned and _as_list(inst.decision) == pin


def _keep_pins(func: PrimFunc, trace: Trace) -> tuple[Optional[Trace], str]:
    """``(trace, "")`` when ``trace`` can be searched on ``func`` with its pins kept, else
    ``(None, why)``.

    The pins hold if the trace replays with its recorded decisions, or, failing that (free
    ones recorded on another function), with free decisions drawn around the pins: then that
    replay's trace is returned, so that the recorded decisions of what the search samples
    always replay (what :func:`~workbench.space.resample_around_pins` falls back on)."""
    try:
        trace.apply_to_schedule(Schedule(func))
        return trace, ""
    except (ScheduleError, ValueError) as exc:
        first = exc
    try:
        return resample_around_pins(func, trace, seed=0).trace, ""
    except (ScheduleError, ValueError):
        pass
    step = getattr(first, "step", None)
    if step is None:
        return None, f"the trace does not replay on {func.name}: {first}"
    inst = trace.insts[step]
    what = f"step {step}, {_describe_step(func, trace, step)}"
    if inst.pinned:
        return None, f"{what} pinned to {inst.decision!r}: {first}"
    return None, f"{what} fails around the pins: {first}"


def _describe_step(func: PrimFunc, trace: Trace, step: int) -> str:
    """``sample_compute_location(block='pad_temp')``: the instruction with its random
    variables named by the blocks and loops they stand for."""
    inst = trace.insts[step]
    names: dict[Any, str] = {}
    try:
        sch = Schedule(func)
        rvs = Trace(trace.insts[:step]).apply_to_schedule(sch)
        for rv in inst.inputs:
            node = sch.get(rvs[rv])
            var = getattr(node, "loop_var", None)
            names[rv] = repr(getattr(node, "name", None) or getattr(var, "name", None) or node)
    except (ScheduleError, ValueError, KeyError):
        pass  # then the bare instruction name
    args = ", ".join(
        f"{key}={names.get(value, '?')}" if isinstance(value, RV) else f"{key}={value!r}"
        for key, value in inst.args.items()
    )
    return f"{inst.kind.name}({args})"


def make_space(space: Any, target: Union[str, Target]) -> Any:
    """An initialized space generator for ``target`` from what a user passed."""
    items = space if isinstance(space, (list, tuple)) else [space]
    traces = [_trace_of(x) for x in items]
    if space is not None and items and all(t is not None for t in traces):
        gen: SpaceGenerator = TraceSpace(cast("list[Trace]", traces))  # all not None
    else:
        gen = as_space(space)
    gen.initialize_with_target(target)
    return gen
