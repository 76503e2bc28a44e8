"""``MutateComputeLocation``: move a stage to another valid compute location — another loop,
the root of its scope, or inlined — by re-drawing a ``sample_compute_location`` decision.

Which locations are valid depends on the program at that point of the trace, so the mutator
replays the trace up to the sampling instruction and asks the same analysis the sampler uses.
"""

from __future__ import annotations

import random
from typing import Optional

from ...errors import ScheduleError
from ...schedule import Schedule, Trace
from ...schedule.primitives.compute_location import compute_location_candidates
from ..postprocs import without_postproc
from .base import Mutator, free_sampling


class MutateComputeLocation(Mutator):
    """Re-draw one unpinned compute-location decision among the other valid locations."""

    def apply(self, trace: Trace, rng: random.Random) -> Optional[Trace]:
        trace = without_postproc(trace)
        found = list(free_sampling(trace, "sample_compute_location"))
        rng.shuffle(found)
        for inst in found:
            choices = self.other_locations(trace, inst)
            if choices:
                return trace.with_decision(inst, rng.choice(choices))
        return None

    def other_locations(self, trace: Trace, inst) -> list[int]:
        """The valid decisions for ``inst`` other than its current one."""
        k = trace.insts.index(inst)
        sch = Schedule(self._need_func())
        try:
            rvs = Trace(trace.insts[:k]).apply_to_schedule(sch)
        except ScheduleError:
            return []
        block = sch.get(rvs[inst.args["block"]])
        candidates, _ = compute_location_candidates(sch.func, block)
        return [c for c in candidates if c != inst.decision]
