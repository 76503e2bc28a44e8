"""Whole models: a graph of tensor operators, import from PyTorch, fusion, tasks, executor.

    graph = wb.from_torch(torch_module, (example_input,))  # a Graph of fused operator groups
    graph.tasks()                                           # [(PrimFunc, weight)], deduplicated
    db = wb.tune_model(graph, target="llvm", trials=1000, database="model.sqlite")
    model = wb.build_model(graph, target="llvm", database=db)
    (out,) = model(x_numpy)

PyTorch is the optional extra ``torch``: it is imported by ``from_torch`` and by
:mod:`workbench.graph.zoo` only, never by ``import workbench``.
"""

from .graph import Graph, Node, Task, lower_group
from .ops import OPS
from .fusion import Group, fuse
from .frontend import UnsupportedOperator, from_torch
from .executor import Model, build_model, default_schedule, explain_default_schedule, tune_model

__all__ = [
    "Graph",
    "Group",
    "Node",
    "Task",
    "OPS",
    "fuse",
    "lower_group",
    "from_torch",
    "UnsupportedOperator",
    "tune_model",
    "build_model",
    "default_schedule",
    "explain_default_schedule",
    "Model",
]
