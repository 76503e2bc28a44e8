"""What mypy infers for the primitives of ``Schedule`` (checked by ``.ci/lint mypy``, which lists
this file, and by ``test_typing.py``). Never run: ``assert_type`` only speaks to the checker.

The built-in primitives are listed in ``Schedule``'s class body with their implementations'
signatures, so a call is typed like any method, and a misspelled primitive is an error."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.schedule import BlockRV, ExprRV, LoopRV, Schedule, Trace, schedule_primitive

if TYPE_CHECKING:  # typing.assert_type is Python 3.11's; mypy knows typing_extensions' own
    from typing_extensions import assert_type

    def check(sch: Schedule) -> None:
        block = sch.get_block("C")
        assert_type(block, BlockRV)
        loops = sch.get_loops(block)
        assert_type(loops, list[LoopRV])
        assert_type(sch.split(loops[0], factors=[None, 16]), list[LoopRV])
        assert_type(sch.fuse(*loops[:2]), LoopRV)
        assert_type(sch.sample_perfect_tile(loops[1], n=2), list[ExprRV])
        assert_type(sch.sample_categorical([1, 2], [0.5, 0.5]), ExprRV)
        assert_type(sch.cache_read(block, 0, "local"), BlockRV)
        assert_type(sch.reorder(*loops), None)
        assert_type(sch.enter_postproc(), None)
        assert_type(Trace.from_python("", sch.func), Trace)
        assert_type(Schedule.from_python("", sch.func), Schedule)
        sch.split(loops[0], factors=[None, 16], preserve_unit_iter=True)  # type: ignore[call-arg]
        sch.fuse(block)  # type: ignore[arg-type]
        sch.spilt(loops[0], [None, 16])  # type: ignore[attr-defined]

    @schedule_primitive("typing_check_tile")
    def tile(sch: Schedule, loop: LoopRV, inner: int) -> list[LoopRV]:
        """A registered function keeps its signature (the decorator is ParamSpec-typed)."""
        return sch.split(loop, [None, inner])

    def check_registered(sch: Schedule, loop: LoopRV) -> None:
        assert_type(tile(sch, loop, inner=4), list[LoopRV])
        tile(sch, loop, inner="4")  # type: ignore[arg-type]
