"""Tuning tasks: what ``tune`` is asked to optimize, and the design space of each.

``tune`` accepts a ``PrimFunc``, a workload name (``"GMM"``: paper shape, checked against the
workload's numpy reference), a :class:`TuneTask`, or a list of those. A space is whatever
:func:`workbench.space.as_space` takes (None: the target's default rules), or schedules /
traces — possibly with pinned decisions — whose decisions the search explores
(:class:`TraceSpace`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence, Union, cast

from .. import workloads
from ..target import Target
from ..ir.func import PrimFunc
from ..schedule import Schedule, Trace
from ..space import SpaceGenerator, as_space, without_postproc


@dataclass(eq=False)
class TuneTask:
    """One function to tune. ``reference(*inputs) -> expected output`` (numpy) checks every
    candidate (None: the unscheduled function is the reference); ``flops`` per run gives
    GFLOP/s; ``weight`` counts its latency that many times in the task scheduler's objective
    (how often it runs in a model)."""

    func: PrimFunc
    name: str = ""
    reference: Optional[Callable[..., Any]] = None
    flops: Optional[int] = None
    weight: float = 1.0
    shape: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.func, PrimFunc):
            raise TypeError(f"TuneTask needs a PrimFunc, got {type(self.func).__name__}")
        self.name = self.name or self.func.name

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
    them with fresh unpinned decisions."""

    def __init__(self, traces: Sequence[Trace], postprocs=None, mutator_probs=None):
        super().__init__(postprocs, mutator_probs)
        self.traces = [t.copy() for t in traces]
        if not self.traces:
            raise ValueError("TraceSpace needs at least one trace")

    def _generate(self, func: PrimFunc, seed: Optional[int]) -> list[Schedule]:
        out = []
        for k, trace in enumerate(self.traces):
            sch = Schedule(func, seed=None if seed is None else seed + k)
            without_postproc(trace).apply_to_schedule(sch, decision_provider=Trace.resample)
            out.append(sch)
        return out


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
