"""The loop-nest stepper: a schedule's function after each step of its trace.

``Schedule.history`` keeps the function after every instruction (the IR is immutable, so this
costs nothing); the stepper walks it. At step ``k`` it shows the trace with instruction ``k``
marked (later ones faded), a sentence saying what the instruction did, and the loop nest after
it with the lines that step changed highlighted. A schedule whose next step failed gets one
more step: the error, shown where it happened, with the loop nest as it was before.
"""

from __future__ import annotations

import html
from typing import Any, Optional

import ipywidgets as widgets

import workbench as wb
from workbench.schedule.rv import ExprRV

from ..highlight import changed_lines, code_html, error_html, note_html, removed_count
from .base import WorkbenchWidget


#: at most this many lines of the trace are shown at once
TRACE_WINDOW = 16


class LoopNestStepper(WorkbenchWidget):
    """Step through ``sch.history`` with a slider, buttons or ``stepper.step = k``.

    Parameters
    ----------
    sch : the schedule to show (its history is copied: later changes to ``sch`` do not show).
    error : a ``ScheduleError`` raised by the step after the last one, shown as a final step.
    failed_source : the source line that raised ``error`` (shown with it).
    """

    def __init__(
        self, sch: "wb.Schedule", error: Optional[BaseException] = None, failed_source: Optional[str] = None
    ):
        self.history = list(sch.history)
        self.trace_lines = sch.trace.as_python().split("\n") if len(sch.trace) else []
        self.names = sch.trace.rv_names()
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
        """Number of positions: the start, one per instruction, one more for a failed step."""
        return len(self.history) + (1 if self.error is not None else 0)

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
        inst, func = self.history[k]
        before = self.history[k - 1][1]
        outs = ", ".join(self._value_text(rv) for rv in inst.outputs)
        if inst.kind.is_sampling:
            return (
                f"Step {k}: {inst.kind.name} draws {outs}. Sampling changes nothing yet: "
                f"later steps use these values."
            )
        if func is before:
            named = f" It names {outs} for later steps." if outs else ""
            return f"Step {k}: {inst.kind.name} only looks at the loop nest.{named}"
        changed = len(changed_lines(self._texts[k - 1], self._texts[k]))
        gone = removed_count(self._texts[k - 1], self._texts[k])
        return (
            f"Step {k}: {inst.kind.name} changed the loop nest ({_lines(changed)} new or "
            f"different, highlighted; {_lines(gone)} of the previous step gone)."
        )

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
        k_ir = min(k, len(self.history) - 1)
        marked = (
            [] if k_ir == 0 or self._failed(k) else changed_lines(self._texts[k_ir - 1], self._texts[k_ir])
        )
        return code_html(self._texts[k_ir], marked=marked, title=f"loop nest after step {k_ir}")

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
        out.append(self._texts[min(k, len(self.history) - 1)])
        return "\n".join(out)


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"
