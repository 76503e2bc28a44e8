"""The HTML renderers of :mod:`kernel_ext.display` and :mod:`kernel_ext.results`, registered
with (and removed from) an IPython shell's display formatter by ``%load_ext`` / ``%unload_ext``."""

from __future__ import annotations

from typing import Any, Callable

import workbench as wb

from . import results
from .display import func_html, kernel_html, schedule_html, trace_html


def renderers() -> list[tuple[type, Callable[[Any], str]]]:
    """The (class, renderer) pairs :func:`register` installs: the IR and schedule objects, then
    the tuning results (``Database``, ``Record``, ``TuneSummary``)."""
    return [
        (wb.PrimFunc, func_html),
        (wb.Schedule, schedule_html),
        (wb.Trace, trace_html),
        (wb.Kernel, kernel_html),
    ] + results.renderers()


def register(ip: Any) -> None:
    """Register the HTML renderers with an IPython shell's display formatter."""
    fmt = ip.display_formatter.formatters["text/html"]
    for cls, fn in renderers():
        fmt.for_type(cls, fn)


def unregister(ip: Any) -> None:
    """Remove them: the engine objects display as plain text again."""
    fmt = ip.display_formatter.formatters["text/html"]
    for cls, _fn in renderers():
        fmt.type_printers.pop(cls, None)


__all__ = ["renderers", "register", "unregister"]
