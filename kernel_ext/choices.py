"""The values a sampling instruction could have drawn, for the pin panel and the trace graph.

``sampling_choices(sch, k)`` lists, for the sampling instruction at position ``k`` of
``sch.trace``, every decision it may take, each with a label a person reads ("[4, 2, 16]",
"64", "at loop j_0"). It looks at the function *before* that instruction
(``sch.history[k]``), so it works for any step of any schedule. A new sampling primitive adds
its own lister with ``@choice_lister("name")``; an unknown kind lists only its recorded
decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import workbench as wb
from workbench.ir.expr import IntImm
from workbench.schedule.primitives.compute_location import compute_location_candidates
from workbench.ir.index import index

#: at most this many choices are listed (a tiling of a large extent into many parts explodes)
MAX_CHOICES = 400


@dataclass(frozen=True)
class Choice:
    """One possible decision of a sampling instruction, and how to show it."""

    label: str
    decision: Any


_LISTERS: dict[str, Callable[["wb.Schedule", int], list[Choice]]] = {}


def choice_lister(kind_name: str):
    """Register ``fn(sch, k) -> list[Choice]`` for the sampling kind ``kind_name``."""

    def register(fn):
        _LISTERS[kind_name] = fn
        return fn

    return register


def sampling_choices(sch: "wb.Schedule", k: int) -> list[Choice]:
    """Every decision the sampling instruction ``sch.trace[k]`` may take (the recorded one
    included, even where the lister would not produce it)."""
    inst = sch.trace[k]
    if not inst.kind.is_sampling:
        raise ValueError(f"instruction {k} ({inst.kind.name}) samples nothing")
    lister = _LISTERS.get(inst.kind.name)
    out = lister(sch, k) if lister is not None else []
    if inst.decision is not None and not any(c.decision == inst.decision for c in out):
        out.insert(0, Choice(repr(inst.decision), inst.decision))
    return out


def _before(sch: "wb.Schedule", k: int):
    """The function instruction ``k`` saw (history[0] is the start; inst k made history[k+1])."""
    return sch.history[k][1]


def tilings(
    extent: int,
    parts: int,
    max_innermost: Any = None,
    limit: int = MAX_CHOICES,
) -> list[list[int]]:
    """Ordered factorizations of ``extent`` into ``parts`` factors (innermost last, at most
    ``max_innermost``), in lexicographic order, at most ``limit`` of them."""
    out: list[list[int]] = []
    cap = None if max_innermost in (None, -1) else max_innermost

    def extend(prefix: list[int], rest: int, left: int) -> None:
        if len(out) >= limit:
            return
        if left == 1:
            if cap is None or parts == 1 or rest <= cap:
                out.append(prefix + [rest])
            return
        for d in range(1, rest + 1):
            if rest % d == 0:
                extend(prefix + [d], rest // d, left - 1)

    extend([], extent, parts)
    return out


@choice_lister("sample_perfect_tile")
def _tile_choices(sch: "wb.Schedule", k: int) -> list[Choice]:
    inst = sch.trace[k]
    loop = index(_before(sch, k)).loops.get(sch.symbols.get(inst.args["loop"]))
    if loop is None or not isinstance(loop.extent, IntImm):
        return []
    found = tilings(loop.extent.value, inst.args["n"], inst.args.get("max_innermost_factor"))
    return [Choice(str(t), t) for t in found]


@choice_lister("sample_categorical")
def _categorical_choices(sch: "wb.Schedule", k: int) -> list[Choice]:
    inst = sch.trace[k]
    return [
        Choice(f"{c}  (p={p:.2g})", i)
        for i, (c, p) in enumerate(zip(inst.args["candidates"], inst.args["probs"]))
        if p > 0
    ]


@choice_lister("sample_compute_location")
def _location_choices(sch: "wb.Schedule", k: int) -> list[Choice]:
    inst = sch.trace[k]
    func = _before(sch, k)
    realize = index(func).realizes.get(sch.symbols.get(inst.args["block"]))
    if realize is None:
        return []
    candidates, loops = compute_location_candidates(func, realize.block)
    named = {-2: "inline", -1: "root (stay where it is)"}
    return [Choice(named.get(c) or f"at loop {loops[c].loop_var.name}", c) for c in candidates]


def decision_text(inst: Any) -> str:
    """The decision of a sampling instruction as people read it (a categorical's value, not
    its index)."""
    if inst.kind.name == "sample_categorical" and isinstance(inst.decision, int):
        return str(inst.args["candidates"][inst.decision])
    if inst.kind.name == "sample_compute_location":
        return {-2: "inline", -1: "root"}.get(inst.decision, f"loop #{inst.decision}")
    return str(inst.decision)


def space_size(choices: list[list[Choice]]) -> int:
    """How many programs the listed choices span (an upper bound: choices interact)."""
    return math.prod(max(len(c), 1) for c in choices)


def describe_sampling(sch: "wb.Schedule", k: int) -> str:
    """What the sampling instruction ``sch.trace[k]`` decides, in words a student reads:
    ``tile loop i (extent 128) into 4 factors``."""
    inst = sch.trace[k]
    names = sch.trace.rv_names()
    outs = ", ".join(names[rv] for rv in inst.outputs)
    idx = index(_before(sch, k))
    if inst.kind.name == "sample_perfect_tile":
        loop = idx.loops.get(sch.symbols.get(inst.args["loop"]))
        what = f"loop {loop.loop_var.name} (extent {loop.extent})" if loop is not None else "a loop"
        return f"{outs}: tile {what} into {inst.args['n']} factors"
    if inst.kind.name == "sample_categorical":
        users = [
            j for j in range(k + 1, len(sch.trace)) if any(rv in inst.outputs for rv in sch.trace[j].inputs)
        ]
        name = sampling_name(sch, k)
        used = (
            f" for {name}"
            if name != outs
            else f" (used by step {users[0]}: {sch.trace[users[0]].kind.name})"
            if users
            else ""
        )
        return f"{outs}: pick one of {list(inst.args['candidates'])}{used}"
    if inst.kind.name == "sample_compute_location":
        return f"{outs}: where to compute block {sch.symbols.get(inst.args['block'])}"
    return f"{outs}: {inst.kind.name}"


def sampling_name(sch: "wb.Schedule", k: int) -> str:
    """A short name for what ``sch.trace[k]`` decides: ``tile j``, ``unroll_explicit``,
    ``place Z_global`` (the output names when nothing better is known)."""
    inst = sch.trace[k]
    if inst.kind.name == "sample_perfect_tile":
        var = sch.symbols.get(inst.args["loop"])
        if var is not None:
            return f"tile {var.name}"
    elif inst.kind.name == "sample_compute_location":
        block = sch.symbols.get(inst.args["block"])
        if block is not None:
            return f"place {block}"
    elif inst.kind.name == "sample_categorical":
        for later in sch.trace.insts[k + 1 :]:
            if later.kind.name == "annotate" and any(rv in inst.outputs for rv in later.inputs):
                return str(later.args["ann_key"]).rsplit(".", 1)[-1]
    names = sch.trace.rv_names()
    return ", ".join(names[rv] for rv in inst.outputs)
