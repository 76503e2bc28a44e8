"""The widgets: loop-nest stepper, trace graph / decision tree, convergence plot, pin panel, model graph."""

from .base import WorkbenchWidget
from .convergence import ConvergencePlot, tune_with_plot
from .pin_panel import PinPanel, replay_with_pins
from .stepper import LoopNestStepper
from .decision_tree import DecisionTree, latency_color
from .trace_graph import TraceGraph, dot_available
from .model_graph import ModelGraph

__all__ = [
    "WorkbenchWidget",
    "LoopNestStepper",
    "TraceGraph",
    "DecisionTree",
    "ConvergencePlot",
    "PinPanel",
    "ModelGraph",
    "tune_with_plot",
    "replay_with_pins",
    "dot_available",
    "latency_color",
]
