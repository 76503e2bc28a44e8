"""IPython magics: ``%%schedule FUNC`` (a cell that schedules ``sch``), ``%tune NAME`` and
``%%tvmscript [NAME]`` (a cell of TVMScript read into a function).

``%%schedule`` and ``%tune`` take a *function spec*: a variable of the notebook (a ``PrimFunc``,
or a ``Schedule`` whose current function is used) or a workload name, with shape keywords after
it::

    %%schedule GMM n=64 m=64 k=64 --seed 1
    %tune GMM n=64 m=64 k=64 --trials 16 --target llvm --database gmm.sqlite
"""

from __future__ import annotations

import shlex
from typing import Any, Callable, Optional

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

import workbench as wb
from workbench.tune import TuneTask

from .widgets.convergence import tune_with_plot
from .widgets.pin_panel import PinPanel
from .widgets.stepper import LoopNestStepper


class MagicArgumentError(ValueError):
    """A magic's line could not be understood (shown without a traceback)."""


def parse_line(
    line: str, options: dict[str, Callable[[str], Any]], switches: tuple[str, ...] = ()
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Split a magic's line into ``(name, options, shape)``.

    ``--opt VALUE`` for each key of ``options`` (converted by its function), ``--switch`` for
    each of ``switches`` (True when present), ``key=value`` shape keywords (ints where they
    parse as ints); the one remaining word is the name.
    """
    words = shlex.split(line)
    name: Optional[str] = None
    opts: dict[str, Any] = dict.fromkeys(switches, False)
    shape: dict[str, Any] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            key = word[2:].replace("-", "_")
            if key in switches:
                opts[key] = True
            elif key in options:
                if i + 1 >= len(words):
                    raise MagicArgumentError(f"{word} needs a value")
                try:
                    opts[key] = options[key](words[i + 1])
                except ValueError as exc:
                    raise MagicArgumentError(f"{word} {words[i + 1]}: {exc}") from None
                i += 1
            else:
                known = ", ".join(f"--{k}" for k in (*options, *switches))
                raise MagicArgumentError(f"unknown option {word}; known: {known}")
        elif "=" in word:
            key, value = word.split("=", 1)
            shape[key] = int(value) if value.lstrip("-").isdigit() else value
        elif name is None:
            name = word
        else:
            raise MagicArgumentError(
                f"unexpected {word!r}: give one function name, then key=value shape parameters and --options"
            )
        i += 1
    if name is None:
        raise MagicArgumentError("name a function: a workload such as GMM, or a variable")
    return name, opts, shape


def resolve_func(
    name: str, namespace: dict[str, Any], shape: dict[str, Any], small: bool = False
) -> "wb.PrimFunc":
    """A notebook variable called ``name`` (PrimFunc or Schedule), else the workload ``name``."""
    if name in namespace:
        value = namespace[name]
        if shape:
            raise MagicArgumentError(f"{name} is a variable; shape keywords apply to workloads")
        if isinstance(value, wb.PrimFunc):
            return value
        if isinstance(value, wb.Schedule):
            return value.func
        raise MagicArgumentError(
            f"{name} is a {type(value).__name__}; expected a PrimFunc, a Schedule or a workload name"
        )
    return _from_workload(wb.workloads.get, name, shape, small)


def workload_task(name: str, shape: dict[str, Any], small: bool = False) -> Any:
    """A ``TuneTask`` of the workload ``name`` (its numpy reference checks every candidate)."""
    return _from_workload(TuneTask.workload, name, shape, small)


def _from_workload(make: Any, name: str, shape: dict[str, Any], small: bool) -> Any:
    """``make(workload name, **shape)`` for the workload ``name``, with its small shape under
    the given keywords if ``small``; unknown names and shape keywords as magic errors."""
    try:
        workload = wb.workloads.lookup(name)
    except KeyError as exc:
        raise MagicArgumentError(
            f"{name!r} is neither a variable of this notebook nor a "
            f"workload ({', '.join(wb.workloads.names())})"
        ) from exc
    if small:
        shape = {**wb.workloads.small(workload.name), **shape}
    try:
        return make(workload.name, **shape)
    except TypeError as exc:
        raise MagicArgumentError(str(exc)) from None


def _failing_line(err: BaseException, filename: str, source: str) -> Optional[str]:
    """The line of the cell that raised ``err`` (the innermost frame in the cell)."""
    lineno = None
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            lineno = tb.tb_lineno
        tb = tb.tb_next
    lines = source.splitlines()
    if lineno is None or not 0 < lineno <= len(lines):
        return None
    return lines[lineno - 1].strip()


@magics_class
class WorkbenchMagics(Magics):
    """The magics ``%load_ext kernel_ext`` registers."""

    @cell_magic
    def schedule(self, line: str, cell: str) -> Optional[LoopNestStepper]:
        """``%%schedule FUNC [key=value ...] [--seed N] [--small]``: run the cell with ``sch``
        bound to a fresh ``Schedule`` of FUNC, then show the loop-nest stepper.

        FUNC is a variable holding a PrimFunc (or a Schedule: its current function) or a
        workload name (paper shapes; ``--small`` for the small ones; ``n=64`` to override).
        A ``ScheduleError`` in the cell becomes the stepper's last step; the earlier steps are
        kept and ``sch`` stays usable.
        """
        try:
            name, opts, shape = parse_line(line, {"seed": int}, switches=("small",))
            func = resolve_func(name, self.shell.user_ns, shape, small=opts["small"])
        except MagicArgumentError as exc:
            print(f"%%schedule: {exc}")
            return None
        sch = wb.Schedule(func, seed=opts.get("seed"))
        self.shell.user_ns["sch"] = sch
        source = self.shell.transform_cell(cell)
        filename = self.shell.compile.cache(source)
        try:
            exec(compile(source, filename, "exec"), self.shell.user_ns)
        except wb.ScheduleError as err:
            return LoopNestStepper(
                sch, error=err, failed_source=_failing_line(err, filename, source), names=self.shell.user_ns
            )
        return LoopNestStepper(sch, names=self.shell.user_ns)

    @cell_magic
    def tvmscript(self, line: str, cell: str) -> Optional[wb.PrimFunc]:
        """``%%tvmscript [NAME]``: read the cell as TVMScript (never run: ``wb.parse``), bind the
        function to NAME (default: the name after ``def``) and show it.

        A script that cannot be read prints the line, column and cause (no traceback).
        """
        names = line.split()
        if len(names) > 1 or (names and not names[0].isidentifier()):
            print(f"%%tvmscript: expected at most one variable name, got {line.strip()!r}")
            return None
        try:
            func = wb.parse(cell)
        except wb.TVMScriptError as exc:
            print(f"%%tvmscript: {exc}")
            return None
        self.shell.user_ns[names[0] if names else func.name] = func
        return func

    @line_magic
    def tune(self, line: str) -> Any:
        """``%tune NAME [key=value ...] --trials N [--target T] [--database PATH] [--seed S]
        [--per-batch N] [--small]``: tune with the live convergence plot; returns the database.

        NAME: a workload (checked against its numpy reference), or a variable holding a
        PrimFunc (default design space), a Schedule (its trace is the space: a hand-written
        probabilistic schedule) or a PinPanel (its constrained space). Without ``--database``
        the records are kept in memory.
        """
        try:
            name, opts, shape = parse_line(
                line,
                {"trials": int, "target": str, "database": str, "seed": int, "per_batch": int},
                switches=("small",),
            )
            value = self.shell.user_ns.get(name)
            space = None
            if isinstance(value, PinPanel):
                func, space = value.func, value.space()
            elif isinstance(value, wb.Schedule):
                func, space = value.history[0][1], value.trace
            elif name in self.shell.user_ns:
                func = resolve_func(name, self.shell.user_ns, shape)
            else:
                func = workload_task(name, shape, small=opts["small"])
        except MagicArgumentError as exc:
            print(f"%tune: {exc}")
            return None
        extra = {"num_trials_per_iter": opts["per_batch"]} if "per_batch" in opts else {}
        try:
            return tune_with_plot(
                func,
                target=opts.get("target", "llvm"),
                trials=opts.get("trials", 16),
                database=opts.get("database"),
                seed=opts.get("seed", 0),
                space=space,
                **extra,
            )
        except wb.tune.TuneInterrupted as stop:  # "interrupt kernel": an answer, no traceback
            stop.resume = f"the same line: %tune {line.strip()}"
            print(stop)
            return stop.database
