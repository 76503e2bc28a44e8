"""``MutateThreadBinding``: draw another thread count for a loop ``AutoBind`` bound.

``AutoBind`` splits a fused loop by a ``sample_categorical`` factor and binds the inner part to
``threadIdx.x``; this mutator picks one such sample and draws a different candidate (TVM's)."""

from __future__ import annotations

import random
from typing import Optional

from ...schedule import Trace
from .base import Mutator, free_sampling
from .mutate_tile_size import redraw_categorical


class MutateThreadBinding(Mutator):
    """Change the sampled extent of one ``threadIdx.x`` loop."""

    def apply(self, trace: Trace, rng: random.Random) -> Optional[Trace]:
        samples = {inst.outputs[0]: inst for inst in free_sampling(trace, "sample_categorical")}
        split_by = {}  # inner loop of a split [None, sampled] -> the sample
        found = []
        for inst in trace.insts:
            name = inst.kind.name
            if name == "split":
                factors = inst.args["factors"]
                if len(factors) == 2 and factors[0] is None and factors[1] in samples:
                    split_by[inst.outputs[1]] = samples[factors[1]]
            elif (
                name == "bind" and inst.args["thread_axis"] == "threadIdx.x" and inst.args["loop"] in split_by
            ):
                sample = split_by[inst.args["loop"]]
                if len(sample.args["candidates"]) > 1 and sample not in found:
                    found.append(sample)
        if not found:
            return None
        return redraw_categorical(trace, rng.choice(found), rng)
