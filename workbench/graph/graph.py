"""``Graph``: a dataflow graph of tensor operators, its fused groups and its tuning tasks.

Values are named: graph inputs, constants (numpy arrays: the weights) and one output per node.
Nodes are kept in topological order (each is added after its inputs). :meth:`Graph.fuse`
groups them as TVM's operator fusion does (see :mod:`workbench.graph.fusion`); each group is
lowered to one ``PrimFunc`` whose parameters are the group's inputs then its output, and
:meth:`Graph.tasks` deduplicates those functions by the key the tuning database uses
(``structural_hash(func, buffer_names=False)``), weighted by how many groups share each.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from ..ir import dsl
from ..ir.func import PrimFunc
from ..ir.structural import structural_hash
from .fusion import Group, fuse
from .ops import OPS, infer


@dataclass
class Node:
    """One operator application; its output value is named ``name``."""

    name: str
    op: str
    inputs: list[str]
    attrs: dict
    shape: tuple[int, ...]
    dtype: str
    where: str = ""  # where it came from (the module path in an imported model)

    @property
    def pattern(self) -> str:
        return OPS[self.op].pattern


@dataclass
class Task:
    """A distinct function to tune and the groups (occurrences) that run it."""

    func: PrimFunc
    key: str
    groups: list[int] = field(default_factory=list)

    @property
    def weight(self) -> int:
        return len(self.groups)

    @property
    def name(self) -> str:
        return self.func.name


class Graph:
    """A dataflow graph. Build one by hand or with :func:`workbench.from_torch`::

    g = Graph()
    x = g.add_input("x", (1, 3, 32, 32))
    w = g.add_constant("w", np.ones((8, 3, 3, 3), "float32"))
    y = g.add_node("conv2d", [x, w], stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    g.set_outputs([g.add_node("relu", [y])])
    g.fuse(); g.tasks()
    """

    def __init__(self):
        self.inputs: list[str] = []
        self.constants: dict[str, np.ndarray] = {}
        self.nodes: list[Node] = []
        self.outputs: list[str] = []
        self.values: dict[str, tuple[tuple[int, ...], str]] = {}  # name -> (shape, dtype)
        self.groups: Optional[list[Group]] = None
        self._tasks: Optional[list[Task]] = None
        self._names: Counter = Counter()

    # building ---------------------------------------------------------------------------------
    def _fresh(self, name: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "v"
        while True:
            n = self._names[base]
            self._names[base] += 1
            out = base if n == 0 else f"{base}_{n}"
            if out not in self.values:
                return out

    def add_input(self, name: str, shape: Sequence[int], dtype: str = "float32") -> str:
        name = self._fresh(name)
        self.inputs.append(name)
        self.values[name] = (tuple(int(s) for s in shape), dtype)
        return name

    def add_constant(self, name: str, array: Any) -> str:
        array = np.ascontiguousarray(array)
        name = self._fresh(name)
        self.constants[name] = array
        self.values[name] = (array.shape, str(array.dtype))
        return name

    def add_node(self, op: str, inputs: Sequence[str], *, name: str = "", where: str = "", **attrs) -> str:
        if op not in OPS:
            raise ValueError(f"unknown operator {op!r}; known: {', '.join(sorted(OPS))}")
        for v in inputs:
            if v not in self.values:
                raise ValueError(f"{op}: input {v!r} is not a value of the graph")
        shape, dtype = infer(op, [self.values[v] for v in inputs], attrs)
        out = self._fresh(name or op)
        self.nodes.append(Node(out, op, list(inputs), attrs, shape, dtype, where))
        self.values[out] = (shape, dtype)
        self.groups = self._tasks = None
        return out

    def set_outputs(self, outputs: Sequence[str]) -> None:
        self.outputs = list(outputs)

    def producer(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    def users(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {v: [] for v in self.values}
        for n in self.nodes:
            for v in n.inputs:
                out[v].append(n)
        return out

    # fusion and tasks ---------------------------------------------------------------------------
    def fuse(self) -> list[Group]:
        """Group the nodes (see :func:`workbench.graph.fusion.fuse`); lowers each group."""
        if self.groups is None:
            self.groups = fuse(self)
            self._tasks = None
        return self.groups

    def task_list(self) -> list[Task]:
        """The distinct functions with the groups that run each (the detailed ``tasks()``)."""
        if self._tasks is None:
            tasks: dict[str, Task] = {}
            for k, g in enumerate(self.fuse()):
                if g.func is None:
                    g.func = lower_group(self, g)
                    g.key = structural_hash(g.func, buffer_names=False)
                t = tasks.setdefault(g.key, Task(g.func, g.key))
                t.groups.append(k)
                g.task = list(tasks).index(g.key)
            self._tasks = list(tasks.values())
        return self._tasks

    def tasks(self) -> list[tuple[PrimFunc, int]]:
        """``[(PrimFunc, weight)]``: each distinct fused function once, weighted by how many
        groups of the graph run it."""
        return [(t.func, t.weight) for t in self.task_list()]

    # display ---------------------------------------------------------------------------------
    def _type(self, v: str) -> str:
        shape, dtype = self.values[v]
        return f"{dtype}{list(shape)}"

    def __str__(self) -> str:
        ref = {v: f"%{v}" for v in self.values}
        ref.update({c: f"${c}" for c in self.constants})
        group_of = {}
        if self.groups is not None:
            for k, g in enumerate(self.groups):
                for n in g.nodes:
                    group_of[n.name] = k
        nparams = sum(a.size for a in self.constants.values())
        lines = [
            f"Graph({', '.join(f'%{v}: {self._type(v)}' for v in self.inputs)}) "
            f"# {len(self.nodes)} operators, {len(self.constants)} constants ({nparams:,} values)"
        ]
        for n in self.nodes:
            attrs = "".join(f", {k}={_fmt(v)}" for k, v in n.attrs.items())
            tail = f"  # group {group_of[n.name]}" if n.name in group_of else ""
            if n.where:
                tail += f"{'  #' if not tail else ','} {n.where}"
            args = ", ".join(ref[v] for v in n.inputs)
            lines.append(f"  %{n.name}: {n.dtype}{list(n.shape)} = {n.op}({args}{attrs}){tail}")
        lines.append(f"  return {', '.join(ref[v] for v in self.outputs)}")
        if self.groups is not None:
            tasks = self.task_list()
            lines.append(f"{len(self.groups)} fused groups, {len(tasks)} distinct tasks:")
            for k, g in enumerate(self.groups):
                ops = " + ".join(n.op for n in g.nodes)
                lines.append(f"  group {k}: {g.name} [{ops}] -> %{g.output}  (task {g.task})")
        return "\n".join(lines)

    def __repr__(self) -> str:
        groups = "" if self.groups is None else f", {len(self.groups)} groups"
        return f"<Graph {len(self.nodes)} operators{groups}, inputs {self.inputs}, outputs {self.outputs}>"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return "(" + ", ".join(_fmt(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v)


def lower_group(graph: Graph, group: Group) -> PrimFunc:
    """One ``PrimFunc`` for the group: parameters ``p0, p1, ...`` (its inputs) then ``out``.

    Blocks are named after the operators, numbered within the group, so two groups of the same
    structure lower to the same function (one task)."""
    tensors = {}
    params = []
    for k, v in enumerate(group.inputs):
        shape, dtype = graph.values[v]
        t = dsl.placeholder(shape, dtype, name=f"p{k}")
        tensors[v] = t
        params.append(t)
    seen: Counter = Counter()
    out = None
    for n in group.nodes:
        label = n.op if seen[n.op] == 0 else f"{n.op}_{seen[n.op]}"
        seen[n.op] += 1
        if n is group.nodes[-1]:
            label = f"T_{label}"
        out = OPS[n.op].fcompute([tensors[v] for v in n.inputs], label, **n.attrs)
        tensors[n.name] = out
    assert out is not None
    return dsl.create_func([*params, out], name=group.name)
