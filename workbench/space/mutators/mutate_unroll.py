"""``MutateUnroll``: draw another maximal unroll step for the root block (another candidate of
the ``sample_categorical`` that ``ParallelizeVectorizeUnroll`` annotated)."""

from __future__ import annotations

import random
from typing import Optional

from ...schedule import Trace
from ..analysis import UNROLL_EXPLICIT, UNROLL_IMPLICIT
from .base import Mutator, annotated_with, free_sampling
from .mutate_tile_size import redraw_categorical


class MutateUnroll(Mutator):
    """Change one unroll-step decision to a different candidate."""

    def apply(self, trace: Trace, rng: random.Random) -> Optional[Trace]:
        unroll = annotated_with(trace, (UNROLL_EXPLICIT, UNROLL_IMPLICIT))
        found = [
            i
            for i in free_sampling(trace, "sample_categorical")
            if i.outputs[0] in unroll and len(i.args["candidates"]) > 1
        ]
        if not found:
            return None
        return redraw_categorical(trace, rng.choice(found), rng)
