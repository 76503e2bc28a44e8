"""Helpers shared by the codegen tests."""

from workbench.ir.stmt import Allocate, For


def allocations(func) -> dict:
    """name -> (buffer, name of the enclosing loop or None) of every Allocate in ``func``."""
    out = {}

    def walk(s, loop):
        if isinstance(s, Allocate):
            out[s.buffer.name] = (s.buffer, loop)
        if isinstance(s, For):
            loop = s.loop_var.name
        for c in (getattr(s, f, None) for f in ("body", "then_case", "else_case")):
            if c is not None:
                walk(c, loop)
        for c in getattr(s, "seq", ()):
            walk(c, loop)

    walk(func.body, None)
    return out
