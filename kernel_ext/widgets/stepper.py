"""The loop-nest stepper: a schedule's function after each step of its trace.

``Schedule.history`` keeps the function after every instruction (the IR is immutable, so this
costs nothing); the stepper walks it. At step ``k`` it shows the trace with instruction ``k``
marked (later ones faded), a sentence saying what the instruction did, and the loop nest after
it with the lines that step changed highlighted. A schedule whose next step failed gets one
more step: the error, shown where it happened, with the loop nest as it was before.

Random variables are shown with the names the user gave them (``io, ii = sch.split(...)``
shows ``io, ii``, not the trace's generic ``l5, l6``): the variables of the caller's namespace
(or of ``names``) that hold the schedule's random variables. A run of at least
``GROUP_MIN`` consecutive annotation steps of one kind (a tuned trace's postprocessing: dozens
of ``unroll``) is one step of the stepper.
"""

from __future__ import annotations

import html
import inspect
from typing import Any, Mapping, Optional

import ipywidgets as widgets

import workbench as wb
from workbench.schedule.rv import RV, ExprRV

from ..highlight import changed_lines, code_html, error_html, note_html, removed_count
from .base import WorkbenchWidget


#: at most this many lines of the trace are shown at once
TRACE_WINDOW = 16
#: instruction kinds whose runs are grouped into one step, and the shortest run grouped
GROUPED_KINDS = frozenset(
    {"unroll", "annotate", "unannotate", "parallel", "vectorize", "bind", "storage_align"}
)
GROUP_MIN = 4


def user_names(trace: "wb.Trace", namespace: Mapping[str, Any]) -> dict[RV, str]:
    """The trace's random variables named as in ``namespace`` where a variable there holds
    one (``io``; an element of a list or tuple: ``loops[2]``), else the trace's own names
    (``l5``). A name shared by two variables goes to the first; ``sch`` and private names are
    skipped."""
    generic = trace.rv_names()
    found: dict[RV, str] = {}
    for name, value in namespace.items():
        if name.startswith("_") or name == "sch":
            continue
        if isinstance(value, RV):
            if value in generic:
                found.setdefault(value, name)
        elif isinstance(value, (list, tuple)) and 0 < len(value) <= 64:
            for k, item in enumerate(value):
                if isinstance(item, RV) and item in generic:
                    found.setdefault(item, f"{name}[{k}]")
    taken = set(found.values())
    return {rv: found.get(rv, name if name not in taken else f"{name}_") for rv, name in generic.items()}


def group_steps(trace: "wb.Trace") -> list[tuple[int, int]]:
    """The stepper's steps as ``(first, last)`` positions of ``Schedule.history`` (0: the
    function as written, k: after instruction k - 1): one per instruction, except that a run
    of ``GROUP_MIN`` or more consecutive instructions of one kind in ``GROUPED_KINDS`` is one."""
    steps = [(0, 0)]
    insts = list(trace)
    k = 0
    while k < len(insts):
        end = k
        if insts[k].kind.name in GROUPED_KINDS:
            while end + 1 < len(insts) and insts[end + 1].kind.name == insts[k].kind.name:
                end += 1
        if end - k + 1 < GROUP_MIN:
            end = k
        steps.append((k + 1, end + 1))
        k = end + 1
    return steps


