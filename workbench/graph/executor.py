"""Tune a graph's tasks and run the graph: ``tune_model``, ``build_model``, ``Model``.

``build_model`` builds each distinct task once: from the database's best record when it has
one, else from a default schedule (the outermost loop of every top-level loop nest made
parallel where the schedule allows it, the unscheduled function otherwise). The executor
preallocates every intermediate array (aligned numpy), binds each kernel's arguments once, and
calls the kernels' low-overhead entries in topological order; reshapes are numpy views.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

import numpy as np

from ..codegen import aligned, build, empty
from ..codegen.timing import MIN_REPEAT_MS, TimingResult, time_runs
from ..errors import ScheduleError
from ..ir.func import PrimFunc
from ..ir.functor import pre_order
from ..ir.stmt import Block, ForKind
from ..schedule import Schedule
from ..tune.database.base import Database, Record
from .graph import Graph


def tune_model(
    graph: Graph,
    target: Any = "llvm",
    trials: int = 64,
    database: Union[str, Database] = "model.sqlite",
    *,
    num_trials_per_iter: Optional[int] = None,
    baseline: bool = False,
    **kwargs: Any,
) -> Database:
    """Tune every task of ``graph`` with ``wb.tune``'s task scheduler (gradient-based: the
    next batch goes to the task whose weighted latency is expected to fall fastest; weight =
    how many groups run the task), ``trials`` measured candidates over all tasks, all records
    in one database. Resumable: records already in ``database`` count toward ``trials``.

    ``num_trials_per_iter`` None: at most 16, fewer when the budget would otherwise not reach
    every task once. Other keywords go to :func:`workbench.tune` (``seed``, ``strategy``,
    ``runner``, ``callbacks``, ...); ``baseline`` (timing every unscheduled task) is off.
    """
    from ..tune.task import TuneTask
    from ..tune.tuning import tune

    tasks = graph.task_list()
    if num_trials_per_iter is None:
        num_trials_per_iter = max(1, min(16, trials // max(len(tasks), 1)))
    tune_tasks = [TuneTask(t.func, name=f"{t.name}#{k}", weight=float(t.weight)) for k, t in enumerate(tasks)]
    return tune(
        tune_tasks,
        target=target,
        trials=trials,
        database=database,
        num_trials_per_iter=num_trials_per_iter,
        baseline=baseline,
        **kwargs,
    )


def default_schedule(func: PrimFunc) -> Schedule:
    """The schedule used where a task has no record: each top-level loop nest's outermost loop
    parallel (skipped where ``parallel`` refuses it: a reduction loop, a loop of one
    iteration)."""
    sch = Schedule(func)
    names = [n.name for n in pre_order(func.body) if isinstance(n, Block) and n.name != "root"]
    for name in names:
        try:
            loops = sch.get_loops(sch.get_block(name))
        except ScheduleError:
            continue
        if not loops:
            continue
        node = sch.get(loops[0])
        if node.kind != ForKind.SERIAL:
            continue  # already parallel (shared by an earlier block of the same nest)
        try:
            sch.parallel(loops[0])
        except ScheduleError:
            pass
    return sch


@dataclass
class Step:
    group: int
    task: int
    entry: Any
    args: list


class Model:
    """A compiled graph: ``model(*inputs) -> tuple of outputs`` (numpy in, numpy out)."""

    def __init__(self, graph: Graph, target: Any, kernels: list, records: list[Optional[Record]]):
        self.graph, self.target = graph, target
        self.kernels, self.records = kernels, records
        g = graph
        arrays: dict[str, np.ndarray] = {}
        for v in g.inputs:
            shape, dtype = g.values[v]
            arrays[v] = empty(shape, dtype)
        for c, a in g.constants.items():
            arrays[c] = aligned(np.ascontiguousarray(a, dtype=g.values[c][1]))
        groups = g.fuse()
        for grp in groups:
            shape, dtype = g.values[grp.output]
            arrays[grp.output] = empty(shape, dtype)
        for n in g.nodes:  # views, in order (a view of a view, of a constant, of an input)
            if n.pattern == "view":
                arrays[n.name] = arrays[n.inputs[0]].reshape(n.shape)
        self.arrays = arrays
        self.steps: list[Step] = []
        for k, grp in enumerate(groups):
            args = [arrays[v] for v in grp.inputs] + [arrays[grp.output]]
            kernel = kernels[grp.task]
            kernel.check_args(tuple(args))  # once, here: the run calls the bare entries
            self.steps.append(Step(k, grp.task, kernel.entry, args))
        self._inputs = [arrays[v] for v in g.inputs]
        self._outputs = [arrays[v] for v in g.outputs]

    # running ---------------------------------------------------------------------------------
    def _set_inputs(self, inputs: Sequence[Any]) -> None:
        if len(inputs) != len(self._inputs):
            raise TypeError(
                f"the model takes {len(self._inputs)} inputs ({', '.join(self.graph.inputs)}), "
                f"got {len(inputs)}"
            )
        for name, dst, x in zip(self.graph.inputs, self._inputs, inputs):
            x = np.asarray(x)
            if x.shape != dst.shape:
                raise ValueError(f"input {name!r} has shape {x.shape}, expected {dst.shape}")
            np.copyto(dst, x, casting="same_kind")

    def run(self) -> None:
        """Run every kernel on the inputs already in place."""
        for s in self.steps:
            s.entry(*s.args)

    def __call__(self, *inputs: Any) -> tuple[np.ndarray, ...]:
        self._set_inputs(inputs)
        self.run()
        return tuple(o.copy() for o in self._outputs)

    def time(
        self,
        *inputs: Any,
        number: Optional[int] = None,
        repeat: int = 5,
        min_repeat_ms: float = MIN_REPEAT_MS,
    ) -> TimingResult:
        """Seconds per run of the whole model (the kernels, not the input copy), as
        ``Kernel.time``: the median of ``repeat`` repeats."""
        self._set_inputs(inputs)
        return time_runs(
            self.run,
            (),
            number=number or 1,
            repeat=repeat,
            warmup=1,
            min_repeat_ms=min_repeat_ms if number is None else 0.0,
        )

    def time_groups(self, *inputs: Any, repeat: int = 3) -> list[float]:
        """Seconds per run of each group's kernel (in group order): each one's share."""
        self._set_inputs(inputs)
        self.run()
        return [float(time_runs(s.entry, s.args, repeat=repeat, min_repeat_ms=5.0)) for s in self.steps]

    # reporting ---------------------------------------------------------------------------------
    @property
    def tuned(self) -> list[bool]:
        """Per task: whether its kernel came from a database record."""
        return [r is not None for r in self.records]

    def report(self) -> str:
        """Which tasks were built from a record (database hits) and which from the default."""
        lines = [f"{sum(self.tuned)} of {len(self.records)} tasks from the database:"]
        for task, rec in zip(self.graph.task_list(), self.records):
            how = f"record {rec.latency * 1e3:.4f} ms" if rec is not None else "default schedule"
            lines.append(f"  {task.name} x{task.weight}: {how}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<Model {len(self.steps)} kernels ({len(self.kernels)} distinct, {sum(self.tuned)} tuned), "
            f"target={str(self.target)!r}>"
        )


def build_model(graph: Graph, target: Any = "llvm", database: Union[None, str, Database] = None) -> Model:
    """Compile ``graph``: each distinct task from ``database``'s best record for ``target``
    when it has one, else from :func:`default_schedule`."""
    db = Database.open(database) if isinstance(database, str) else database
    kernels, records = [], []
    for task in graph.task_list():
        rec = db.best(task.func, target) if db is not None else None
        sch = None
        if rec is not None:
            try:
                sch = rec.schedule(task.func)
            except Exception:  # a record that no longer replays: the default schedule
                rec = None
        if sch is None:
            sch = default_schedule(task.func)
        kernels.append(build(sch, target=target))
        records.append(rec)
    return Model(graph, target, kernels, records)
