"""``DisallowDynamicLoop``: reject candidates with a loop whose extent is not a constant."""

from __future__ import annotations

from ...ir.expr import IntImm
from ...schedule import Schedule
from .base import Postproc, Rejected


class DisallowDynamicLoop(Postproc):
    """Every loop must have a constant extent (the backends and the cost model assume it)."""

    def apply(self, sch: Schedule) -> bool:
        for loop in sch.func.loops():
            if not isinstance(loop.extent, IntImm):
                raise Rejected(f"loop {loop.loop_var.name!r} has dynamic extent {loop.extent}")
        return True
