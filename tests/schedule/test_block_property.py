"""Seeded random sequences of loop and block primitives on GMM, CBR and SFM (tiny shapes).

Every sequence must still compute the numpy reference (python target; llvm for every fourth
sequence), its trace must round-trip through JSON and Python, every rejected step must leave
the schedule untouched, and a location drawn by ``sample_compute_location`` must always be
accepted by ``compute_at``. Primitives of families that are registered (cache, reduction) join
the mix when present.
"""

import random

import pytest

from workbench import workloads
from workbench.errors import ScheduleError
from workbench.schedule import REGISTRY, Schedule
from workbench.testing import check_numeric, check_trace_roundtrip

SHAPES = {
    "GMM": dict(b=1, n=6, m=6, k=4),
    "CBR": dict(n=1, h=5, w=5, ci=2, co=3, kernel=3, stride=1, padding=1),
    "SFM": dict(m=4, n=6),
}
SEQUENCES = 40  # per workload
LLVM_EVERY = 4  # build every n-th sequence with llvm too
MAX_LOOPS = 8  # the python target nests one Python block per loop


def _loop_step(sch, rng, block, loops):
    op = rng.choice(["split", "fuse", "reorder", "parallel", "vectorize", "unroll"])
    loop = rng.choice(loops)
    if op == "split" and len(loops) < MAX_LOOPS:
        factors = rng.choice([[None, 2], [2, None], [None, 3]])
        return lambda: sch.split(loop, factors)
    if op == "fuse":
        start = rng.randrange(len(loops))
        return lambda: sch.fuse(*loops[start : start + 2])
    if op in ("parallel", "vectorize", "unroll"):
        return lambda: getattr(sch, op)(loop)
    chosen = rng.sample(loops, min(len(loops), 2))
    return lambda: sch.reorder(*chosen)


def _block_step(sch, rng, block, blocks):
    ops = ["compute_at", "reverse_compute_at", "compute_inline", "reverse_compute_inline", "sample_location"]
    ops += [op for op in ("cache_read", "cache_write", "rfactor", "decompose_reduction") if op in REGISTRY]
    op = rng.choice(ops)
    if op in ("compute_at", "reverse_compute_at"):
        related = sch.get_consumers(block) if op == "compute_at" else sch.get_producers(block)
        other = rng.choice(related or blocks)
        loops = sch.get_loops(other)
        if not loops:
            return None
        loop, keep = rng.choice(loops), rng.random() < 0.5
        return lambda: getattr(sch, op)(block, loop, preserve_unit_loops=keep)
    if op in ("compute_inline", "reverse_compute_inline"):
        return lambda: getattr(sch, op)(block)
    if op == "sample_location":

        def sampled():
            loc = sch.sample_compute_location(block)
            try:
                sch.compute_at(block, loc, preserve_unit_loops=True)
            except ScheduleError as err:
                raise AssertionError(f"a sampled location was rejected: {err}") from err
            return "sampled"

        return sampled
    node = sch.get(block)
    if op in ("cache_read", "cache_write"):
        regions = node.reads if op == "cache_read" else node.writes
        if not regions:
            return None
        k, scope = rng.randrange(len(regions)), rng.choice(["global", "local"])
        return lambda: getattr(sch, op)(block, k, scope)
    loops = sch.get_loops(block)
    if not loops:
        return None
    loop = rng.choice(loops)
    if op == "rfactor":
        return lambda: sch.rfactor(loop, 0)
    return lambda: sch.decompose_reduction(block, loop)


def random_step(sch, rng):
    """Queries, then a thunk applying one random primitive (which may be rejected)."""
    blocks = sch.get_child_blocks(sch.get_block("root"))
    block = rng.choice(blocks)
    if rng.random() < 0.5:
        loops = sch.get_loops(block)
        return _loop_step(sch, rng, block, loops) if loops else None
    return _block_step(sch, rng, block, blocks)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_random_block_schedules(name):
    func = workloads.get(name, **SHAPES[name])
    applied, rejected, block_steps = 0, 0, 0
    for seed in range(SEQUENCES):
        rng = random.Random(seed)
        sch = Schedule(func, seed=seed)
        for _ in range(rng.randint(3, 8)):
            step = random_step(sch, rng)
            if step is None:
                continue
            before = (sch.func, len(sch.trace), dict(sch.symbols), len(sch.history))
            try:
                result = step()
            except ScheduleError:
                rejected += 1
                assert (sch.func, len(sch.trace), dict(sch.symbols), len(sch.history)) == before
                continue
            applied += 1
            block_steps += result == "sampled" or sch.trace[-1].kind.name not in (
                "split",
                "fuse",
                "reorder",
                "parallel",
                "vectorize",
                "unroll",
            )
        check_numeric(sch, name, **SHAPES[name])
        if seed % LLVM_EVERY == 0:
            check_numeric(sch, name, target="llvm", **SHAPES[name])
        check_trace_roundtrip(sch)
    # the generator must produce enough valid steps, block primitives among them
    assert applied > rejected and block_steps > SEQUENCES
