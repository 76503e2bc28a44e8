"""The loop-nest stepper, driven headlessly: slider values and button handlers."""

import re

import pytest

import workbench as wb
from kernel_ext import LoopNestStepper
from kernel_ext.highlight import changed_lines


def _text(fragment: str) -> str:
    """The visible text of an HTML fragment."""
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def test_starts_at_the_last_step_and_moves_with_the_slider(space):
    stepper = LoopNestStepper(space)
    last = len(space.history) - 1
    assert stepper.step == last and stepper.slider.max == last
    assert "i_0" in _text(stepper.loop_nest.value)  # the split loops are there
    stepper.slider.value = 0
    shown = _text(stepper.loop_nest.value)
    assert "i_0" not in shown and "for b, i, j, k in T.grid(1, 16, 16, 16)" in shown
    assert "Step 0" in _text(stepper.instruction.value)


def test_buttons_step_and_stop_at_the_ends(space):
    stepper = LoopNestStepper(space)
    stepper.step = 0
    assert stepper.prev_button.disabled
    stepper.prev_button.click()
    assert stepper.step == 0
    for _ in range(3):
        stepper.next_button.click()
    assert stepper.step == 3
    assert "sample_perfect_tile" in stepper.describe(3)
    stepper.step = stepper.n_steps - 1
    stepper.next_button.click()
    assert stepper.step == stepper.n_steps - 1 and stepper.next_button.disabled


def test_the_split_step_marks_exactly_the_changed_lines(space):
    stepper = LoopNestStepper(space)
    split_step = next(
        k for k, (inst, _f) in enumerate(space.history) if inst is not None and inst.kind.name == "split"
    )
    stepper.step = split_step
    html_ = stepper.loop_nest.value
    before, after = str(space.history[split_step - 1][1]), str(space.history[split_step][1])
    expected = changed_lines(before, after)
    assert html_.count('data-changed="1"') == len(expected) > 0
    assert "changed the loop nest (5 lines new or different" in stepper.describe(split_step)
    # the trace shows this step's line marked, the later ones faded
    trace_html = stepper.instruction.value
    assert trace_html.count('data-changed="1"') == 1
    assert trace_html.count('data-dimmed="1"') == len(space.trace) - split_step


def test_query_steps_change_nothing(space):
    stepper = LoopNestStepper(space)
    stepper.step = 1  # get_block
    assert 'data-changed="1"' not in stepper.loop_nest.value
    assert "only looks at the loop nest" in stepper.describe(1)


def test_failed_step_shows_the_error_after_the_kept_steps(gmm):
    sch = wb.Schedule(gmm)
    _b, i, _j, _k = sch.get_loops(sch.get_block("Z"))
    sch.split(i, factors=[None, 4])
    with pytest.raises(wb.ScheduleError) as info:
        sch.split(i, factors=[None, 2])  # i no longer exists
    stepper = LoopNestStepper(sch, error=info.value, failed_source="sch.split(i, factors=[None, 2])")
    assert stepper.n_steps == len(sch.history) + 1
    assert stepper.step == stepper.n_steps - 1
    shown = _text(stepper.instruction.value)
    assert "ScheduleError at step 4" in shown and "no longer exists" in shown
    assert "sch.split(i, factors=[None, 2])" in shown
    assert _text(stepper.loop_nest.value).count("i_0") > 0  # the kept split
    stepper.step = 2
    assert "no longer exists" not in _text(stepper.instruction.value)


def test_static_fallbacks_hold_every_step(space):
    stepper = LoopNestStepper(space)
    static = stepper._repr_html_()
    assert static.count("<details") == stepper.n_steps
    bundle = stepper._repr_mimebundle_()
    assert {"text/html", "text/plain", "application/vnd.jupyter.widget-view+json"} <= set(bundle)
    assert "i_0" in bundle["text/plain"]
    with pytest.raises(IndexError):
        stepper.step = stepper.n_steps


def test_a_long_trace_shows_a_window_around_the_current_step(gmm):
    sch = wb.Schedule(gmm)
    b = sch.get_block("Z")
    for _ in range(30):
        sch.get_loops(b)
    stepper = LoopNestStepper(sch)
    stepper.step = 20
    shown = _text(stepper.instruction.value)
    assert "# ... 8 earlier steps" in shown and "# ... 7 later steps" in shown
    marked = re.findall(r'data-changed="1"[^>]*>(.*?)</span><span', stepper.instruction.value)
    assert len(marked) == 1 and "l" in _text(marked[0])
    assert shown.count("= sch.get_") == 16
