"""The Jupyter layer of workbench: ``%load_ext kernel_ext``.

Loading the extension registers

* ``%%schedule FUNC`` — run a cell with ``sch`` bound to a fresh schedule, see the stepper;
* ``%tune NAME --trials N`` — tune with the live convergence plot;
* ``%%tvmscript [NAME]`` — read a cell of TVMScript into a function (``wb.parse``: never run);
* rich HTML display of ``PrimFunc``, ``Schedule``, ``Trace``, ``Kernel`` and tuning results.

The widgets are plain classes usable without the magics: :class:`LoopNestStepper`,
:class:`TraceGraph`, :class:`DecisionTree`, :class:`ConvergencePlot`, :class:`PinPanel`.
This package depends on ``workbench``; the engine never imports it.
"""

try:
    import IPython  # noqa: F401
    import ipywidgets  # noqa: F401
    import plotly  # noqa: F401
    import anywidget  # noqa: F401  (plotly's FigureWidget needs it)
    import graphviz  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        f'kernel_ext needs the jupyter extra ({exc.name} is missing): pip install -e ".[jupyter]"'
    ) from exc

from . import formatters
from .magics import WorkbenchMagics
from .widgets import (
    ConvergencePlot,
    DecisionTree,
    LoopNestStepper,
    ModelGraph,
    PinPanel,
    TraceGraph,
    tune_with_plot,
)

__all__ = [
    "load_ipython_extension",
    "unload_ipython_extension",
    "LoopNestStepper",
    "TraceGraph",
    "ModelGraph",
    "DecisionTree",
    "ConvergencePlot",
    "PinPanel",
    "tune_with_plot",
]


def load_ipython_extension(ip) -> None:
    """Called by ``%load_ext kernel_ext``: register the magics and the HTML display."""
    # libgomp's waiting is bounded by the LLVM backend itself (workbench.codegen.llvm.runtime:
    # GOMP_SPINCOUNT=300 unless the user chose a policy), in notebooks as in scripts.
    ip.register_magics(WorkbenchMagics)
    formatters.register(ip)


def unload_ipython_extension(ip) -> None:
    """Called by ``%unload_ext kernel_ext``: the engine objects display as plain text again."""
    formatters.unregister(ip)
