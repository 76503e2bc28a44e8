"""``IRModule``: several named :class:`PrimFunc`, as TVM's ``@I.ir_module`` holds them.

``wb.parse`` returns one when a module defines more than one function (one function stays a
``PrimFunc``). The module is immutable: :meth:`with_func` gives a new one. Its text is TVMScript
(``@I.ir_module class Module:`` with one ``@T.prim_func`` method per function) that
``wb.parse`` reads back.
"""

from __future__ import annotations

from typing import Iterator, Mapping

from .func import PrimFunc
from .printer import module_str


class IRModule(Mapping[str, PrimFunc]):
    """Function name -> ``PrimFunc``, in definition order. ``mod["main"]``, ``len(mod)``,
    ``for name in mod``, ``mod.items()``; ``"main"`` is the function a :class:`Schedule` of the
    module starts on (or the only one)."""

    def __init__(self, funcs: Mapping[str, PrimFunc]):
        for name, f in funcs.items():
            if not isinstance(f, PrimFunc):
                raise TypeError(f"IRModule holds PrimFuncs; {name!r} is a {type(f).__name__}")
            if f.name != name:
                raise ValueError(f"IRModule: function {f.name!r} is stored under another name, {name!r}")
        if not funcs:
            raise ValueError("an IRModule holds at least one function")
        self._funcs = dict(funcs)

    @staticmethod
    def from_funcs(*funcs: PrimFunc) -> "IRModule":
        return IRModule({f.name: f for f in funcs})

    def __getitem__(self, name: str) -> PrimFunc:
        try:
            return self._funcs[name]
        except KeyError:
            known = ", ".join(self._funcs)
            raise KeyError(f"no function named {name!r} in the module; functions: {known}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._funcs)

    def __len__(self) -> int:
        return len(self._funcs)

    # identity semantics, as every IR node (structural equality is structural_equal)
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def with_func(self, func: PrimFunc) -> "IRModule":
        """A module with ``func`` replacing (or added beside) the function of its name."""
        return IRModule({**self._funcs, func.name: func})

    @property
    def default_name(self) -> str:
        """The function a schedule works on first: ``"main"``, else the first one."""
        return "main" if "main" in self._funcs else next(iter(self._funcs))

    def __str__(self) -> str:
        return module_str(self)

    def script(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"<IRModule: {', '.join(self._funcs)}>"

    def _repr_pretty_(self, p, cycle):  # IPython plain-text display
        p.text(str(self))

    def structural_hash(self) -> str:
        from .structural import structural_hash  # a cycle: structural imports this module

        return structural_hash(self)
