"""What every source-printing backend shares: indented lines, fresh names, flat indices.

The python target, the GPU emulator and the C-family printers each write a program as lines of
text; they name its loops and buffers after the IR's names, made unique and valid identifiers,
and index every buffer as a flat array (row-major, ``Buffer.strides()``).
"""

from __future__ import annotations

import re
from typing import Sequence

from ..ir import expr as E
from ..ir.buffer import Buffer


def flat_index(buf: Buffer, indices: Sequence[E.Expr]) -> E.Expr:
    """``Σ indices[d] * strides[d]`` (not simplified: the printers simplify it under their loop
    ranges, where split / fuse patterns fold)."""
    flat: E.Expr = E.IntImm(0)
    for idx, stride in zip(indices, buf.strides()):
        flat = flat + idx * stride
    return flat


class SourceWriter:
    """Lines of source indented by ``INDENT`` per level, and names unique in ``taken``."""

    INDENT = "    "
    #: the name of an IR name with no identifier character at all
    EMPTY_NAME = "_"

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.taken: set[str] = set()

    def emit(self, depth: int, line: str) -> None:
        self.lines.append(self.INDENT * depth + line)

    def reserved(self, name: str) -> bool:
        """Whether ``name`` may not be given out (taken, or a word of the language)."""
        return name in self.taken

    def fresh(self, name: str) -> str:
        """``name`` as an identifier not given out yet (``name_1``, ``name_2`` ... on a clash)."""
        base = re.sub(r"\W", "_", name) or self.EMPTY_NAME
        if base[0].isdigit():
            base = "_" + base
        out, n = base, 0
        while self.reserved(out):
            n += 1
            out = f"{base}_{n}"
        self.taken.add(out)
        return out
