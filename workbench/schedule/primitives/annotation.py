"""``annotate`` / ``unannotate``: key-value hints on a block or a loop for later passes
(``"pragma_auto_unroll_max_step"``, ``"meta_schedule.tiling_structure"``, …)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import ScheduleError
from ...ir.stmt import Block
from ..instruction import schedule_primitive
from ..rv import BlockRV, ExprRV, LoopRV

if TYPE_CHECKING:
    from ..schedule import Schedule

_PLAIN = (bool, int, float, str)


def _describe(node: Any) -> str:
    return f"block {node.name!r}" if isinstance(node, Block) else f"loop {node.loop_var.name!r}"


def _check_key(primitive: str, key: Any) -> None:
    if not isinstance(key, str) or not key:
        raise ScheduleError(primitive, f"the key must be a non-empty string, got {key!r}", argument="ann_key")


def _plain(value: Any) -> Any:
    """``value`` as an immutable annotation value (lists become tuples, dicts are copied), or
    ``_BAD`` when it holds anything but ints, floats, strings, bools, lists and string-keyed
    dicts of them (what TVM accepts, and what trace JSON and TVMScript can both write)."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        return _BAD if any(v is _BAD for v in items) else tuple(items)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        entries = {k: _plain(v) for k, v in value.items()}
        return _BAD if any(v is _BAD for v in entries.values()) else entries
    return _BAD


_BAD = object()


def _value(sch, value: Any) -> Any:
    """The stored annotation value: an ExprRV's current int, or a plain value (``_plain``)."""
    if isinstance(value, ExprRV):
        return sch.get(value)
    plain = _plain(value)
    if plain is _BAD:
        raise ScheduleError(
            "annotate",
            "annotation values are ints, floats, strings, bools, lists and string-keyed dicts of "
            f"them, or ExprRVs; got {value!r}",
            argument="ann_val",
        )
    return plain


@schedule_primitive("annotate", tvm_inputs=("block_or_loop", "ann_val"), tvm_attrs=("ann_key",))
def annotate(
    sch: Schedule,
    block_or_loop: BlockRV | LoopRV,
    ann_key: str,
    ann_val: ExprRV | int | float | str | bool | list | dict,
) -> None:
    """Set annotation ``ann_key`` of a block or loop to ``ann_val`` (an ExprRV is stored as
    its sampled value; a list or a dict, nested too, as TVM allows: ``{"arr": [0, 0], "key": 3}``).

    Before / after ``annotate(i, "pragma_unroll", 1)``::

        for i in range(8):                 for i in range(8, annotations={"pragma_unroll": 1}):
    """
    _check_key("annotate", ann_key)
    node = sch.get(block_or_loop)
    value = _value(sch, ann_val)
    sch.replace(node, node.with_(annotations={**node.annotations, ann_key: value}))


@schedule_primitive("unannotate", tvm_inputs=("block_or_loop",), tvm_attrs=("ann_key",))
def unannotate(sch: Schedule, block_or_loop: BlockRV | LoopRV, ann_key: str) -> None:
    """Remove annotation ``ann_key`` from a block or loop (it must be there)."""
    _check_key("unannotate", ann_key)
    node = sch.get(block_or_loop)
    if ann_key not in node.annotations:
        have = ", ".join(map(repr, node.annotations)) or "none"
        raise ScheduleError(
            "unannotate",
            f"{_describe(node)} has no annotation {ann_key!r} (it has: {have})",
            argument="ann_key",
            nodes=[node],
        )
    rest = {k: v for k, v in node.annotations.items() if k != ann_key}
    sch.replace(node, node.with_(annotations=rest))
