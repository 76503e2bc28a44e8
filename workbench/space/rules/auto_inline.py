"""``AutoInline``: fold cheap elementwise stages into the stages next to them.

An elementwise block (bias add, batch-norm, activation) costs a full pass over memory when it
has its own loop nest; inlining it into its consumer (``compute_inline``) or its single producer
(``reverse_compute_inline``) removes the intermediate buffer. The rule is deterministic: it
samples nothing, it only decides from the program.

Before / after on ``bias_add -> relu`` (``bias_add`` inlined into its consumer)::

    for i, j: bias_add[i, j] = C[i, j] + b[j]       for i, j: relu[i, j] = max(C[i, j] + b[j], 0)
    for i, j: relu[i, j] = max(bias_add[i, j], 0)
"""

from __future__ import annotations

from typing import Sequence

from ...errors import ScheduleError
from ...schedule import BlockRV, Schedule
from ...schedule.primitives.block_scope import consumers, producers
from ..analysis import INLINE_RULE, has_if_then_else, has_op, is_spatial, is_spatial_func, read_write_pattern
from .base import ScheduleRule


class AutoInline(ScheduleRule):
    """Inline a block into its consumers, or into its single producer (TVM semantics).

    ``into_consumer`` / ``into_producer``: the directions allowed. Unless the whole function is
    elementwise, a block is kept when it calls one of ``disallow_op`` (``exp`` on CPU: it is
    worth computing once), has a branch (``disallow_if_then_else``: padding), or reads with an
    index map that is not injective / ordered (a transpose). ``inline_const_tensor`` inlines
    blocks that read nothing (constants) regardless.
    """

    def __init__(
        self,
        into_producer: bool = False,
        into_consumer: bool = True,
        inline_const_tensor: bool = True,
        disallow_if_then_else: bool = True,
        require_injective: bool = True,
        require_ordered: bool = True,
        disallow_op: Sequence[str] = ("exp",),
    ):
        self.into_producer = into_producer
        self.into_consumer = into_consumer
        self.inline_const_tensor = inline_const_tensor
        self.disallow_if_then_else = disallow_if_then_else
        self.require_injective = require_injective
        self.require_ordered = require_ordered
        self.disallow_op = tuple(disallow_op)

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        node = sch.get(block)
        if sch.index.scope(node) is None or len(node.writes) != 1:
            return [sch]
        idx = sch.index
        if self.inline_const_tensor and not node.reads and consumers(idx, node):
            if _try(sch.compute_inline, block):
                return [sch]
        if not self._allowed(sch, node):
            return [sch]
        if self.into_consumer and consumers(idx, node) and _try(sch.compute_inline, block):
            return [sch]
        if self.into_producer:
            found = producers(idx, node)
            if len(found) == 1 and is_spatial(found[0]) and _try(sch.reverse_compute_inline, block):
                return [sch]
        return [sch]

    def _allowed(self, sch: Schedule, node) -> bool:
        if node.annotations.get(INLINE_RULE) == "disable":
            return False
        if is_spatial_func(sch.func):
            return True  # an all-elementwise function: inline freely
        realize = sch.index.realizes[node.name]
        if has_op(realize, self.disallow_op):
            return False
        if self.disallow_if_then_else and has_if_then_else(realize):
            return False
        if self.require_injective or self.require_ordered:
            for read in node.reads:
                _, _, injective, ordered = read_write_pattern(read, node.writes[0])
                if (self.require_injective and not injective) or (self.require_ordered and not ordered):
                    return False
        return True


def _try(primitive, block: BlockRV) -> bool:
    """Apply an inlining primitive if its preconditions hold; a primitive that refuses leaves
    the schedule untouched and records nothing, so trying is the precondition check."""
    try:
        primitive(block)
    except ScheduleError:
        return False
    return True
