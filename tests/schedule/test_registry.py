"""Registering primitives from user code: one function + ``@schedule_primitive``."""

import json

import pytest

from workbench.errors import ScheduleError
from workbench.schedule import (
    REGISTRY,
    ExprRV,
    LoopRV,
    Schedule,
    Trace,
    get_kind,
    schedule_primitive,
    unregister,
)
from workbench.testing import check_small, check_trace_roundtrip, original_func, small_schedule


@pytest.fixture
def double_split():
    @schedule_primitive("double_split")
    def double_split(sch, loop: LoopRV, inner: int) -> list[LoopRV]:
        """Split ``loop`` into ``[None, inner, inner]`` with two nested splits."""
        outer, mid = sch.split(loop, [None, inner * inner])
        return [outer, *sch.split(mid, [inner, inner])]

    yield double_split
    unregister("double_split")


@pytest.fixture
def sample_power_of_two():
    @schedule_primitive("sample_power_of_two", sampling=True)
    def sample_power_of_two(sch, max_log2: int, decision=None) -> ExprRV:
        """Draw 2**d for d uniform in [0, max_log2]; the decision is d."""
        if decision is None:
            decision = sch.rng.randint(0, max_log2)
        if not 0 <= decision <= max_log2:
            raise ScheduleError(
                "sample_power_of_two", f"decision {decision} is out of range", argument="decision"
            )
        return sch.new_rv(ExprRV, 2**decision), decision

    yield sample_power_of_two
    unregister("sample_power_of_two")


def test_user_primitive_is_traced_replayed_and_builds(double_split):
    sch = small_schedule("GMM")
    loops = sch.double_split(sch.get_loops("Z")[2], inner=2)
    assert [sch.get(l).extent.value for l in loops] == [4, 2, 2]
    assert str(sch.trace).splitlines()[-1] == "l5, l6, l7 = sch.double_split(loop=l3, inner=2)"
    assert [inst.kind.name for inst in sch.trace] == ["get_block", "get_loops", "double_split"]
    assert len(sch.history) == 4
    data = json.loads(json.dumps(sch.trace.as_json()))
    assert data["insts"][-1]["kind"] == "double_split"
    check_trace_roundtrip(sch)
    check_small(sch, "GMM")
    assert get_kind("double_split").doc.startswith("Split ``loop``")
    assert Schedule.double_split.__doc__ == get_kind("double_split").doc


def test_user_primitive_is_atomic():
    @schedule_primitive("split_twice")
    def split_twice(sch, loop: LoopRV, first: list, second: list) -> list[LoopRV]:
        outer, inner = sch.split(loop, first)
        return [*sch.split(outer, second), inner]

    try:
        sch = small_schedule("GMM")
        loop = sch.get_loops("Z")[2]
        before = (sch.func, len(sch.trace), dict(sch.symbols), len(sch.history))
        with pytest.raises(ScheduleError, match=r"split \(argument 'factors'\): factor 1 is 0"):
            sch.split_twice(loop, [None, 0], [2, 2])  # the first nested split fails
        with pytest.raises(ScheduleError, match=r"split.*multiply to 3, less than the extent 4"):
            sch.split_twice(loop, [None, 4], [3, 1])  # the second fails: the first is undone
        assert (sch.func, len(sch.trace), dict(sch.symbols), len(sch.history)) == before
        sch.split_twice(loop, [None, 4], [2, 2])
        assert [l.loop_var.name for l in sch.get(sch.get_loops("Z"))] == [
            "b",
            "i",
            "j_0_0",
            "j_0_1",
            "j_1",
            "k",
        ]
        check_small(sch, "GMM")
    finally:
        unregister("split_twice")


def test_user_primitive_checks_argument_types(double_split):
    sch = small_schedule("GMM")
    with pytest.raises(ScheduleError, match=r"double_split \(argument 'loop'\): expected LoopRV, got 'Z'"):
        sch.double_split("Z", inner=2)


def test_user_sampling_primitive(sample_power_of_two):
    sch = small_schedule("GMM", seed=2)
    v = sch.sample_power_of_two(max_log2=3)
    i = sch.get_loops("Z")[1]
    sch.split(i, [None, v])
    decision = sch.trace[0].decision
    assert sch.get(v) == 2**decision
    assert str(sch.trace).splitlines()[0] == f"v0 = sch.sample_power_of_two(max_log2=3, decision={decision})"
    check_trace_roundtrip(sch)
    pinned = sch.trace.with_decision(0, 1, pinned=True)
    replay = Schedule(original_func(sch), seed=7)
    pinned.apply_to_schedule(replay, decision_provider=Trace.resample)
    assert replay.get(replay.get_loops("Z"))[2].extent.value == 2


def test_non_schedule_error_restores_state_and_propagates():
    @schedule_primitive("broken")
    def broken(sch, loop: LoopRV) -> None:
        sch.split(loop, [None, 2])
        raise RuntimeError("bug in a user primitive")

    try:
        sch = small_schedule("GMM")
        loop = sch.get_loops("Z")[1]
        before = (sch.func, len(sch.trace), dict(sch.symbols), len(sch.history))
        with pytest.raises(RuntimeError, match="bug in a user primitive"):
            sch.broken(loop)
        assert (sch.func, len(sch.trace), dict(sch.symbols), len(sch.history)) == before
    finally:
        unregister("broken")
    assert "broken" not in REGISTRY and not hasattr(Schedule, "broken")


def test_registration_rules():
    with pytest.raises(ValueError, match="cannot register a primitive named 'copy'"):
        schedule_primitive("copy")(lambda sch: None)
    with pytest.raises(TypeError, match="must take a `decision=None` parameter"):
        schedule_primitive("sample_x", sampling=True)(lambda sch, n: None)
