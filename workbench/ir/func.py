"""``PrimFunc``: a named function over buffers (destination passing: outputs are parameters)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping

from .buffer import Buffer
from .expr import Expr, Var
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
    def size_vars(self) -> tuple[Var, ...]:
        """The size variables of the parameters' shapes, in first-appearance order (parameter by
        parameter, dimension by dimension): what a built kernel takes from the arrays."""
        return shape_vars(self.params)

    @property
    def is_symbolic(self) -> bool:
        return any(b.is_symbolic for b in self.params)

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


def shape_vars(buffers) -> tuple[Var, ...]:
    """Variables of the buffers' shapes, in first-appearance order."""
    out: dict[Var, None] = {}
    for b in buffers:
        for s in b.shape:
            if isinstance(s, Expr):
                for n in pre_order(s):
                    if isinstance(n, Var):
                        out.setdefault(n, None)
    return tuple(out)


def size_var_sources(func: "PrimFunc") -> dict[Var, tuple[int, int]]:
    """Each size variable -> (parameter index, dimension) of the first dimension that is exactly
    that variable: where a kernel reads its value. Raises ValueError for one that no parameter
    dimension gives alone (``T.Buffer((n * 2,))`` only: the value cannot be read back)."""
    out: dict[Var, tuple[int, int]] = {}
    for k, b in enumerate(func.params):
        for d, s in enumerate(b.shape):
            if isinstance(s, Var) and s not in out:
                out[s] = (k, d)
    missing = [v.name for v in func.size_vars if v not in out]
    if missing:
        raise ValueError(
            f"{func.name}: size variable(s) {', '.join(missing)} appear only inside shape expressions; "
            f"some parameter dimension must be exactly the variable, so that its value can be read "
            f"from the arrays passed in"
        )
    return out


def check_size_vars(func: "PrimFunc", where: str) -> None:
    """Every size variable of an intermediate buffer's shape (or loop extent) must come from a
    parameter's shape: a kernel learns sizes only from its arguments."""
    known = set(func.size_vars)
    for node in pre_order(func.body):
        if isinstance(node, Block):
            for b in node.alloc_buffers:
                for v in shape_vars((b,)):
                    if v not in known:
                        raise ValueError(
                            f"{where}: intermediate buffer {b.name} has a dimension of size variable "
                            f"{v.name}, which no parameter's shape names; a kernel takes sizes from its "
                            f"arguments' shapes"
                        )
    size_var_sources(func)
