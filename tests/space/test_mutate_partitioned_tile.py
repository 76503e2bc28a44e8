"""MutateTileSize on sample_partitioned_tile decisions: the product stays the extent, the
tiles from partition_pos inward stay a multiple of innerpart_factor, and the result replays."""

import math
import random

import workbench as wb
from workbench.space import MutateTileSize
from workbench.space.mutators.mutate_tile_size import move_partitioned_factor

TEXT = """
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi] * T.float32(2)
"""


def test_mutate_partitioned_tile_keeps_its_rule():
    sch = wb.Schedule(wb.parse(TEXT), seed=0)
    (i,) = sch.get_loops("B")
    sch.split(i, factors=sch.sample_partitioned_tile(i, n=3, partition_pos=1, innerpart_factor=8))
    trace = sch.trace
    rng = random.Random(0)
    seen = set()
    for _ in range(30):
        new = MutateTileSize().apply(trace, rng)
        (inst,) = [x for x in new if x.kind.name == "sample_partitioned_tile"]
        d = inst.decision
        assert math.prod(d) == 64 and math.prod(d[1:]) % 8 == 0
        seen.add(tuple(d))
        replayed = wb.Schedule(wb.parse(TEXT))
        new.apply_to_schedule(replayed)
    assert len(seen) > 3


def test_move_partitioned_factor_gives_up_when_nothing_moves():
    args = {"partition_pos": 1, "innerpart_factor": 8}
    assert move_partitioned_factor([1, 8], args, random.Random(0)) is None
