"""The pin/free panel, driven headlessly through its dropdowns and buttons."""

import pytest

import workbench as wb
from kernel_ext import PinPanel
from kernel_ext.choices import sampling_choices, tilings
from kernel_ext.widgets.pin_panel import FREE, replay_with_pins


def _tile_steps(panel):
    return [k for k in panel.sampling if panel.trace[k].kind.name == "sample_perfect_tile"]


def test_one_control_per_sampling_instruction_with_valid_choices(space):
    panel = PinPanel(space)
    assert panel.sampling == [k for k, i in enumerate(space.trace) if i.kind.is_sampling]
    first = _tile_steps(panel)[0]
    labels = [label for label, _v in panel.controls[first].options]
    assert labels[0].startswith("free (now ")
    assert labels[1:] == ["[2, 8]", "[4, 4]", "[8, 2]", "[16, 1]"]  # innermost <= 8
    assert all(v == FREE for v in (c.value for c in panel.controls.values()))


def test_picking_a_value_pins_it_and_rerenders_the_loop_nest(space):
    panel = PinPanel(space)
    first = _tile_steps(panel)[0]
    options = dict(panel.controls[first].options)
    target = "[4, 4]" if panel.trace[first].decision != [4, 4] else "[2, 8]"
    panel.controls[first].value = options[target]  # what a click on the dropdown does
    assert panel.trace[first].pinned and str(panel.trace[first].decision) == target
    outer = eval(target)[0]
    assert f"T.grid(1, {outer}," in str(panel.sch.func)
    assert 'data-changed="1"' in panel.loop_nest.value  # the changed loop line is marked
    assert panel.pinned == {first: eval(target)}
    assert "1 pinned" in panel.status.value


def test_pinning_an_outer_tile_redraws_a_dependent_free_tile(space):
    panel = PinPanel(space)
    first, second = _tile_steps(panel)
    panel.pin(first, [16, 1])  # the inner loop now has extent 1
    assert panel.trace[second].decision == [1, 1]
    assert [c.label for c in panel.choices[second]] == ["[1, 1]"]
    panel.pin(first, [2, 8])
    assert panel.trace[second].decision in tilings(8, 2, 4)


def test_free_and_free_all_unpin(space):
    panel = PinPanel(space)
    cat = next(k for k in panel.sampling if panel.trace[k].kind.name == "sample_categorical")
    name = panel.trace.rv_names()[panel.trace[cat].outputs[0]]
    panel.pin(name, 2)  # by the name of its output, as in the trace
    assert panel.trace[cat].pinned and panel.controls[cat].value == 2
    panel.controls[cat].value = FREE
    assert not panel.trace[cat].pinned
    panel.pin(cat, 1)
    panel.pin(_tile_steps(panel)[0], [8, 2])
    panel.free_all_button.click()
    assert panel.pinned == {}


def test_sample_button_redraws_free_decisions_and_keeps_pins(space):
    panel = PinPanel(space)
    first = _tile_steps(panel)[0]
    panel.pin(first, [4, 4])
    seen = set()
    for _ in range(12):
        panel.resample_button.click()
        assert panel.trace[first].decision == [4, 4]
        seen.add(str([panel.trace[k].decision for k in panel.sampling if k != first]))
    assert len(seen) > 1


def test_space_is_the_pinned_trace_and_replays(space, gmm):
    panel = PinPanel(space)
    first = _tile_steps(panel)[0]
    panel.pin(first, [8, 2])
    constrained = panel.space()
    assert constrained[first].pinned and constrained[first].decision == [8, 2]
    rebuilt = replay_with_pins(wb.Trace.from_json(constrained.as_json()), gmm, seed=3, resample_all=True)
    assert rebuilt.trace[first].decision == [8, 2]


def test_invalid_pin_raises_and_changes_nothing(space):
    panel = PinPanel(space)
    before = str(panel.sch.func)
    with pytest.raises(wb.ScheduleError):
        panel.pin(_tile_steps(panel)[0], [3, 5])
    assert str(panel.sch.func) == before and panel.pinned == {}


def test_choices_follow_the_function_before_the_instruction(space):
    first = next(k for k, i in enumerate(space.trace) if i.kind.name == "sample_perfect_tile")
    assert [c.decision for c in sampling_choices(space, first)] == tilings(16, 2, 8)
    assert tilings(12, 3, None)[:3] == [[1, 1, 12], [1, 2, 6], [1, 3, 4]]
    assert len(tilings(12, 3, None)) == 18


