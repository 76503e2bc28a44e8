"""Sampling instructions: draw integers that parameterize later transformations.

Each takes ``decision=None``: absent, the decision is drawn from ``sch.rng``; given (a replayed
or mutated trace), it is validated and used as is. Either way it is recorded on the
instruction.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional

from ...errors import ScheduleError
from ..instruction import schedule_primitive
from ..rv import ExprRV, LoopRV
from .loops import const_extent, loop_name

if TYPE_CHECKING:
    from ..schedule import Schedule


#: the most tiles ``sample_perfect_tile`` draws (a decision is a list of n ints: a huge n
#: would only exhaust memory; TVM's deepest tiling structures use 5)
MAX_TILE_PARTS = 64


def _prime_exponents(n: int) -> dict[int, int]:
    out: dict[int, int] = {}
    p = 2
    while p * p <= n:
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
        p += 1
    if n > 1:
        out[n] = out.get(n, 0) + 1
    return out


def _count_tilings(n: int, parts: int) -> int:
    """Ordered ways to write ``n`` as a product of ``parts`` positive factors."""
    return math.prod(math.comb(e + parts - 1, parts - 1) for e in _prime_exponents(n).values())


def _draw_tiling(rng, n: int, parts: int) -> list[int]:
    """A uniformly random ordered factorization of ``n`` into ``parts`` factors: each prime's
    exponent is split by a uniform stars-and-bars composition, independently."""
    out = [1] * parts
    for p, e in _prime_exponents(n).items():
        bars = sorted(rng.sample(range(e + parts - 1), parts - 1))
        prev = -1
        for slot, b in enumerate(bars + [e + parts - 1]):
            out[slot] *= p ** (b - prev - 1)
            prev = b
    return out


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _check_tiling(
    decision: Any, n: int, extent: int, max_inner: Optional[int], loop, primitive: str = "sample_perfect_tile"
) -> list[int]:
    if (
        not isinstance(decision, (list, tuple))
        or len(decision) != n
        or not all(isinstance(f, int) and not isinstance(f, bool) and f > 0 for f in decision)
    ):
        raise ScheduleError(
            primitive,
            f"decision {decision!r} is not a list of {n} positive ints",
            argument="decision",
        )
    if math.prod(decision) != extent:
        raise ScheduleError(
            primitive,
            f"decision {list(decision)} multiplies to "
            f"{math.prod(decision)}, not the extent {extent} of {loop_name(loop)}",
            argument="decision",
            nodes=[loop],
        )
    if n > 1 and max_inner is not None and decision[-1] > max_inner:
        raise ScheduleError(
            primitive,
            f"decision {list(decision)}: innermost factor "
            f"{decision[-1]} exceeds max_innermost_factor={max_inner}",
            argument="decision",
            nodes=[loop],
        )
    return list(decision)


@schedule_primitive(
    "sample_perfect_tile", sampling=True, tvm_inputs=("loop",), tvm_attrs=("n", "max_innermost_factor")
)
def sample_perfect_tile(
    sch: Schedule,
    loop: LoopRV,
    n: int,
    max_innermost_factor: Optional[int] = 16,
    decision: Optional[list[int]] = None,
) -> list[ExprRV]:
    """Draw ``n`` tile sizes whose product is the loop's extent (a perfect tiling).

    Uniform over all ordered factorizations whose innermost factor is at most
    ``max_innermost_factor`` (None or -1: no limit). Returns one ExprRV per factor, outer to
    inner, to pass to ``split``::

        v0, v1 = sch.sample_perfect_tile(loop=l0, n=2, max_innermost_factor=16, decision=[8, 16])
        l2, l3 = sch.split(loop=l0, factors=[v0, v1])

    A loop of symbolic extent ``n`` has no factorization to draw from: refused (TVM 0.27 returns
    no usable factors there). Split it by a constant (``factors=[None, 16]``) or tune with
    ``shape_hint``, which draws the tiles at a representative size.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_TILE_PARTS:
        raise ScheduleError(
            "sample_perfect_tile", f"n must be an int from 1 to {MAX_TILE_PARTS}, got {n!r}", argument="n"
        )
    max_inner = None if max_innermost_factor in (None, -1) else max_innermost_factor
    if max_inner is not None and (not isinstance(max_inner, int) or max_inner < 1):
        raise ScheduleError(
            "sample_perfect_tile",
            f"max_innermost_factor must be a positive int, -1 or None, got {max_innermost_factor!r}",
            argument="max_innermost_factor",
        )
    node = sch.get(loop)
    extent = const_extent(
        "sample_perfect_tile",
        node,
        advice=f"extent {node.extent} is not known until the kernel is called: split by a constant "
        f"factor instead (factors=[None, f]), or tune with shape_hint",
    )
    if decision is None:
        if n == 1:
            decision = [extent]
        else:
            # the innermost factor is drawn with weight = number of completions, so the whole
            # factorization is uniform over the allowed ones
            inner = [d for d in _divisors(extent) if max_inner is None or d <= max_inner]
            weights = [_count_tilings(extent // d, n - 1) for d in inner]
            d = sch.rng.choices(inner, weights=weights)[0]
            decision = _draw_tiling(sch.rng, extent // d, n - 1) + [d]
    decision = _check_tiling(decision, n, extent, max_inner, node)
    # a sampling primitive returns (outputs, decision); the registered method returns the outputs
    return [sch.new_rv(ExprRV, f) for f in decision], decision  # type: ignore[return-value]


@schedule_primitive("sample_categorical", sampling=True, tvm_inputs=(), tvm_attrs=("candidates", "probs"))
def sample_categorical(
    sch: Schedule, candidates: list[int], probs: list[float], decision: Optional[int] = None
) -> ExprRV:
    """Draw one of ``candidates`` with probabilities ``probs`` (normalized); the decision is
    the chosen index::

        v0 = sch.sample_categorical(candidates=[0, 16, 64], probs=[0.5, 0.25, 0.25], decision=1)
    """
    if (
        not isinstance(candidates, (list, tuple))
        or not candidates
        or not all(isinstance(c, int) and not isinstance(c, bool) for c in candidates)
    ):
        raise ScheduleError(
            "sample_categorical",
            f"candidates must be a non-empty list of ints, got {candidates!r}",
            argument="candidates",
        )
    if (
        not isinstance(probs, (list, tuple))
        or len(probs) != len(candidates)
        or not all(isinstance(p, (int, float)) and p >= 0 for p in probs)
        or not 0 < sum(probs) < math.inf
    ):
        raise ScheduleError(
            "sample_categorical",
            f"probs must be {len(candidates)} non-negative "
            f"numbers with a positive sum (and finite), got {probs!r}",
            argument="probs",
        )
    if decision is None:
        decision = sch.rng.choices(range(len(candidates)), weights=probs)[0]
    if isinstance(decision, bool) or not isinstance(decision, int) or not 0 <= decision < len(candidates):
        raise ScheduleError(
            "sample_categorical",
            f"decision {decision!r} is not an index into the {len(candidates)} candidates",
            argument="decision",
        )
    if probs[decision] == 0:
        raise ScheduleError(
            "sample_categorical",
            f"decision {decision} picks candidate {candidates[decision]}, which has probability 0",
            argument="decision",
        )
    # a sampling primitive returns (outputs, decision); the registered method returns the outputs
    return sch.new_rv(ExprRV, candidates[decision]), decision  # type: ignore[return-value]


def _check_int(value: Any, argument: str, low: int, high: Optional[int] = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ScheduleError(
            "sample_partitioned_tile", f"{argument} must be an int {bound}, got {value!r}", argument=argument
        )
    return value


@schedule_primitive(
    "sample_partitioned_tile",
    sampling=True,
    tvm_inputs=("loop",),
    tvm_attrs=("n", "partition_pos", "innerpart_factor"),
)
def sample_partitioned_tile(
    sch: Schedule,
    loop: LoopRV,
    n: int,
    partition_pos: int = 0,
    innerpart_factor: int = 1,
    decision: Optional[list[int]] = None,
) -> list[ExprRV]:
    """Draw ``n`` tile sizes whose product is the loop's extent and whose tiles from
    ``partition_pos`` inward multiply to a multiple of ``innerpart_factor`` (TVM's tensor-core
    tiling keeps the inner part a whole number of MMA tiles this way). Uniform over those
    tilings. Returns one ExprRV per factor, outer to inner, to pass to ``split``::

        v0, v1, v2 = sch.sample_partitioned_tile(loop=l0, n=3, partition_pos=1,
                                                 innerpart_factor=8, decision=[4, 2, 16])

    Rules: ``1 <= n <= 64``, ``0 <= partition_pos < n``, ``innerpart_factor >= 1``; the loop
    has a constant extent that ``innerpart_factor`` divides; a given decision is ``n`` positive
    ints meeting both products. TVM samples ``[-1, 1, ...]`` for a loop it cannot tile and
    silently repairs a decision that no longer fits; here both are refused, like
    ``sample_perfect_tile`` refuses them, so that a replayed trace never differs from its text.
    """
    n = _check_int(n, "n", 1, MAX_TILE_PARTS)
    partition_pos = _check_int(partition_pos, "partition_pos", 0, n - 1)
    innerpart_factor = _check_int(innerpart_factor, "innerpart_factor", 1)
    node = sch.get(loop)
    extent = const_extent(
        "sample_partitioned_tile",
        node,
        advice=f"extent {node.extent} is not known until the kernel is called: tune with shape_hint",
    )
    if extent % innerpart_factor:
        raise ScheduleError(
            "sample_partitioned_tile",
            f"innerpart_factor {innerpart_factor} does not divide the extent {extent} of {loop_name(node)}",
            argument="innerpart_factor",
            nodes=[node],
        )
    if decision is None:
        while True:  # the tilings that pass are a fixed share of all of them: TVM's rejection
            decision = _draw_tiling(sch.rng, extent, n)
            if math.prod(decision[partition_pos:]) % innerpart_factor == 0:
                break
    decision = _check_tiling(decision, n, extent, None, node, "sample_partitioned_tile")
    inner = math.prod(decision[partition_pos:])
    if inner % innerpart_factor:
        raise ScheduleError(
            "sample_partitioned_tile",
            f"decision {decision}: the tiles from position {partition_pos} multiply to {inner}, "
            f"not a multiple of innerpart_factor={innerpart_factor}",
            argument="decision",
            nodes=[node],
        )
    # a sampling primitive returns (outputs, decision); the registered method returns the outputs
    return [sch.new_rv(ExprRV, f) for f in decision], decision  # type: ignore[return-value]
