"""``Mutator``: propose a neighbour of a trace in the design space.

The evolutionary search keeps good traces and asks mutators for variations: a mutator picks
one sampling instruction and returns a copy of the trace with a new decision for it (or None
when it finds nothing to change). It never changes a *pinned* decision, and it drops the
postprocessing part of the trace (the postprocessors run again on the replayed candidate)::

    class HalveFirstTile(Mutator):
        def apply(self, trace, rng):
            for inst in trace.insts:
                if inst.kind.name == "sample_perfect_tile" and not inst.pinned:
                    ...  # build a new decision
                    return without_postproc(trace).with_decision(inst, new)
            return None
"""
from __future__ import annotations

import random
from typing import Any, ClassVar, Iterator, Optional

from ...ir.func import PrimFunc
from ...schedule import Instruction, Trace
from ..plugin import Pluggable, target_kind


class Mutator(Pluggable):
    """Base class of mutators (TVM MetaSchedule's ``Mutator``)."""

    _registry: ClassVar[dict[str, type]] = {}
    #: the function the traces schedule (for mutators that replay a trace to analyse it)
    func: Optional[PrimFunc] = None

    def initialize_with_func(self, func: PrimFunc) -> None:
        """Remember the function of the task (the space generator calls this)."""
        self.func = func

    def apply(self, trace: Trace, rng: random.Random) -> Optional[Trace]:
        """A mutated copy of ``trace``, or None when this mutator has nothing to change."""
        raise NotImplementedError(f"{type(self).__name__} must define apply(trace, rng)")

    @staticmethod
    def create(kind: Any = "llvm") -> dict["Mutator", float]:
        """The default mutators of a target kind with their probabilities (TVM's)."""
        from . import default_mutators
        return default_mutators(target_kind(kind))

    def _need_func(self) -> PrimFunc:
        if self.func is None:
            raise RuntimeError(f"{type(self).__name__} replays traces: call "
                               f"initialize_with_func(func) first (the space generator does)")
        return self.func


def free_sampling(trace: Trace, kind: str) -> Iterator[Instruction]:
    """The unpinned sampling instructions of ``kind`` in the design-space part of ``trace``."""
    for inst in trace.insts:
        if inst.kind.name == "enter_postproc":
            return
        if inst.kind.name == kind and not inst.pinned:
            yield inst


def annotated_with(trace: Trace, keys: tuple[str, ...]) -> set:
    """The ExprRVs that ``annotate`` instructions store under one of ``keys``."""
    return {inst.args["ann_val"] for inst in trace.insts
            if inst.kind.name == "annotate" and inst.args.get("ann_key") in keys}
