"""``MutateParallel``: change how many outer loops the postprocessor fuses into the parallel
loop, by changing the ``meta_schedule.parallel`` limit on the root block.

The limit is not a sampled decision but the value of an ``annotate`` instruction, so this
mutator rewrites that instruction (as TVM does). It replays the trace to learn the loop
extents and only proposes limits that change the plan of some loop nest.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Optional

from ...target import Target
from ...ir.functor import uses_var
from ...ir.stmt import SPATIAL
from ...schedule import Schedule, Trace
from ..analysis import PARALLEL, const_extent
from ..postprocs import without_postproc
from .base import Mutator


class MutateParallel(Mutator):
    """Pick another parallel-extent limit among those giving a different fusion plan."""

    def __init__(self, max_jobs_per_core: int = 16):
        self.max_jobs_per_core = max_jobs_per_core

    @property
    def max_parallel_extent(self) -> int:
        return (self.target or Target.host()).num_cores * self.max_jobs_per_core

    def apply(self, trace: Trace, rng: random.Random) -> Optional[Trace]:
        trace = without_postproc(trace)
        found = [
            k
            for k, inst in enumerate(trace.insts)
            if inst.kind.name == "annotate" and inst.args["ann_key"] == PARALLEL
        ]
        if not found:
            return None
        k = rng.choice(found)
        inst = trace.insts[k]
        sch = Schedule(self._need_func())
        trace.apply_to_schedule(sch)
        prods = parallel_prefix_products(sch, self.max_parallel_extent)
        plans: dict[tuple[int, ...], int] = {}
        for limit in sorted({p for ps in prods for p in ps}):
            if limit <= self.max_parallel_extent:
                plans.setdefault(fused_loop_counts(prods, limit), limit)
        plans.pop(fused_loop_counts(prods, inst.args["ann_val"]), None)
        if not plans:
            return None
        limit = plans[rng.choice(sorted(plans))]
        insts = list(trace.insts)
        insts[k] = dataclasses.replace(inst, args={**inst.args, "ann_val": limit})
        return Trace(insts, trace.base_func)


def parallel_prefix_products(sch: Schedule, limit: int) -> list[list[int]]:
    """For each loop nest under the root: products of the leading spatial loop extents, outer
    to inner, up to the first product reaching ``limit`` (TVM's AnalyzeParallel)."""
    idx = sch.index
    realizes = idx.child_realizes(sch.func.body)
    non_spatial = set()
    for r in realizes:
        for iv, value in zip(r.block.iter_vars, r.iter_values):
            if iv.iter_type != SPATIAL:
                non_spatial.update(
                    l.loop_var for l in idx.loops_above(r.block) if uses_var(value, l.loop_var)
                )
    out = []
    for r in realizes:
        extents: list[int] = []
        for loop in idx.loops_above(r.block):
            extent = const_extent(loop)
            if extent is None or loop.loop_var in non_spatial:
                break
            extents.append(extent)
        if extents:
            prods, p = [], 1
            for e in extents:
                p *= e
                prods.append(p)
                if p >= limit:
                    break
            out.append(prods)
    return out


def fused_loop_counts(prods: list[list[int]], limit: int) -> tuple[int, ...]:
    """How many leading loops of each nest the limit lets the postprocessor fuse."""
    counts = []
    for ps in prods:
        i = sum(1 for p in ps if p <= limit)
        if i > 0 and ps[i - 1] == limit:
            i -= 1
        counts.append(i + 1 if i != len(ps) else i)
    return tuple(counts)
