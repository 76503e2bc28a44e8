"""Random variables: handles a schedule gives out for blocks, loops and sampled integers.

A random variable is an identity object: it holds no value itself. The ``Schedule``'s symbol
table maps it to what it stands for in the *current* function (a block name, a loop variable,
an int), so the same handle keeps working after primitives rewrite the tree around it — and a
trace replayed on another schedule maps each of its variables to a fresh one.
"""

from __future__ import annotations


class RV:
    """Base of the random variables; ``prefix`` names them in traces (``b0``, ``l1``, ``v2``)."""

    __slots__ = ("__weakref__",)
    prefix = "?"
    kind = "random variable"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} at 0x{id(self):x}>"


class BlockRV(RV):
    """A block, by its (unique) name."""

    __slots__ = ()
    prefix = "b"
    kind = "block"


class LoopRV(RV):
    """A loop, by its loop variable."""

    __slots__ = ()
    prefix = "l"
    kind = "loop"


class ExprRV(RV):
    """An integer drawn by a sampling instruction (a tile size, a categorical choice …)."""

    __slots__ = ()
    prefix = "v"
    kind = "integer"


#: What a LoopRV may stand for instead of a loop: the compute locations "leave the block at
#: the root of its scope" and "inline the block", drawn by ``sample_compute_location``.
ROOT_MARK, INLINE_MARK = "root", "inline"
#: The primitives (and ``Schedule.get``) that accept such a location where a loop is expected.
LOCATION_PRIMITIVES: set[str] = {"get"}

#: trace-name prefix -> class, to rebuild variables from a serialized trace
RV_CLASSES: dict[str, type[RV]] = {c.prefix: c for c in (BlockRV, LoopRV, ExprRV)}
