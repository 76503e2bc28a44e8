"""``AutoInline``: fold cheap elementwise stages into the stages next to them.

An elementwise block (bias add, batch-norm, activation) costs a full pass over memory when it
has its own loop nest; inlining it into its consumer (``compute_inline``) or its single producer
(``reverse_compute_inline``) removes the intermediate buffer. The rule is deterministic: it
samples nothing, it only decides from the program -- unless ``sample_unsure`` is on: where
inlining is valid but not clearly better (see :meth:`AutoInline.unsure`), the rule then draws
the choice (``sample_categorical``, candidates ``[0, 1]``: keep, inline) and records
``compute_inline_if(block, v)``, which inlines only when the drawn value is 1. The mutator
``MutateAutoInline`` flips that decision. TVM has neither: in TVM the rule decides alone, and
only stages it refuses are left to ``RandomComputeLocation`` (whose locations include
"inline").

With ``sample_unsure`` the trace of CBR reads::

    v7 = sch.sample_categorical(candidates=[0, 1], probs=[0.5, 0.5], decision=1)
    sch.compute_inline_if(block=b2, inline=v7)

Before / after on ``bias_add -> relu`` (``bias_add`` inlined into its consumer)::

    for i, j: bias_add[i, j] = C[i, j] + b[j]       for i, j: relu[i, j] = max(C[i, j] + b[j], 0)
    for i, j: relu[i, j] = max(bias_add[i, j], 0)
"""

from __future__ import annotations

from typing import Sequence

from ...errors import ScheduleError
from ...schedule import BlockRV, ExprRV, Schedule
from ...schedule.instruction import schedule_primitive
from ...schedule.primitives.block_scope import consumers, producers
from ...schedule.primitives.inline import compute_inline_func
from ..analysis import INLINE_RULE, has_if_then_else, has_op, is_spatial, is_spatial_func, read_write_pattern
from .base import ScheduleRule


class AutoInline(ScheduleRule):
    """Inline a block into its consumers, or into its single producer (TVM semantics).

    ``into_consumer`` / ``into_producer``: the directions allowed. Unless the whole function is
    elementwise, a block is kept when it calls one of ``disallow_op`` (``exp`` on CPU: it is
    worth computing once), has a branch (``disallow_if_then_else``: padding), or reads with an
    index map that is not injective / ordered (a transpose). ``inline_const_tensor`` inlines
    blocks that read nothing (constants) regardless.

    ``sample_unsure`` (workbench only; off by default, as in TVM): a block the rule would inline
    into its consumers but for which inlining is a trade-off (:meth:`unsure`) is inlined or
    kept by a sampled decision, drawn with probability ``inline_prob`` of inlining.
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
        sample_unsure: bool = False,
        inline_prob: float = 0.5,
    ):
        self.into_producer = into_producer
        self.into_consumer = into_consumer
        self.inline_const_tensor = inline_const_tensor
        self.disallow_if_then_else = disallow_if_then_else
        self.require_injective = require_injective
        self.require_ordered = require_ordered
        self.disallow_op = tuple(disallow_op)
        if not 0.0 < inline_prob < 1.0:
            raise ValueError(f"inline_prob must be strictly between 0 and 1, got {inline_prob!r}")
        self.sample_unsure = sample_unsure
        self.inline_prob = inline_prob

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
        if self.into_consumer and consumers(idx, node):
            if self.sample_unsure and self.unsure(sch, node):
                if _valid_inline(sch, node):
                    keep, inline = 1.0 - self.inline_prob, self.inline_prob
                    flag = sch.sample_categorical(candidates=[0, 1], probs=[keep, inline])
                    sch.compute_inline_if(block, flag)
                    return [sch]
            elif _try(sch.compute_inline, block):
                return [sch]
        if self.into_producer:
            found = producers(idx, node)
            if len(found) == 1 and is_spatial(found[0]) and _try(sch.reverse_compute_inline, block):
                return [sch]
        return [sch]

    @staticmethod
    def unsure(sch: Schedule, node) -> bool:
        """Whether inlining ``node`` into its consumers is a trade-off rather than a plain gain:
        it has several consumers (each would recompute it), a consumer that is not elementwise
        (a reduction would recompute it in its reduction loop), or it reads the output of a
        reduction (kept, it is the epilogue ``MultiLevelTiling`` can fuse into the reduction's
        tile; inlined, the stages after it are)."""
        idx = sch.index
        found = consumers(idx, node)
        if len(found) > 1 or not all(is_spatial(c) for c in found):
            return True
        return any(not is_spatial(p) for p in producers(idx, node))

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


def _valid_inline(sch: Schedule, node) -> bool:
    try:
        compute_inline_func(sch.func, node)
    except ScheduleError:
        return False
    return True


# tvm_inputs left out: TVM has no such instruction, so a trace holding it is not exported to TVM
@schedule_primitive("compute_inline_if")
def compute_inline_if(sch: Schedule, block: BlockRV, inline: ExprRV) -> None:
    """``compute_inline(block)`` when ``inline`` (an ExprRV, the decision of a
    ``sample_categorical`` over ``[0, 1]``) is 1; nothing when it is 0.

    Workbench only: it makes "inline or keep" a decision of the trace that a mutator can flip
    and a replay re-draws, where TVM's ``AutoInline`` decides alone. The rules are
    ``compute_inline``'s (a kept block is not checked)::

        v3 = sch.sample_categorical(candidates=[0, 1], probs=[0.5, 0.5], decision=1)
        sch.compute_inline_if(block=b2, inline=v3)
    """
    value = sch.get(inline)
    if value not in (0, 1):
        raise ScheduleError(
            "compute_inline_if", f"inline must be 0 (keep) or 1 (inline), got {value!r}", argument="inline"
        )
    if value:
        sch.func = compute_inline_func(sch.func, sch.get(block), "compute_inline_if")


def _try(primitive, block: BlockRV) -> bool:
    """Apply an inlining primitive if its preconditions hold; a primitive that refuses leaves
    the schedule untouched and records nothing, so trying is the precondition check."""
    try:
        primitive(block)
    except ScheduleError:
        return False
    return True
