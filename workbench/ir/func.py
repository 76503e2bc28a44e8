"""``PrimFunc``: a named function over buffers (destination passing: outputs are parameters)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping

from .buffer import Buffer
from .functor import pre_order
from .stmt import Block, BlockRealize, For, Stmt


@dataclass(frozen=True, eq=False)
class PrimFunc:
    name: str
    params: tuple[Buffer, ...]
    body: Stmt  # BlockRealize of the block "root"
    attrs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def buffer_map(self) -> dict[str, Buffer]:
        """Parameter name -> buffer."""
        return {b.name: b for b in self.params}

    @property
    def root(self) -> Block:
        assert isinstance(self.body, BlockRealize)
        return self.body.block

    def with_body(self, body: Stmt) -> "PrimFunc":
        return replace(self, body=body)

    def blocks(self) -> Iterator[Block]:
        """All blocks, pre-order (the root first)."""
        for node in pre_order(self.body):
            if isinstance(node, Block):
                yield node

    def loops(self) -> Iterator[For]:
        for node in pre_order(self.body):
            if isinstance(node, For):
                yield node

    def block(self, name: str) -> Block:
        for b in self.blocks():
            if b.name == name:
                return b
        raise KeyError(
            f"no block named {name!r} in {self.name}; blocks: {', '.join(b.name for b in self.blocks())}"
        )

    def __str__(self) -> str:
        from .printer import func_str  # a cycle: printer imports this module

        return func_str(self)

    def _repr_pretty_(self, p, cycle):  # IPython plain-text display
        p.text(str(self))

    def script(self) -> str:
        return str(self)

    def structural_hash(self) -> str:
        from .structural import structural_hash  # a cycle: structural imports this module

        return structural_hash(self)
