"""Rich HTML display of engine objects, registered with IPython's display formatter.

The engine classes know nothing of notebooks (they render plain text through ``__str__`` /
``_repr_pretty_``); this module teaches IPython an HTML form for each of them through
``formatter.for_type`` (:mod:`kernel_ext.formatters`), so ``%load_ext kernel_ext`` is the only
switch and the engine stays free of IPython. Each renderer is also a plain function
(``func_html(func)`` …) usable anywhere; the tuning results' are in :mod:`kernel_ext.results`.
"""

from __future__ import annotations

import html
import math
from typing import Any

import workbench as wb

from .highlight import code_html

_SAMPLING_BG = "#e3f2fd"
_LANGUAGE = {
    "llvm": "llvm",
    "asm": "gas",
    "python": "python",
    "cuda": "cuda",
    "c": "c",
    "emulator": "python",
    "ptx": "text",
}


def _header(title: str, detail: str = "") -> str:
    extra = f' <span style="color: #666; font-weight: normal;">{html.escape(detail)}</span>' if detail else ""
    return f'<div style="font-weight: 600; margin: 4px 0;">{html.escape(title)}{extra}</div>'


def _details(summary: str, body: str, open_: bool = False) -> str:
    return (
        f'<details{" open" if open_ else ""}><summary style="cursor: pointer;">'
        f"{html.escape(summary)}</summary>{body}</details>"
    )


def func_html(func: "wb.PrimFunc") -> str:
    """The function as highlighted TVMScript-like text."""
    return code_html(str(func))


def trace_html(trace: "wb.Trace") -> str:
    """The trace as highlighted Python; sampling instructions are tinted, pinned ones say so."""
    lines = trace.as_python().split("\n") if len(trace) else []
    sampling = {k for k, inst in enumerate(trace) if inst.kind.is_sampling}
    pinned = [k for k, inst in enumerate(trace) if inst.pinned]
    text = "\n".join(line + ("  # pinned" if k in pinned else "") for k, line in enumerate(lines))
    n_sampling = len(sampling)
    detail = f"{len(trace)} instructions, {n_sampling} sampling" + (
        f", {len(pinned)} pinned" if pinned else ""
    )
    if not lines:
        return _header("Trace", "empty")
    return _header("Trace", detail) + code_html(
        text, marked=sampling, mark_color=_SAMPLING_BG, bar_color="#64b5f6"
    )


def schedule_html(sch: "wb.Schedule") -> str:
    """The scheduled function, with its trace folded underneath."""
    head = _header(f"Schedule of {sch.func.name}", f"{len(sch.trace)} instructions")
    body = func_html(sch.func)
    if len(sch.trace):
        body += _details("trace", trace_html(sch.trace))
    return head + body


def kernel_html(kernel: "wb.Kernel") -> str:
    """The kernel's signature, then each generated source folded (LLVM IR, assembly …)."""
    parts = [_header(repr(kernel))]
    for kind in kernel.source_kinds:
        text = kernel.source(kind)
        lines = text.count("\n") + 1
        parts.append(
            _details(f"{kind} source ({lines} lines)", code_html(text, language=_LANGUAGE.get(kind, "text")))
        )
    return "".join(parts)


def fmt_seconds(s: Any) -> str:
    """A latency for people: ``1.23 ms`` (``failed`` for inf, ``—`` for None)."""
    if s is None:
        return "—"
    s = float(s)
    if not math.isfinite(s):
        return "failed"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s:.3g} s"


__all__ = [
    "func_html",
    "trace_html",
    "schedule_html",
    "kernel_html",
    "fmt_seconds",
]
