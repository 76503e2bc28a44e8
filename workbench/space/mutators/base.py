"""``Mutator``: propose a neighbour of a trace in the design space.

The evolutionary search keeps good traces and asks mutators for variations: a mutator picks
one sampling instruction and returns a copy of the trace with a new decision for it (or None
when it finds nothing to change). It never changes a *pinned* decision, and it drops the
postprocessing part of the trace (the postprocessors run again on the replayed candidate)::

    class HalveFirstTile(Mutator):
        def apply(self, trace, rng):
            for inst in trace.insts:
                if inst.kind.name == "sample_perfect_tile" and not inst.pinned:
                    new = ...  # from trace.decisions[inst], a list of factors
                    return trace.with_decision(inst, new, remove_postproc=True)
            return None

Kinds may be named in TVM's spelling too: ``inst.kind.matches("SamplePerfectTile")``. Only
sampling instructions have decisions (a ``split``'s factors are the random variables of the
``sample_perfect_tile`` before it), and ``trace.decisions`` is a read-only snapshot.
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
        from . import default_mutators  # a cycle: the package's __init__ imports this module

        return default_mutators(target_kind(kind))

    @classmethod
    def named(cls, name: str, **kwargs: Any) -> "Mutator":
        """An instance of the registered mutator ``name`` (``"mutate_tile_size"``,
        ``"MutateTileSize"``); a name TVM does not have either says so."""
        why = not_a_mutator(name)
        if why is not None:
            raise KeyError(why)
        return super().named(name, **kwargs)

    def _need_func(self) -> PrimFunc:
        if self.func is None:
            raise RuntimeError(
                f"{type(self).__name__} replays traces: call "
                f"initialize_with_func(func) first (the space generator does)"
            )
        return self.func


#: mutators that course material names but workbench does not have, and why (none now:
#: ``MutateAutoInline``, which TVM lacks, exists here; see ``mutate_auto_inline``)
_NOT_IN_TVM: dict[str, str] = {}


class NoSuchMutator(ImportError):
    """A mutator that course material names and workbench does not have. An ``ImportError``,
    so that ``from workbench.space import MutateX`` shows this message too: Python
    replaces an ``AttributeError`` there by its generic "cannot import name"."""


def builtin_mutators() -> list[str]:
    """The class names of workbench's own mutators."""
    return sorted(
        c.__name__ for c in Mutator._registry.values() if c.__module__.startswith(__package__ + ".")
    )


def not_a_mutator(name: str) -> Optional[str]:
    """For a mutator name TVM does not have: why, and the mutators that exist; else None."""
    why = _NOT_IN_TVM.get(name.replace("_", "").lower())
    return None if why is None else f"{why}. workbench's mutators: {', '.join(builtin_mutators())}"


def free_sampling(trace: Trace, kind: str) -> Iterator[Instruction]:
    """The unpinned sampling instructions of ``kind`` (workbench's or TVM's spelling:
    ``"sample_perfect_tile"`` or ``"SamplePerfectTile"``) in the design-space part of
    ``trace``."""
    for inst in trace.insts:
        if inst.kind.name == "enter_postproc":
            return
        if inst.kind.matches(kind) and not inst.pinned:
            yield inst


def annotated_with(trace: Trace, keys: tuple[str, ...]) -> set:
    """The ExprRVs that ``annotate`` instructions store under one of ``keys``."""
    return {
        inst.args["ann_val"]
        for inst in trace.insts
        if inst.kind.name == "annotate" and inst.args.get("ann_key") in keys
    }
