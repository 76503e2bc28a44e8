"""Exception kinds: user errors (a schedule or a build that cannot be done) vs internal bugs."""

from __future__ import annotations

from typing import Any, Sequence


class WorkbenchError(Exception):
    """Base of the errors a user can act on."""


class ScheduleError(WorkbenchError):
    """An invalid transformation: names the primitive, the argument and the IR involved.

    ``short`` is one line for progress logs; ``str(err)`` is the full message.
    """

    def __init__(
        self, primitive: str, message: str, *, argument: str | None = None, nodes: Sequence[Any] = ()
    ):
        self.primitive = primitive
        self.argument = argument
        self.nodes = tuple(nodes)
        self.short = message.splitlines()[0] if message else ""
        where = f" (argument {argument!r})" if argument else ""
        super().__init__(f"{primitive}{where}: {message}")


class BuildError(WorkbenchError):
    """A function that cannot be compiled for the requested target."""


class TVMScriptError(WorkbenchError):
    """TVMScript text that cannot be read: ``line`` and ``col`` (1-based) point at the cause.

    ``str(err)`` is ``"line 7, col 12: <message>"`` followed by that line of the text and a caret.
    """

    def __init__(self, message: str, line: int, col: int, text: str = ""):
        self.message, self.line, self.col = message, line, col
        lines = text.splitlines()
        source = lines[line - 1] if 0 < line <= len(lines) else ""
        self.source_line = source
        where = f"\n    {source}\n    {' ' * (col - 1)}^" if source.strip() else ""
        super().__init__(f"line {line}, col {col}: {message}{where}")


class TraceFormatError(WorkbenchError, ValueError):
    """Trace JSON that is not a well-formed trace (``Trace.from_json``; also a ``ValueError``)."""


class UnknownInstructionKind(TraceFormatError, KeyError):
    """Trace JSON naming an instruction kind that is not registered (also a ``KeyError``)."""

    def __str__(self) -> str:  # KeyError would print the message's repr
        return str(self.args[0])


class InternalError(Exception):
    """A bug in workbench itself (never the user's fault): please report it."""


class IRVerifyError(WorkbenchError):
    """A function that breaks an IR rule (scoping, buffer use, shapes, dtypes).

    ``problems`` lists every violation found, each naming the block / loop / buffer involved.
    """

    def __init__(self, func_name: str, problems: Sequence[str]):
        self.func_name = func_name
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"function {func_name!r} is not valid IR:\n{lines}")


class OutOfBoundsError(IRVerifyError, ValueError):
    """A function with a buffer access that is provably out of the buffer's shape (at a point
    the function provably reaches): ``wb.create_func`` and ``wb.parse`` raise it. Also a
    ``ValueError``; ``problems`` name block, buffer, index and extent."""

    def __init__(self, func_name: str, problems: Sequence[str]):
        super().__init__(func_name, problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        self.args = (f"function {func_name!r} accesses a buffer out of bounds:\n{lines}",)

    def __reduce__(self):  # picklable (worker processes send errors back)
        return type(self), (self.func_name, self.problems)


class BufferIndexError(WorkbenchError, IndexError):
    """A kernel accessed a buffer outside its shape at run time (the python target, or an llvm
    kernel built with ``check_bounds=True``). Also an ``IndexError``; the message names the
    buffer, the index and the shape. ``buffer``, ``index`` and ``shape`` hold them."""

    def __init__(self, message: str, buffer: str = "", index: tuple = (), shape: tuple = ()):
        self.buffer, self.index, self.shape = buffer, tuple(index), tuple(shape)
        super().__init__(message)

    def __reduce__(self):
        return type(self), (self.args[0], self.buffer, self.index, self.shape)


class DatabaseError(WorkbenchError):
    """A tuning database that cannot be used as it is: not a database, damaged, written by a
    newer workbench, or a file that cannot be opened. The message says what is wrong and what
    to do (often ``workbench db repair PATH --out NEW``)."""


class DatabaseWarning(UserWarning):
    """Some records of a database were damaged and skipped; every intact one is usable."""
