"""Trace markers: instructions that change nothing in the function but say where a trace's parts
begin. ``enter_postproc`` separates the design space's part of a trace from what the
postprocessors added (:mod:`workbench.space.postprocs`); TVM records the same marker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..instruction import schedule_primitive

if TYPE_CHECKING:
    from ..schedule import Schedule


@schedule_primitive("enter_postproc", pure=False, tvm_inputs=())
def enter_postproc(sch: Schedule) -> None:
    """Mark the end of the design-space part of a trace: what follows was added by
    postprocessors (a mutated trace drops it, and the postprocessors run again)."""
