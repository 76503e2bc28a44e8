"""The loop-nest stepper, driven headlessly: slider values and button handlers."""

import itertools
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


def test_the_users_variable_names_replace_the_generic_ones(gmm):
    sch = wb.Schedule(gmm)
    block = sch.get_block("Z")
    loops = sch.get_loops(block)
    outer, inner = sch.split(loops[1], factors=[4, 4])
    stepper = LoopNestStepper(sch)  # the caller's variables: block, loops, outer, inner
    text = _text(stepper.instruction_html(stepper.n_steps - 1))
    assert 'block = sch.get_block(name="Z")' in text
    assert "loops[0], loops[1], loops[2], loops[3] = sch.get_loops(block=block)" in text
    assert "outer, inner = sch.split(loop=loops[1], factors=[4, 4]" in text
    assert "l5" not in text and "b0" not in text
    generic = LoopNestStepper(sch, names={})  # nothing named: the trace's names
    assert "l5, l6 = sch.split(loop=l2" in _text(generic.instruction_html(generic.n_steps - 1))


def test_the_schedule_magic_passes_the_notebook_names(ip, gmm):
    ip.user_ns["gmm"] = gmm
    stepper = ip.run_cell_magic(
        "schedule", "gmm", 'blk = sch.get_block("Z")\nyo, xo = sch.get_loops(blk)[:2]'
    )
    assert 'blk = sch.get_block(name="Z")' in _text(stepper.instruction_html(1))


def test_a_long_run_of_annotation_steps_is_one_step():
    """A tuned trace's postprocessing: dozens of ``unroll`` steps in a row."""
    from workbench.space import PostOrderApply
    from workbench.space.postprocs import default_postprocs, run_postprocs

    func = wb.workloads.get("GMM", n=16, m=16, k=16)
    gen = PostOrderApply()
    gen.initialize_with_target("llvm -num-cores=2")
    sch = None
    for seed in range(20):
        cand = gen.generate_design_space(func, seed=seed)[0]
        if run_postprocs(cand, default_postprocs("llvm")) is None:
            kinds = [i.kind.name for i in cand.trace]
            if max((len(list(g)) for k, g in itertools.groupby(kinds) if k == "unroll"), default=0) >= 4:
                sch = cand
                break
    if sch is None:
        # no sampled candidate unrolled enough loops: unroll them by hand, as a postproc would
        sch = wb.Schedule(func)
        for loop in sch.get_loops(sch.get_block("Z")):
            sch.unroll(loop)
    stepper = LoopNestStepper(sch, names={})
    assert stepper.n_steps < len(sch.trace) + 1
    grouped = [k for k in range(stepper.n_steps) if "grouped" in stepper.describe(k)]
    assert grouped
    k = grouped[-1]
    first, last = stepper.steps[k]
    assert last - first + 1 >= 4 and f"{last - first + 1} × unroll" in stepper.describe(k)
    line = stepper.trace_lines[k - 1]
    assert line.startswith("sch.unroll(") and f"and {last - first} more unroll steps" in line
    stepper.step = k
    assert "unroll" in stepper.loop_nest.value or "T.unroll" in _text(stepper.loop_nest.value)
    assert stepper.text().endswith(str(sch.history[last][1]))
