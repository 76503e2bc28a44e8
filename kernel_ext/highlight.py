"""Syntax-highlighted HTML for IR, traces and generated code, with changed lines marked.

Everything here returns self-contained HTML (inline styles, no stylesheet, no JavaScript), so
the same markup works in JupyterLab, in a notebook exported to HTML, and in the static
fallbacks of the widgets. Highlighting is pygments' (a dependency of IPython); lines are
highlighted one at a time so that a single line can be marked without breaking a span — the
TVMScript-like IR and the trace text have no token spanning lines.
"""

from __future__ import annotations

import difflib
import html
from typing import Iterable, Optional

try:
    from pygments import highlight as _pyg_highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound
except ImportError:  # pragma: no cover - pygments ships with IPython
    _pyg_highlight = None

#: background of a line that a step added or changed
CHANGED_BG = "#fff3b0"
#: background of the line where a step failed
ERROR_BG = "#ffd6d6"

_PRE_STYLE = (
    "font-family: var(--jp-code-font-family, monospace); font-size: 12px; "
    "line-height: 1.45; margin: 0; padding: 6px 8px; background: #fafafa; "
    "border: 1px solid #e0e0e0; border-radius: 4px; overflow-x: auto; "
    "white-space: pre; color: #1f1f1f"
)

_FORMATTER = None


def _formatter():
    global _FORMATTER
    if _FORMATTER is None:
        _FORMATTER = HtmlFormatter(nowrap=True, noclasses=True, style="default")
    return _FORMATTER


def _lexer(language: str):
    try:
        return get_lexer_by_name(language)
    except ClassNotFound:
        return get_lexer_by_name("text")


def highlight_lines(text: str, language: str = "python") -> list[str]:
    """``text``'s lines as highlighted HTML fragments (escaped plain text without pygments)."""
    lines = text.split("\n")
    if _pyg_highlight is None:
        return [html.escape(line) for line in lines]
    lexer, fmt = _lexer(language), _formatter()
    # pygments appends a newline to every fragment; strip it to keep one fragment per line
    return [_pyg_highlight(line, lexer, fmt).rstrip("\n") if line.strip() else "" for line in lines]


def code_html(
    text: str,
    language: str = "python",
    marked: Iterable[int] = (),
    mark_color: str = CHANGED_BG,
    title: Optional[str] = None,
    dim_from: Optional[int] = None,
    bar_color: str = "#e0a800",
) -> str:
    """A ``<pre>`` block of highlighted ``text``; lines whose 0-based index is in ``marked``
    get a coloured background and a bar in the margin; lines from ``dim_from`` on are faded
    (the steps of a trace not yet applied)."""
    marked = set(marked)
    out = []
    for k, frag in enumerate(highlight_lines(text, language)):
        if dim_from is not None and k >= dim_from:
            out.append(f'<span data-dimmed="1" style="display: block; opacity: 0.4;">{frag or " "}</span>')
        elif k in marked:
            out.append(
                f'<span data-changed="1" style="display: block; background: {mark_color}; '
                f'box-shadow: -8px 0 0 {bar_color};">{frag or " "}</span>'
            )
        else:
            out.append(f'<span style="display: block;">{frag or " "}</span>')
    head = f'<div style="font-weight: 600; margin: 4px 0;">{html.escape(title)}</div>' if title else ""
    return f'{head}<pre class="wb-code" style="{_PRE_STYLE}">{"".join(out)}</pre>'


def _opcodes(before: str, after: str) -> list[tuple]:
    """A line diff that ignores indentation: a loop wrapped around a block re-indents the
    block's lines, but only the loop lines are news to the reader."""
    a = [line.strip() for line in before.split("\n")]
    b = [line.strip() for line in after.split("\n")]
    return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()


def changed_lines(before: str, after: str) -> list[int]:
    """0-based indices of the lines of ``after`` that are new or different from ``before``."""
    out: list[int] = []
    for tag, _i1, _i2, j1, j2 in _opcodes(before, after):
        if tag in ("replace", "insert"):
            out.extend(range(j1, j2))
    return out


def removed_count(before: str, after: str) -> int:
    """How many lines of ``before`` are gone from ``after`` (shown as a note: the marked view
    of ``after`` cannot show deleted lines)."""
    return sum(i2 - i1 for tag, i1, i2, _j1, _j2 in _opcodes(before, after) if tag in ("replace", "delete"))


def note_html(text: str, color: str = "#555") -> str:
    return f'<div style="color: {color}; margin: 4px 0;">{html.escape(text)}</div>'


def error_html(title: str, message: str) -> str:
    """A red box with a one-line title and a preformatted message (a ScheduleError, say)."""
    return (
        f'<div class="wb-error" style="border-left: 4px solid #c62828; background: {ERROR_BG}; '
        f'padding: 6px 10px; margin: 4px 0; border-radius: 3px;">'
        f'<div style="font-weight: 600; color: #8e0000;">{html.escape(title)}</div>'
        f'<pre style="white-space: pre-wrap; margin: 4px 0 0 0; font-size: 12px;">'
        f"{html.escape(message)}</pre></div>"
    )
