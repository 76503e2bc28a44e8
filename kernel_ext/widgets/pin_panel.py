"""The pin/free panel: fix some decisions of a design space, leave the rest to the search.

One row per sampling instruction of a design-space trace: a dropdown of every value it may
take (the valid tilings of ``sample_perfect_tile``, the candidates of ``sample_categorical``,
the locations of ``sample_compute_location``) plus "free". Choosing a value *pins* it
(``Trace.pin``); "free" lets the search choose (``Trace.free``). Every change replays the trace
with the pins on a fresh schedule and re-renders the loop nest, changed lines highlighted;
free decisions keep their current sample unless it no longer fits (then they are redrawn).
``panel.space()`` is the constrained space: a trace whose pinned decisions ``wb.tune`` keeps.

With a learned decision model (``PinPanel(sch, model=DecisionModel.load("model/"))``) each row
also shows the model's distribution over that decision's values, given the decisions before it,
beside the uniform one random sampling uses (``panel.distribution(step)``).
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any, Optional, Union

import ipywidgets as widgets

import workbench as wb
from workbench.space import without_postproc

from ..choices import Choice, decision_text, describe_sampling, sampling_choices, space_size
from ..highlight import changed_lines, code_html, error_html, note_html
from .base import WorkbenchWidget

#: the dropdown value meaning "not pinned"
FREE = -1


def replay_with_pins(
    trace: "wb.Trace", func: "wb.PrimFunc", seed: Optional[int] = None, resample_all: bool = False
) -> "wb.Schedule":
    """A fresh schedule of ``func`` with ``trace`` replayed: pinned decisions as pinned, free
    ones as recorded (or all redrawn with ``resample_all``).

    A free decision that no longer fits (a tiling of a loop whose extent an earlier pin
    changed, or one that removes the loop a pinned compute location names) is redrawn and the
    replay retried; a pinned decision is never moved to fit. A failure a redraw cannot fix —
    the pins themselves conflict — raises the ``ScheduleError``.
    """
    position = {id(inst): k for k, inst in enumerate(trace)}
    redraw: set[int] = set()
    while True:
        sch = wb.Schedule(func, seed=seed)

        def provider(inst: Any, decision: Any) -> Any:
            k = position[id(inst)]
            return None if resample_all or k in redraw else decision

        try:
            trace.apply_to_schedule(sch, decision_provider=provider)
            return sch
        except wb.ScheduleError as err:
            failed = err.step  # the failing instruction (the replay is undone)
            culprit = _free_sampling_before(trace, failed, redraw)
            if culprit is None:
                raise
            redraw.add(culprit)


def _free_sampling_before(trace: "wb.Trace", failed: int, redraw: set[int]) -> Optional[int]:
    """The last free sampling instruction at or before ``failed`` not redrawn yet."""
    for k in range(min(failed, len(trace) - 1), -1, -1):
        inst = trace[k]
        if inst.kind.is_sampling and not inst.pinned and k not in redraw:
            return k
    return None


class PinPanel(WorkbenchWidget):
    """Pin or free each decision of a design space and watch the loop nest change.

    Parameters
    ----------
    space : a ``Schedule`` (one of ``wb.generate_design_space(...)``), a ``Trace``, or a
        database record (``db.best(func)``: its design-space part, postprocessing dropped).
    func : the function the trace applies to; by default the schedule's, the record's, or the
        one the trace knows (``trace.base_func``: a schedule's trace knows it, a trace read from
        JSON does not).
    target, database, trials, seed, tune_args : what the Tune button passes to ``wb.tune``
        (``tune_args``: any other keyword, ``strategy=...``, ``num_trials_per_iter=...``).
        Every record it stores keeps every pin; pins that cannot be kept on ``func`` are
        refused with the reason, shown in the panel.
    model : a ``workbench.tune.learned.DecisionModel`` (or the folder it was saved in): show
        its distribution of each decision beside the uniform one.
    """

    def __init__(
        self,
        space: Union["wb.Schedule", "wb.Trace", Any],
        func: Optional["wb.PrimFunc"] = None,
        target: str = "llvm",
        database: Any = None,
        trials: int = 16,
        seed: int = 0,
        model: Any = None,
        **tune_args: Any,
    ):
        if isinstance(model, str):
            from workbench.tune.learned import DecisionModel

            model = DecisionModel.load(model)
        self.model = model
        if isinstance(space, wb.Schedule):
            func = space.history[0][1] if func is None else func
            trace = space.trace
        elif isinstance(space, wb.Trace):
            func = space.base_func if func is None else func
            if func is None:
                raise TypeError(
                    "PinPanel(trace): this trace does not know the function it "
                    "schedules (it was read from JSON or built by hand); pass it, "
                    "PinPanel(trace, func=func), or pass the schedule the trace "
                    "came from, PinPanel(sch)"
                )
            trace = space
        elif hasattr(space, "trace_json"):  # a database record
            func = space.func if func is None else func
            if func is None:
                raise TypeError(
                    "PinPanel(record): this record was read without its function; "
                    "pass it, PinPanel(record, func=func) (records from "
                    "db.records(func) or db.best(func) carry it)"
                )
            trace = without_postproc(space.trace)  # the design space: postprocs redo the rest
        else:
            raise TypeError(
                f"PinPanel expects a Schedule, a Trace or a database record, got "
                f"{type(space).__name__}"
                + ("; pick one design space: PinPanel(spaces[0])" if isinstance(space, (list, tuple)) else "")
            )
        self.func = func
        self.target, self.database, self.trials, self.seed = target, database, trials, seed
        self.tune_args = tune_args
        self.sch = replay_with_pins(trace.copy(), func, seed=seed)
        self.sampling = [k for k, inst in enumerate(self.sch.trace) if inst.kind.is_sampling]
        self.choices: dict[int, list[Choice]] = {}
        self.result: Any = None  # what the last Tune click returned
        self._updating = False

        self.controls: dict[int, widgets.Dropdown] = {}
        rows = []
        for k in self.sampling:
            dd = widgets.Dropdown(layout=widgets.Layout(width="260px"))
            dd.observe(lambda change, k=k: self._on_pick(k, change), names="value")
            self.controls[k] = dd
            label = widgets.HTML(layout=widgets.Layout(width="560px"))
            rows.append(widgets.HBox([label, dd]))
        self._labels = [row.children[0] for row in rows]
        self.status = widgets.HTML()
        self.message = widgets.HTML()
        self.loop_nest = widgets.HTML()
        self.resample_button = widgets.Button(
            description="Sample free decisions",
            layout=widgets.Layout(width="190px"),
            tooltip="draw new values for every free decision",
        )
        self.free_all_button = widgets.Button(description="Free all", tooltip="unpin every decision")
        self.tune_button = widgets.Button(
            description="Tune", button_style="primary", tooltip="search the constrained space with wb.tune"
        )
        self.output = widgets.Output()
        self.resample_button.on_click(lambda _b: self.resample())
        self.free_all_button.on_click(lambda _b: self.free_all())
        self.tune_button.on_click(lambda _b: self._on_tune())
        buttons = widgets.HBox([self.resample_button, self.free_all_button, self.tune_button])
        self.widget = widgets.VBox(
            [self.status, *rows, buttons, self.message, self.loop_nest, self.output],
            layout=widgets.Layout(border="1px solid #ddd", padding="6px"),
        )
        self.widget.add_class("wb-pin-panel")
        self._refresh(changed=[])

    # the model ----------------------------------------------------------------------------
    @property
    def trace(self) -> "wb.Trace":
        """The current trace: pinned decisions and the current sample of the free ones."""
        return self.sch.trace

    @property
    def pinned(self) -> dict[int, Any]:
        """Step -> pinned decision."""
        return {k: self.trace[k].decision for k in self.sampling if self.trace[k].pinned}

    def _step(self, which: Union[int, str]) -> int:
        """A sampling step given its position or the name of one of its outputs (``"v5"``)."""
        if isinstance(which, str):
            by_name = {name: rv for rv, name in self.trace.rv_names().items()}
            if which not in by_name:
                raise KeyError(f"no random variable {which!r} in this trace")
            which = next(k for k, inst in enumerate(self.trace) if by_name[which] in inst.outputs)
        if which not in self.sampling:
            raise ValueError(f"step {which} is not a sampling instruction; sampling steps: {self.sampling}")
        return which

    def steps(self, kind: Optional[str] = None) -> list[int]:
        """The sampling steps (of one kind, e.g. ``"sample_categorical"`` or TVM's
        ``"SampleCategorical"``), in trace order."""
        return [k for k in self.sampling if kind is None or self.trace[k].kind.matches(kind)]

    def tile_of(self, loop: str) -> int:
        """The ``sample_perfect_tile`` step that tiles the loop named ``loop`` (``"j"``)."""
        for k in self.steps("sample_perfect_tile"):
            var = self.sch.symbols.get(self.trace[k].args["loop"])
            if var is not None and var.name == loop:
                return k
        raise KeyError(f"no sampled tiling of a loop named {loop!r}")

    def pin(self, which: Union[int, str], decision: Any) -> None:
        """Pin a decision (step number or output name) and re-render; a value the
        instruction cannot take raises ``ScheduleError`` and changes nothing."""
        k = self._step(which)
        self._apply(self.trace.with_decision(k, decision, pinned=True))

    def free(self, which: Union[int, str]) -> None:
        """Let the search choose this decision again."""
        k = self._step(which)
        trace = self.trace.copy()
        trace.free(k)
        self._apply(trace)

    def free_all(self) -> None:
        trace = self.trace.copy()
        for k in self.sampling:
            trace.free(k)
        self._apply(trace)

    def resample(self) -> None:
        """Draw new values for every free decision (another program of the same space)."""
        self.seed += 1
        self._apply(self.trace, resample_all=True)

    def space(self) -> "wb.Trace":
        """The constrained design space: the trace with its pins, for ``wb.tune``."""
        return self.trace.copy()

    def space_size(self) -> int:
        """About how many programs the free decisions still span (an upper bound)."""
        return space_size([self.choices[k] for k in self.sampling if not self.trace[k].pinned])

    def distribution(
        self, which: Union[int, str], top: Optional[int] = None
    ) -> list[tuple[str, float, float]]:
        """``(value, model probability, uniform probability)`` of each value the decision may
        take, the model's likeliest first (``top``: only that many); needs ``model``."""
        if self.model is None:
            raise ValueError(
                "PinPanel(..., model=DecisionModel.load(path)) shows a learned "
                "distribution; this panel has no model"
            )
        k = self._step(which)
        probs = self.model.distribution(self.sch, k, self.target)
        inst = self.trace[k]
        weights = dict.fromkeys(probs, 1.0)  # uniform over the valid values...
        if inst.kind.name == "sample_categorical":  # ...or the categorical's own weights
            weights = {d: inst.args["probs"][d] for d in probs}
        total = sum(weights.values()) or 1.0
        rows = sorted(
            (
                (decision_text(dataclasses.replace(inst, decision=_as_list(d))), p, weights[d] / total)
                for d, p in probs.items()
            ),
            key=lambda r: -r[1],
        )
        return rows[:top] if top else rows

    def _distribution_html(self, k: int) -> str:
        rows = self.distribution(k, top=4)
        if not rows:
            return ""
        bars = " ".join(
            f'<span title="model {p:.1%}, uniform {u:.1%}">{html.escape(v)} <b>{p:.0%}</b></span>'
            for v, p, u in rows
        )
        return (
            f'<br><small style="color:#555">model: {bars} · random sampling: '
            f"{rows[0][2]:.1%} for {html.escape(rows[0][0])}</small>"
        )

    def _apply(self, trace: "wb.Trace", resample_all: bool = False) -> None:
        before = str(self.sch.func)
        self.sch = replay_with_pins(trace, self.func, seed=self.seed, resample_all=resample_all)
        self.message.value = ""
        self._refresh(changed_lines(before, str(self.sch.func)))

    # the view -----------------------------------------------------------------------------
    def _on_pick(self, k: int, change: dict) -> None:
        if self._updating:
            return
        value = change["new"]
        try:
            if value == FREE:
                self.free(k)
            else:
                self.pin(k, self.choices[k][value].decision)
        except wb.ScheduleError as err:
            self.message.value = error_html("These pins do not fit together", str(err))
            self._refresh(changed=[])

    def _on_tune(self) -> None:
        from .convergence import tune_with_plot

        self.output.clear_output()
        self.message.value = ""
        self.result = None
        with self.output:
            try:
                self.result = tune_with_plot(
                    self.func,
                    target=self.target,
                    trials=self.trials,
                    database=self.database,
                    seed=self.seed,
                    space=self.space(),
                    **self.tune_args,
                )
            except ValueError as err:  # the pins do not fit the function: say which and why
                self.message.value = error_html("Tune refused these pins", str(err))

    def _refresh(self, changed: list[int]) -> None:
        """Re-read every control's options and value from the current schedule."""
        self._updating = True
        try:
            for row, k in enumerate(self.sampling):
                inst = self.trace[k]
                self.choices[k] = sampling_choices(self.sch, k)
                options = [(f"free (now {decision_text(inst)})", FREE)]
                options += [(c.label, i) for i, c in enumerate(self.choices[k])]
                dd = self.controls[k]
                dd.options = options
                dd.value = (
                    next((i for i, c in enumerate(self.choices[k]) if c.decision == inst.decision), FREE)
                    if inst.pinned
                    else FREE
                )
                pin = ' <b style="color: #b26a00;">pinned</b>' if inst.pinned else ""
                learned = self._distribution_html(k) if self.model is not None else ""
                self._labels[
                    row
                ].value = f"<code>{html.escape(describe_sampling(self.sch, k))}</code>{pin}{learned}"
        finally:
            self._updating = False
        n_pinned = len(self.pinned)
        self.status.value = note_html(
            f"{len(self.sampling)} decisions, {n_pinned} pinned; the free ones span about "
            f"{self.space_size():,} programs. The loop nest below is one of them.",
            color="#222",
        )
        self.loop_nest.value = code_html(
            str(self.sch.func), marked=changed, title="loop nest with these decisions"
        )

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><code>{html.escape(describe_sampling(self.sch, k))}</code></td>"
            f"<td>{'pinned ' if self.trace[k].pinned else 'free, now '}"
            f"<b>{html.escape(decision_text(self.trace[k]))}</b></td></tr>"
            for k in self.sampling
        )
        return (
            f'<div class="wb-pin-panel"><table><tr><th>decision</th><th>value</th></tr>'
            f"{rows}</table>{code_html(str(self.sch.func))}</div>"
        )

    def describe(self) -> str:
        """One line per decision: pinned or free, what it decides, its current value."""
        return "\n".join(
            f"{'pinned' if self.trace[k].pinned else 'free  '}  step {k:2d}  "
            f"{describe_sampling(self.sch, k)} = {decision_text(self.trace[k])}"
            for k in self.sampling
        )

    def text(self) -> str:
        return self.describe() + "\n" + str(self.sch.func)


def _as_list(decision: Any) -> Any:
    """A model's tiling (a tuple) as the list a trace records."""
    return list(decision) if isinstance(decision, tuple) else decision