def test_static_fallback_lists_every_decision(space):
    panel = PinPanel(space)
    panel.pin(_tile_steps(panel)[0], [4, 4])
    html_ = panel._repr_html_()
    assert html_.count("<tr>") == len(panel.sampling) + 1 and "pinned" in html_
    assert "pinned" in panel.text().splitlines()[0]


def test_a_trace_alone_is_enough_when_it_knows_its_function(space, gmm):
    panel = PinPanel(space.trace)  # a schedule's trace knows its function
    assert panel.func is gmm and panel.sampling == PinPanel(space).sampling
    assert str(panel.sch.func) == str(space.func)
    assert panel.steps("SampleCategorical") == panel.steps("sample_categorical") != []
    read_back = wb.Trace.from_json(space.trace.as_json())
    with pytest.raises(
        TypeError,
        match=r"does not know the function.*"
        r"PinPanel\(trace, func=func\).*PinPanel\(sch\)",
    ):
        PinPanel(read_back)
    assert str(PinPanel(read_back, func=gmm).sch.func) == str(space.func)


def test_a_database_record_brings_its_function(space, gmm):
    from workbench.tune import Record

    record = Record.of(gmm, "llvm", space.trace, [1e-4])
    panel = PinPanel(record)
    assert panel.func is gmm and str(panel.sch.func) == str(space.func)
    bare = Record(record.trace_json, [1e-4])  # read without its function
    with pytest.raises(TypeError, match=r"PinPanel\(record, func=func\)"):
        PinPanel(bare)
    assert PinPanel(bare, func=gmm).sampling == panel.sampling


# pins and the Tune button --------------------------------------------------------------------


@pytest.fixture
def conv_panel():
    """The pin panel on the first design space of a small convolution, the padding's compute
    location pinned to the outer reduction loop rc_0 (position 10): free tilings that make
    rc_0 a unit loop leave no such location."""
    func = wb.workloads.get("C2D", **wb.workloads.small("C2D"))
    design = wb.generate_design_space(func, target="llvm", seed=0)[0]
    panel = PinPanel(
        design,
        trials=4,
        strategy=wb.tune.EvolutionarySearch(population_size=8, num_iters=1),
        num_trials_per_iter=4,
        cost_model="random",
        baseline=False,
    )
    step = panel.steps("sample_compute_location")[0]
    assert [c.label for c in panel.choices[step]][-1] == "at loop rc_0"
    panel.controls[step].value = len(panel.choices[step]) - 1  # picked in the dropdown
    assert panel.pinned == {step: 10}
    return panel, step


def test_tune_keeps_a_pinned_compute_location_in_every_record(conv_panel):
    panel, step = conv_panel
    panel.tune_button.click()
    records = panel.result.records(panel.func, "llvm")
    assert len(records) == 4 and all(r.ok for r in records)
    assert all(r.trace[step].decision == 10 and r.trace[step].pinned for r in records)


def test_a_tiling_that_removes_the_pinned_location_is_refused(conv_panel):
    panel, step = conv_panel
    rc = panel.tile_of("rc")
    before = (str(panel.sch.func), panel.pinned)
    with pytest.raises(wb.ScheduleError, match=r"pinned decision 10 cannot be replayed"):
        panel.pin(rc, [1, 3])  # rc_0 becomes a unit loop: no compute location there
    assert (str(panel.sch.func), panel.pinned) == before
    labels = [label for label, _v in panel.controls[rc].options]
    panel.controls[rc].value = labels.index("[1, 3]") - 1  # the same through the dropdown
    assert "These pins do not fit together" in panel.message.value
    assert (str(panel.sch.func), panel.pinned) == before


def test_tune_refuses_pins_that_do_not_fit_the_function_and_says_why(space):
    panel = PinPanel(space, trials=2, baseline=False)
    panel.pin(_tile_steps(panel)[0], [2, 8])
    panel.func = wb.workloads.get("GMM", n=8, m=16, k=16)  # the pins were set on n=16
    panel.tune_button.click()
    assert panel.result is None
    assert "Tune refused these pins" in panel.message.value
    assert "pinned to [2, 8]" in panel.message.value and "not the extent 8" in panel.message.value
