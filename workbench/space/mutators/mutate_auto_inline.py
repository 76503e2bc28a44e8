"""``MutateAutoInline``: flip one sampled inline decision (keep <-> inline) of an intermediate
stage.

TVM has no such mutator: its ``AutoInline`` rule decides alone. Here ``AutoInline(...,
sample_unsure=True)`` turns the cases where inlining is a trade-off into a
``sample_categorical`` over ``[0, 1]`` consumed by ``compute_inline_if``; this mutator picks one
of those decisions and flips it (the course day's "toggles inline decisions for intermediate
stages")::

    v7 = sch.sample_categorical(candidates=[0, 1], probs=[0.5, 0.5], decision=1)   # inline
    sch.compute_inline_if(block=b2, inline=v7)
    # mutated: decision=0, the stage keeps its own loop nest and buffer
"""

from __future__ import annotations

import random
from typing import Optional

from ...schedule import Instruction, Trace
from ..postprocs import without_postproc
from .base import Mutator, free_sampling


def inline_decisions(trace: Trace) -> list[Instruction]:
    """The unpinned ``sample_categorical`` instructions whose value a ``compute_inline_if``
    consumes, in trace order."""
    flags = {inst.args["inline"] for inst in trace.insts if inst.kind.name == "compute_inline_if"}
    return [i for i in free_sampling(trace, "sample_categorical") if i.outputs[0] in flags]


class MutateAutoInline(Mutator):
    """Flip one unpinned inline decision; None when the trace has none (or only pinned ones,
    or ones whose other outcome has probability 0)."""

    def apply(self, trace: Trace, rng: random.Random) -> Optional[Trace]:
        found = [i for i in inline_decisions(trace) if i.args["probs"][1 - i.decision] > 0]
        if not found:
            return None
        inst = rng.choice(found)
        return without_postproc(trace).with_decision(inst, 1 - inst.decision)
