"""Operator fusion, TVM's rules in their common form.

Walking the nodes in order, a node joins the group of one of its inputs' producers when

* it is ``elemwise`` or ``broadcast`` and that group's anchor is an ``anchor`` (conv2d, dense,
  matmul, pooling, softmax, layer norm), ``injective``, ``elemwise`` or ``broadcast`` operator:
  conv2d + bias add + relu, dense + bias add + gelu, conv + bias + residual add + relu;
* it is ``injective`` and that group holds only injective / elementwise operators (TVM does not
  fuse an index remapping after a reduction: it would recompute the reduction per read);

and in both cases the input it joins through is the producer group's output, used by this node
only (otherwise the group would need two outputs), with the same shape as this node's output
for elementwise operators (a broadcast input is read, not fused into). A group runs where
its last node is, so every input is ready. Inputs are tried in order, so a residual add
fuses into the branch of its first fusable operand. Views (reshape) are never kernels: the
executor reshapes the producer's array. Every other node starts a group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from ..ir.func import PrimFunc

if TYPE_CHECKING:  # hints only: graph.py imports this module (Graph.fuse calls fuse)
    from .graph import Graph, Node


@dataclass
class Group:
    """Fused operators that become one kernel: ``nodes`` in order, the last one's value is the
    group's output; ``inputs`` are the values it reads from outside (graph inputs, constants,
    other groups' outputs), in parameter order."""

    name: str
    nodes: list[Node]
    inputs: list[str]
    func: Optional[PrimFunc] = None
    key: str = ""  # the database's workload key of func
    task: int = -1  # index into Graph.tasks()

    @property
    def output(self) -> str:
        return self.nodes[-1].name


_EPILOGUE_HOSTS = {"anchor", "injective", "elemwise", "broadcast"}
_INJECTIVE_HOSTS = {"injective", "elemwise", "broadcast"}


def fuse(graph: Graph) -> list[Group]:
    users = graph.users()
    outputs = set(graph.outputs)
    groups: list[Group] = []
    group_of: dict[str, Group] = {}
    for node in graph.nodes:
        if node.pattern == "view":
            continue
        host = None
        if node.pattern in ("elemwise", "broadcast", "injective"):
            allowed = _EPILOGUE_HOSTS if node.pattern != "injective" else _INJECTIVE_HOSTS
            for v in node.inputs:
                g = group_of.get(v)
                if (
                    g is not None
                    and g.output == v
                    and len(users[v]) == 1
                    and v not in outputs
                    and (node.pattern == "injective" or graph.values[v][0] == node.shape)
                    and all(n.pattern in allowed for n in g.nodes)
                ):
                    host = g
                    break
        if host is None:
            host = Group("", [], [])
        else:
            # the group now runs where this node is: its other inputs may come from groups made
            # since (nothing made since reads the group: its output had this one user)
            groups.remove(host)
        groups.append(host)
        host.nodes.append(node)
        for v in node.inputs:
            if group_of.get(v) is not host and v not in host.inputs:
                host.inputs.append(v)
        group_of[node.name] = host
    for g in groups:
        g.name = "fused_" + "_".join(n.op for n in g.nodes)
    return groups
