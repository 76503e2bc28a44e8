"""``ScheduleRule``: a transformation module applied to one block of a schedule.

A rule analyses the block in the schedule's current state, then samples and transforms. It
returns the schedules it produced: ``[sch]`` when it only changed ``sch`` (or did nothing), or
several schedules when the design space *forks* (e.g. with and without a write cache); each
fork is a copy made with :func:`fork`, so the branches draw different random numbers::

    class Unroll4(ScheduleRule):
        def apply(self, sch, block):
            *_, inner = sch.get_loops(block)
            if sch.get(inner).extent.value == 4:
                sch.unroll(inner)
            return [sch]
"""

from __future__ import annotations

from typing import Any, ClassVar

from ...schedule import BlockRV, Schedule
from ..plugin import Pluggable, target_kind


def fork(sch: Schedule) -> Schedule:
    """A copy of ``sch`` with its own random stream (seeded from ``sch``'s)."""
    out = sch.copy()
    out.seed(sch.fork_seed())
    return out


class ScheduleRule(Pluggable):
    """Base class of schedule rules (TVM MetaSchedule's ``ScheduleRule``)."""

    _registry: ClassVar[dict[str, type]] = {}

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        """Transform ``sch`` at ``block``; return the resulting schedule(s)."""
        raise NotImplementedError(f"{type(self).__name__} must define apply(sch, block)")

    @staticmethod
    def create(kind: Any = "llvm") -> list["ScheduleRule"]:
        """The default rules for a target kind (``"llvm"`` or ``"cuda"``; a ``Target`` too)."""
        from . import default_rules  # a cycle: the package's __init__ imports this module

        return default_rules(target_kind(kind))
