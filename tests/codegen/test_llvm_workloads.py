"""LLVM backend on real workloads: every workload unscheduled and hand-scheduled (split,
reorder, fuse, parallel, vectorize, unroll) against its numpy reference, GMM with a
register-tiled schedule, and random loop-primitive sequences compiled."""

import random

import numpy as np
import pytest

from workbench import workloads
from workbench.codegen.build import build
from workbench.errors import ScheduleError
from workbench.ir.stmt import SPATIAL
from workbench.schedule import Schedule
from workbench.testing import check_numeric

TARGET = "llvm -num-cores=2"


def hand_schedule(func, vector=8):
    """A generic CPU schedule for every block: fuse the two outer spatial loops and run them in
    parallel, split the innermost spatial loop by ``vector`` (a tail predicate when it does not
    divide) and vectorize it under the reduction loops, unroll a short reduction loop.
    Steps a block cannot take (too few loops, an extent of 1) are skipped."""
    sch = Schedule(func, seed=0)
    done = set()
    for block in sch.get_child_blocks(sch.get_block("root")):
        loops = sch.get_loops(block)
        n_spatial = sum(iv.iter_type == SPATIAL for iv in sch.get(block).iter_vars)
        spatial, reduce = loops[:n_spatial], loops[n_spatial:]

        def attempt(name, fn):
            try:
                out = fn()
            except ScheduleError:
                return None
            done.add(name)
            return out

        if len(spatial) >= 3:
            attempt("fuse", lambda: sch.fuse(spatial[0], spatial[1]))
            spatial = sch.get_loops(block)[: n_spatial - 1]
        if len(spatial) >= 2:
            attempt("parallel", lambda: sch.parallel(spatial[0]))
        if spatial and sch.get(spatial[-1]).extent.value > 1:
            parts = attempt("split", lambda: sch.split(spatial[-1], [None, vector]))
            if parts:
                if reduce:
                    attempt("reorder", lambda: sch.reorder(parts[0], *reduce, parts[1]))
                attempt("vectorize", lambda: sch.vectorize(parts[1]))
        short = [r for r in reduce if 1 < sch.get(r).extent.value <= 8]
        if short:
            attempt("unroll", lambda: sch.unroll(short[-1]))
    return sch, done


def check(func_or_sch, name, **shape):
    check_numeric(func_or_sch, name, target=TARGET, rtol=1e-4, atol=1e-4, **shape)


@pytest.mark.parametrize("name", workloads.names())
def test_workload_small_shapes(name):
    shape = workloads.small(name)
    func = workloads.get(name, **shape)
    check(func, name, **shape)
    sch, done = hand_schedule(func)
    check(sch, name, **shape)
    assert {"split", "vectorize"} <= done


def test_hand_schedules_cover_every_loop_primitive():
    used = set()
    for name in workloads.names():
        used |= hand_schedule(workloads.get(name, **workloads.small(name)))[1]
    assert used == {"fuse", "parallel", "split", "reorder", "vectorize", "unroll"}


def gmm_register_tiled(n, rows=4, cols=32):
    """GMM tiled for registers: parallel row tiles, k outside an unrolled row x vector tile."""
    func = workloads.get("GMM", b=1, n=n, m=n, k=n)
    sch = Schedule(func)
    blk = sch.get_block(sch.get(sch.get_child_blocks(sch.get_block("root"))[0]).name)
    b, i, j, k = sch.get_loops(blk)
    io, ii = sch.split(i, [None, rows])
    jo, ji = sch.split(j, [None, cols])
    sch.reorder(io, jo, k, ii, ji)
    sch.parallel(sch.fuse(b, io))
    sch.unroll(ii)
    sch.vectorize(ji)
    return sch


def test_gmm_128_register_tiled_matches_numpy():
    sch = gmm_register_tiled(128)
    check(sch, "GMM", b=1, n=128, m=128, k=128)
    kernel = build(sch, TARGET)
    assert "<32 x float>" in kernel.source("llvm-raw")
    assert "wb_parallel" in kernel.source("llvm")


# random loop-primitive sequences ------------------------------------------------------------

SEQUENCES = 70  # per workload: a few hundred compiled schedules in all
RANDOM_SHAPES = {"GMM": dict(b=1, n=12, m=8, k=10), "C1D": workloads.small("C1D"), "SFM": dict(m=6, n=10)}


def random_step(sch, rng):
    block = rng.choice(sch.get_child_blocks(sch.get_block("root")))
    loops = sch.get_loops(block)
    loop = rng.choice(loops)
    op = rng.choice(["split", "split", "fuse", "reorder", "parallel", "vectorize", "unroll"])
    if op == "split":
        extent = sch.get(loop).extent.value
        factors = rng.choice(
            [
                [None, rng.randint(1, extent + 1)],
                [rng.randint(1, extent), None],
                [rng.randint(1, 3), None, rng.randint(1, 3)],
            ]
        )
        return sch.split(loop, factors)
    if op == "fuse":
        start = rng.randrange(len(loops))
        return sch.fuse(*loops[start : start + rng.choice([2, 3])])
    if op == "reorder":
        return sch.reorder(*rng.sample(loops, min(len(loops), rng.randint(2, 4))))
    return getattr(sch, op)(loop)


@pytest.mark.parametrize("name", sorted(RANDOM_SHAPES))
def test_random_loop_schedules_compiled(name):
    """The compiled kernel computes what the python target computes for the same schedule
    (this isolates code generation from the schedule and lowering, tested elsewhere)."""
    shape = RANDOM_SHAPES[name]
    func = workloads.get(name, **shape)
    args = workloads.random_args(name, seed=0, **shape)
    kinds = set()
    for seed in range(SEQUENCES):
        rng = random.Random(seed)
        sch = Schedule(func, seed=seed)
        for _ in range(rng.randint(3, 8)):
            try:
                random_step(sch, rng)
            except ScheduleError:
                pass
        kinds |= {loop.kind.value for loop in sch.func.loops()}
        expected = [a.copy() for a in args]
        build(sch, "python")(*expected)
        compiled = [a.copy() for a in args]
        build(sch, TARGET)(*compiled)
        np.testing.assert_allclose(compiled[-1], expected[-1], rtol=1e-5, atol=1e-5, err_msg=str(sch.trace))
    assert {"parallel", "vectorized", "unrolled"} <= kinds


@pytest.mark.slow
@pytest.mark.parametrize("name", workloads.names())
def test_workload_paper_shapes(name):
    shape = {"d": 4} if name == "C3D" else {}  # C3D at a reduced depth
    func = workloads.get(name, **shape)
    args = workloads.random_args(name, seed=0, **shape)
    expected = workloads.reference(name, **shape)(*args[:-1])
    for scheduled in (func, hand_schedule(func, vector=16)[0]):
        args[-1][...] = 0
        build(scheduled, TARGET)(*args)
        np.testing.assert_allclose(args[-1], expected, rtol=1e-3, atol=1e-3)
