"""``MutateTileSize``: move a factor from one tile of a ``sample_perfect_tile`` decision to
another, keeping the product (the loop extent). ``[8, 4, 2] -> [2, 4, 8]`` moves a factor 4
from the outer tile to the innermost one (which must stay within ``max_innermost_factor``).
On GPU it also re-draws the vector length of a cooperative fetch.

``sample_partitioned_tile`` decisions are mutated the same way, keeping the tiles from
``partition_pos`` inward a multiple of ``innerpart_factor`` (TVM 0.27 leaves them alone: its
mutator looks only for SamplePerfectTile, so a partitioned tiling would never change once
drawn)."""

from __future__ import annotations

import math
import random
from typing import Optional

from ...schedule import Instruction, Trace
from ..analysis import COOPERATIVE_FETCH
from ..postprocs import without_postproc
from .base import Mutator, annotated_with, free_sampling


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


class MutateTileSize(Mutator):
    """Mutate one tiling decision (or one cooperative-fetch vector length)."""

    def apply(self, trace: Trace, rng: random.Random) -> Optional[Trace]:
        tiles = [
            i
            for kind in ("sample_perfect_tile", "sample_partitioned_tile")
            for i in free_sampling(trace, kind)
            if len(i.decision) >= 2 and math.prod(i.decision) >= 2
        ]
        fetch = annotated_with(trace, (COOPERATIVE_FETCH,))
        vectors = [
            i
            for i in free_sampling(trace, "sample_categorical")
            if i.outputs[0] in fetch and len(i.args["candidates"]) > 1
        ]
        if not tiles and not vectors:
            return None
        inst = rng.choice(tiles + vectors)
        if inst in vectors:
            return redraw_categorical(trace, inst, rng)
        if inst.kind.name == "sample_partitioned_tile":
            new = move_partitioned_factor(list(inst.decision), inst.args, rng)
        else:
            new = move_factor(list(inst.decision), inst.args["max_innermost_factor"], rng)
        return None if new is None else without_postproc(trace).with_decision(inst, new)


def move_factor(tiles: list[int], max_inner: Optional[int], rng: random.Random) -> Optional[list[int]]:
    """Divide a tile ``x`` by one of its divisors and multiply another tile ``y`` by it (TVM's
    rule: ``y`` innermost only while it stays within ``max_inner``)."""
    n = len(tiles)
    limit = None if max_inner in (None, -1) else max_inner
    while True:
        x = rng.randrange(n)
        if tiles[x] <= 1:
            continue
        y = rng.randrange(n - 1)
        y += y >= x
        factors = divisors(tiles[x])[1:]
        if y == n - 1 and limit is not None:
            factors = [f for f in factors if f * tiles[y] <= limit]
            if not factors:
                if n <= 2:
                    return None
                continue  # this move would overflow the innermost tile: draw another one
        f = rng.choice(factors)
        tiles[x] //= f
        tiles[y] *= f
        return tiles


#: moves tried on a partitioned tiling before giving up (each fails only when it breaks the
#: multiple-of-innerpart_factor rule; one succeeds unless every factor is pinned by that rule)
PARTITIONED_TRIES = 16


def move_partitioned_factor(tiles: list[int], args, rng: random.Random) -> Optional[list[int]]:
    """``move_factor`` for a ``sample_partitioned_tile`` decision: a move is kept only if the
    tiles from ``partition_pos`` inward still multiply to a multiple of ``innerpart_factor``."""
    pos, factor = args["partition_pos"], args["innerpart_factor"]
    for _ in range(PARTITIONED_TRIES):
        new = move_factor(list(tiles), None, rng)
        if new is not None and new != tiles and math.prod(new[pos:]) % factor == 0:
            return new
    return None


def redraw_categorical(trace: Trace, inst: Instruction, rng: random.Random) -> Optional[Trace]:
    """``inst`` with another candidate, drawn with the instruction's probabilities (None when
    no other candidate has a positive probability)."""
    others = [k for k in range(len(inst.args["candidates"])) if k != inst.decision]
    weights = [inst.args["probs"][k] for k in others]
    if sum(weights) <= 0:
        return None
    choice = rng.choices(others, weights=weights)[0]
    return without_postproc(trace).with_decision(inst, choice)