class LoopNestStepper(WorkbenchWidget):
    """Step through ``sch.history`` with a slider, buttons or ``stepper.step = k``.

    Parameters
    ----------
    sch : the schedule to show (its history is copied: later changes to ``sch`` do not show).
    error : a ``ScheduleError`` raised by the step after the last one, shown as a final step.
    failed_source : the source line that raised ``error`` (shown with it).
    names : where to look up the user's variable names (``%%schedule`` passes the notebook's
        namespace); default: the caller's variables.
    """

    def __init__(
        self,
        sch: "wb.Schedule",
        error: Optional[BaseException] = None,
        failed_source: Optional[str] = None,
        names: Optional[Mapping[str, Any]] = None,
    ):
        self.history = list(sch.history)
        if names is None:
            caller = inspect.currentframe().f_back  # type: ignore[union-attr]
            names = {**caller.f_globals, **caller.f_locals} if caller is not None else {}
        self.names = user_names(sch.trace, names)
        self.steps = group_steps(sch.trace)
        self.trace_lines = [self._step_line(first, last) for first, last in self.steps[1:]]
        self.symbols = dict(sch.symbols)
        self.error = error
        self.failed_source = failed_source
        self._texts = [str(func) for _inst, func in self.history]
        last = self.n_steps - 1

        self.slider = widgets.IntSlider(
            value=last,
            min=0,
            max=last,
            description="step",
            continuous_update=True,
            layout=widgets.Layout(width="420px"),
        )
        self.prev_button = widgets.Button(
            description="◀ prev", layout=widgets.Layout(width="80px"), tooltip="previous step"
        )
        self.next_button = widgets.Button(
            description="next ▶", layout=widgets.Layout(width="80px"), tooltip="next step"
        )
        self.position = widgets.HTML()
        self.instruction = widgets.HTML()
        self.loop_nest = widgets.HTML()
        self.prev_button.on_click(lambda _b: self._move(-1))
        self.next_button.on_click(lambda _b: self._move(+1))
        self.slider.observe(lambda change: self._render(change["new"]), names="value")
        controls = widgets.HBox([self.prev_button, self.slider, self.next_button, self.position])
        self.widget = widgets.VBox(
            [controls, self.instruction, self.loop_nest],
            layout=widgets.Layout(border="1px solid #ddd", padding="6px"),
        )
        self.widget.add_class("wb-stepper")
        self._render(last)

    # state ------------------------------------------------------------------------------
    @property
    def n_steps(self) -> int:
        """Number of positions: the start, one per instruction (or group of annotation steps),
        one more for a failed step."""
        return len(self.steps) + (1 if self.error is not None else 0)

    @property
    def step(self) -> int:
        return self.slider.value

    @step.setter
    def step(self, k: int) -> None:
        if not 0 <= k < self.n_steps:
            raise IndexError(f"step {k} out of range: this schedule has steps 0..{self.n_steps - 1}")
        self.slider.value = k

    def _move(self, delta: int) -> None:
        self.slider.value = min(max(self.slider.value + delta, 0), self.n_steps - 1)

    def _failed(self, k: int) -> bool:
        return self.error is not None and k == self.n_steps - 1

    # rendering --------------------------------------------------------------------------
    def _render(self, k: int) -> None:
        self.position.value = (
            f'<span style="color: #555;">{k} / {self.n_steps - 1}'
            f"{' (failed)' if self._failed(k) else ''}</span>"
        )
        self.prev_button.disabled = k == 0
        self.next_button.disabled = k == self.n_steps - 1
        self.instruction.value = self.instruction_html(k)
        self.loop_nest.value = self.loop_nest_html(k)

    def describe(self, k: int) -> str:
        """One sentence on what step ``k`` did."""
        if k == 0:
            return "Step 0: the function as written, before any scheduling instruction."
        if self._failed(k):
            return f"Step {k} failed; the schedule is left as it was after step {k - 1}."
        first, last = self.steps[k]
        if last > first:
            inst = self.history[first][0]
            changed = len(changed_lines(self._texts[first - 1], self._texts[last]))
            return (
                f"Step {k}: {last - first + 1} × {inst.kind.name} (trace lines {first}–{last}), grouped: "
                f"{_lines(changed)} of the loop nest new or different, highlighted."
            )
        inst, func = self.history[first]
        before = self.history[first - 1][1]
        outs = ", ".join(self._value_text(rv) for rv in inst.outputs)
        if inst.kind.is_sampling:
            return (
                f"Step {k}: {inst.kind.name} draws {outs}. Sampling changes nothing yet: "
                f"later steps use these values."
            )
        if func is before:
            named = f" It names {outs} for later steps." if outs else ""
            return f"Step {k}: {inst.kind.name} only looks at the loop nest.{named}"
        changed = len(changed_lines(self._texts[first - 1], self._texts[first]))
        gone = removed_count(self._texts[first - 1], self._texts[first])
        return (
            f"Step {k}: {inst.kind.name} changed the loop nest ({_lines(changed)} new or "
            f"different, highlighted; {_lines(gone)} of the previous step gone)."
        )

    def _step_line(self, first: int, last: int) -> str:
        """The trace line of a step (history positions ``first..last``): the instruction's
        Python, or for a group its first line and how many follow."""
        line = self.history[first][0].kind.as_python(self.history[first][0], self.names)
        if last == first:
            return line
        return f"{line}  # ... and {last - first} more {self.history[first][0].kind.name} steps"

    def _value_text(self, rv: Any) -> str:
        name = self.names.get(rv, "?")
        if isinstance(rv, ExprRV) and rv in self.symbols:
            return f"{name} = {self.symbols[rv]}"
        return name

    def instruction_html(self, k: int) -> str:
        """The trace with step ``k``'s instruction marked and later ones faded."""
        parts = [note_html(self.describe(k), color="#222")]
        lines = list(self.trace_lines)
        if self._failed(k):
            parts.append(
                error_html(
                    f"{type(self.error).__name__} at step {k}",
                    (f">>> {self.failed_source}\n" if self.failed_source else "") + str(self.error),
                )
            )
        if lines:
            # a long trace shows a window around the current step, so it stays in view
            start = max(0, min(k - TRACE_WINDOW + 4, len(lines) - TRACE_WINDOW))
            stop = min(len(lines), start + TRACE_WINDOW)
            shown = lines[start:stop]
            if start:
                shown.insert(0, f"# ... {start} earlier steps")
            if stop < len(lines):
                shown.append(f"# ... {len(lines) - stop} later steps")
            offset = 1 if start else 0
            current = {k - 1 - start + offset} if start < k <= stop else set()
            dim = k - start + offset if k <= stop else None
            parts.append(code_html("\n".join(shown), marked=current, title="trace", dim_from=dim))
        return "".join(parts)

    def loop_nest_html(self, k: int) -> str:
        """The function after step ``k`` (before it, for a failed step), changes marked."""
        k_step = min(k, len(self.steps) - 1)
        first, last = self.steps[k_step]
        marked = (
            [] if last == 0 or self._failed(k) else changed_lines(self._texts[first - 1], self._texts[last])
        )
        return code_html(self._texts[last], marked=marked, title=f"loop nest after step {k_step}")

    def _repr_html_(self) -> str:
        """Every step in a fold, the last one open (what an exported notebook shows)."""
        out = []
        for k in range(self.n_steps):
            body = self.instruction_html(k) + self.loop_nest_html(k)
            title = self.describe(k)
            out.append(
                f"<details{' open' if k == self.n_steps - 1 else ''}>"
                f'<summary style="cursor: pointer;">{html.escape(title)}</summary>'
                f"{body}</details>"
            )
        return f'<div class="wb-stepper">{"".join(out)}</div>'

    def text(self) -> str:
        k = self.step
        out = [self.describe(k)]
        if self._failed(k):
            out.append(str(self.error))
        out.append(self._texts[self.steps[min(k, len(self.steps) - 1)][1]])
        return "\n".join(out)


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"
