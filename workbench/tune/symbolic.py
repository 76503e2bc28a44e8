"""Tuning a function of symbolic shape at a representative size (``wb.tune(..., shape_hint=)``).

The design space cannot be drawn on the symbolic function itself: ``sample_perfect_tile`` needs
the extent it factors. As TVM's MetaSchedule does, the workbench tunes a representative shape:
:func:`specialize` substitutes the hinted sizes for the size variables, the search measures
candidates of that static function, and :func:`generalize_trace` carries each measured trace
back to the symbolic function, where its records are stored (keyed by the symbolic function's
structural hash, so ``db.best(symbolic_func)`` finds them, with the hint in ``meta``).

How a trace generalizes: it is replayed on the symbolic function instruction by instruction.
A ``sample_perfect_tile`` of a loop whose extent is symbolic there is not replayed: its outputs
become the constants it decided at the hinted size. A ``split`` of such a loop by constant
factors gets ``None`` for its outer factor: ``[4, 8, 16]`` decided for ``n = 512`` becomes
``[None, 8, 16]``, whose outer extent is ``ceildiv(n, 128)`` with the tail predicate
``... < n``. Every other instruction replays as it is; one that does not apply to the symbolic
function (a primitive that needs a constant extent) makes the record fail with the reason, so
``best`` never picks it. The stored trace is the symbolic schedule's own trace, so
``rec.schedule()`` replays it on the symbolic function directly.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ..errors import ScheduleError
from ..ir.arith import simplify
from ..ir.expr import IntImm
from ..ir.func import PrimFunc
from ..ir.functor import pre_order, replace_buffers, substitute
from ..ir.stmt import Block, For
from ..schedule.instruction import iter_rvs, map_rvs
from ..schedule.schedule import Schedule
from ..schedule.trace import Trace

#: primitives whose outputs are tile sizes drawn from a loop's extent
_TILE_SAMPLERS = ("sample_perfect_tile", "sample_partitioned_tile")


def check_shape_hint(func: PrimFunc, shape_hint: Mapping[str, int]) -> dict[str, int]:
    """The hint for ``func``'s size variables (each named, each a positive int)."""
    names = [v.name for v in func.size_vars]
    missing = [n for n in names if n not in shape_hint]
    if missing:
        raise ValueError(
            f"shape_hint gives no size for {', '.join(missing)} of {func.name} (size variables: "
            f"{', '.join(names)}): the search measures at one representative size of each"
        )
    out = {}
    for n in names:
        value = shape_hint[n]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"shape_hint[{n!r}] must be a positive int, got {value!r}")
        out[n] = value
    return out


def specialize(func: PrimFunc, sizes: Mapping[str, int]) -> PrimFunc:
    """``func`` with its size variables replaced by ``sizes`` (name -> int): a static function
    of the same structure (buffer shapes, loop extents, iterator domains become constants)."""
    sizes = check_shape_hint(func, sizes)
    vmap = {v: IntImm(sizes[v.name], v.dtype) for v in func.size_vars}
    buffers = list(func.params)
    for node in pre_order(func.body):
        if isinstance(node, Block):
            buffers += list(node.alloc_buffers)
    bmap = {}
    for buf in buffers:
        if buf.is_symbolic and buf not in bmap:
            shape = tuple(
                s if isinstance(s, int) else _const(simplify(substitute(s, vmap)), buf.name)
                for s in buf.shape
            )
            bmap[buf] = dataclasses.replace(buf, shape=shape)
    body = replace_buffers(substitute(func.body, vmap), bmap)
    out = dataclasses.replace(func, params=tuple(bmap.get(b, b) for b in func.params), body=body)
    for loop in out.loops():
        if not isinstance(loop.extent, IntImm):
            extent = simplify(loop.extent)
            if not isinstance(extent, IntImm):
                raise ValueError(f"specialize: loop {loop.loop_var.name} keeps the extent {loop.extent}")
    return out


def _const(e: Any, name: str) -> int:
    if isinstance(e, int):
        return e
    if isinstance(e, IntImm):
        return e.value
    raise ValueError(f"specialize: buffer {name} keeps the dimension {e}")


def generalize_trace(trace: Trace, func: PrimFunc) -> Trace:
    """``trace`` (drawn on ``func`` specialized to some sizes) carried over to the symbolic
    ``func``: the trace of the schedule it gives there (see the module notes). Raises
    ScheduleError (with the instruction's ``step``) when some instruction does not apply."""
    sch = Schedule(func)
    rv_map: dict = {}

    def lookup(rv):
        try:
            return rv_map[rv]
        except KeyError:
            raise ValueError(f"trace uses a random variable ({rv!r}) it never defines") from None

    for step, inst in enumerate(trace.insts):
        try:
            args = {k: map_rvs(v, lookup) for k, v in inst.args.items()}
            name = inst.kind.name
            if name in _TILE_SAMPLERS and _symbolic_loop(sch, args.get("loop")):
                # the tile sizes decided at the hinted size, as constants
                rv_map.update(zip(inst.outputs, list(inst.decision)))
                continue
            if name == "split" and _symbolic_loop(sch, args.get("loop")):
                factors = list(args["factors"])
                if None not in factors:
                    factors[0] = None  # the outer loop covers whatever n is
                args["factors"] = factors
            result = sch._apply(inst.kind, args, inst.decision, pinned=inst.pinned)
        except ScheduleError as exc:
            exc.step = step  # type: ignore[attr-defined]
            raise
        rv_map.update(zip(inst.outputs, list(iter_rvs(result))))
    return sch.trace


def _symbolic_loop(sch: Schedule, loop: Any) -> bool:
    if loop is None or isinstance(loop, (int, str)):
        return False
    node = sch.get(loop)
    return isinstance(node, For) and not isinstance(node.extent, IntImm)


def hint_text(sizes: Mapping[str, int]) -> str:
    """``n=512, m=64``: how a summary names the size it measured at."""
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


__all__ = ["specialize", "generalize_trace", "check_shape_hint", "hint_text"]
