"""What every workbench widget shares: an ipywidgets tree plus a static rendering.

A widget here is a plain Python object that *holds* its ipywidgets container in ``.widget``
(the state lives in the object, the container is only the view). Displaying it sends one MIME
bundle with three renderings of the same state: the live widget view (JupyterLab, VS Code),
static HTML (``_repr_html_``: exported notebooks, front ends without widgets) and text
(terminals). Each front end picks the richest it understands.
"""

from __future__ import annotations

import abc
from typing import Any


class WorkbenchWidget(abc.ABC):
    """Base class: subclasses set ``self.widget`` and implement ``_repr_html_`` and ``text``."""

    widget: Any

    @abc.abstractmethod
    def _repr_html_(self) -> str:
        """Static HTML of the current state (no widget needed to read it)."""

    @abc.abstractmethod
    def text(self) -> str:
        """Plain-text rendering (what a terminal shows)."""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(self.widget._repr_mimebundle_())
        bundle["text/html"] = self._repr_html_()
        bundle["text/plain"] = self.text()
        return bundle

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"
