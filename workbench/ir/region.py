"""Access-region analysis of blocks (placeholder: point regions; replaced by the arith work)."""
from __future__ import annotations

from .expr import BufferLoad, IntImm
from .functor import pre_order
from .stmt import BufferRegion, BufferStore, Range


def infer_access_regions(body, init=None):
    """(reads, writes) of a block body: one BufferRegion per buffer, in first-use order."""
    reads, writes = {}, {}
    for s in (init, body):
        if s is None:
            continue
        for n in pre_order(s):
            if isinstance(n, BufferLoad):
                reads.setdefault(n.buffer, BufferRegion(n.buffer, tuple(Range(i, IntImm(1)) for i in n.indices)))
            elif isinstance(n, BufferStore):
                writes.setdefault(n.buffer, BufferRegion(n.buffer, tuple(Range(i, IntImm(1)) for i in n.indices)))
    return tuple(reads.values()), tuple(writes.values())
