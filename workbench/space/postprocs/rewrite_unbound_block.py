"""``RewriteUnboundBlock``: bind every block that still runs outside GPU threads.

A candidate may reach the postprocessors with blocks that no rule bound (a space without
``AutoBind``, a copy stage added by a postprocessor, a replayed hand-written trace). Each
top-level block not under both a ``blockIdx`` and a ``threadIdx`` loop gets its leading spatial
loops fused and split into ``[blockIdx.x, threadIdx.x]``, with as many threads as the target
allows and the loop offers (TVM's postprocessor; no sampling, so the trace stays replayable).
"""

from __future__ import annotations

from ...ir.stmt import BlockRealize, For, ForKind, IfThenElse, SeqStmt
from ...schedule import Schedule
from ..plugin import gpu_limit
from ..rules.auto_bind import bind_block_thread_idx
from .base import Postproc, Rejected


def unbound_blocks(sch: Schedule) -> list[str]:
    """Names of the blocks, not nested in other blocks below the root, that some path from the
    root reaches without passing both a blockIdx and a threadIdx loop."""
    found: list[str] = []

    def visit(stmt, n_block: int, n_thread: int) -> None:
        if isinstance(stmt, SeqStmt):
            for s in stmt.seq:
                visit(s, n_block, n_thread)
        elif isinstance(stmt, BlockRealize):
            found.append(stmt.block.name)
        elif isinstance(stmt, For):
            tag = (stmt.thread_tag or "") if stmt.kind == ForKind.THREAD_BINDING else ""
            n_block += tag.startswith("blockIdx")
            n_thread += tag.startswith("threadIdx")
            if n_block == 0 or n_thread == 0:
                visit(stmt.body, n_block, n_thread)
        elif isinstance(stmt, IfThenElse):
            visit(stmt.then_case, n_block, n_thread)
            if stmt.else_case is not None:
                visit(stmt.else_case, n_block, n_thread)

    visit(sch.func.root.body, 0, 0)
    return found


class RewriteUnboundBlock(Postproc):
    """Bind unbound blocks to ``blockIdx.x`` x ``threadIdx.x`` (TVM's)."""

    def __init__(self, max_threadblocks: int = 256):
        self.max_threadblocks = max_threadblocks

    def apply(self, sch: Schedule) -> bool:
        limit = gpu_limit(self.target, "max-threads-per-block")
        for name in unbound_blocks(sch):
            try:
                bind_block_thread_idx(
                    sch, sch.get_block(name), self.max_threadblocks, limit, lambda extent: min(limit, extent)
                )
            except ValueError as exc:
                raise Rejected(str(exc)) from None
        return True
