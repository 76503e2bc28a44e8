"""Tensor sentences: one deterministic serialization of (workload, target, the trace's sampling
decisions in order), the same for records read from a database and for generation.

The TLM paper's consistency requirement: what the decision model learns from must be computed
exactly as what it is asked about. So every part of a sentence is derived from data a stored
record also has — the workload's IR *text* (``WorkloadEntry.ir``, which is ``str(func)``), the
target string and the trace — never from live objects a database lacks::

    s = sentence_of(trace, str(func), "llvm")
    s.to_text()             # "W 3 1 ... | T 16 2 0 | D tile S 0 0 128 4 64 _ = 1 4 2 16 | ..."
    TensorSentence.from_text(s.to_text()) == s

A *word* (:class:`Word`) is one sampling decision with its context: the kind, what it samples
(the tiled loop's iteration type, position and extent, the categorical candidates, the block
a compute location is sampled for), and the decision itself.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from ...target import Target
from ...space import without_postproc

#: short names of the sampling kinds in sentences
KINDS = {"sample_perfect_tile": "tile", "sample_categorical": "cat", "sample_compute_location": "loc"}
KIND_NAMES = {short: name for name, short in KINDS.items()}

#: the workload features (:func:`workload_features`), in order
WORKLOAD_FEATURES = (
    "blocks",
    "reduction_blocks",
    "main_log2_spatial",
    "main_log2_reduce",
    "main_spatial_axes",
    "main_reduce_axes",
    "nonlinear_ops",
    "padding",
    "log2_total_iters",
)
#: the target features (:func:`target_features`), in order
TARGET_FEATURES = ("f32_lanes", "cores", "gpu")


@dataclass(frozen=True)
class Word:
    """One sampling decision in context.

    ``kind``: ``"tile"``, ``"cat"`` or ``"loc"``. ``axis``: for a tile, the iteration type of
    the tiled loop (``"S"`` spatial, ``"R"`` reduction, ``"O"`` other); for a compute
    location, ``"S"`` when the block is elementwise (all spatial) else ``"R"``; ``"-"`` for a
    categorical. ``pos``: the tiled loop's position among its block's loops (-1 otherwise);
    ``last``: 1 when it is the innermost loop of its iteration type in the block (a spatial
    one is what gets vectorized), else 0.
    ``extent``: the tiled loop's extent (the product of the decision). ``n`` and
    ``max_inner``: the tile's parts and innermost limit (0: none). ``candidates``: a
    categorical's values. ``decision``: a tuple of factors (tile) or an int.
    """

    kind: str
    axis: str = "-"
    pos: int = -1
    last: int = 0
    extent: int = 0
    n: int = 0
    max_inner: int = 0
    candidates: tuple = ()
    decision: Any = None

    def context(self) -> "Word":
        """This word without its decision (what the model is asked about)."""
        return replace(self, decision=None)

    def to_text(self) -> str:
        head = [
            self.kind,
            self.axis,
            str(self.pos),
            str(self.last),
            str(self.extent),
            str(self.n),
            str(self.max_inner),
            ",".join(map(str, self.candidates)) or "_",
        ]
        if self.decision is None:
            dec = "?"
        elif isinstance(self.decision, tuple):
            dec = " ".join(map(str, self.decision))
        else:
            dec = str(self.decision)
        return " ".join(head) + " = " + dec

    @classmethod
    def from_text(cls, text: str) -> "Word":
        try:
            head, dec = text.split(" = ")
            kind, axis, pos, last, extent, n, max_inner, cands = head.split()
        except ValueError:
            raise ValueError(f"not a tensor-sentence word: {text!r}") from None
        if kind not in KIND_NAMES:
            raise ValueError(f"unknown decision kind {kind!r} in {text!r}")
        if dec == "?":
            decision: Any = None
        elif kind == "tile":
            decision = tuple(int(x) for x in dec.split())
        else:
            decision = int(dec)
        return cls(
            kind,
            axis,
            int(pos),
            int(last),
            int(extent),
            int(n),
            int(max_inner),
            tuple(int(x) for x in cands.split(",")) if cands != "_" else (),
            decision,
        )


@dataclass(frozen=True)
class TensorSentence:
    """Workload features, target features and the decisions (:class:`Word`) in trace order."""

    workload: tuple
    target: tuple
    words: tuple = field(default=())

    def to_text(self) -> str:
        parts = [
            "W " + " ".join(_num(x) for x in self.workload),
            "T " + " ".join(_num(x) for x in self.target),
        ]
        parts += ["D " + w.to_text() for w in self.words]
        return " | ".join(parts)

    @classmethod
    def from_text(cls, text: str) -> "TensorSentence":
        parts = text.split(" | ")
        if len(parts) < 2 or not parts[0].startswith("W") or not parts[1].startswith("T"):
            raise ValueError(f"not a tensor sentence (expected 'W ... | T ... | D ...'): {text[:80]!r}")
        workload = tuple(float(x) for x in parts[0].split()[1:])
        target = tuple(float(x) for x in parts[1].split()[1:])
        words = []
        for part in parts[2:]:
            if not part.startswith("D "):
                raise ValueError(f"not a decision of a tensor sentence: {part!r}")
            words.append(Word.from_text(part[2:]))
        return cls(workload, target, tuple(words))

    def to_json(self) -> dict:
        return {"format": "workbench.sentence/1", "text": self.to_text()}

    @classmethod
    def from_json(cls, data: dict) -> "TensorSentence":
        if not isinstance(data, dict) or data.get("format") != "workbench.sentence/1":
            raise ValueError("not a tensor sentence in JSON (format 'workbench.sentence/1')")
        return cls.from_text(data["text"])

    @property
    def decisions(self) -> list:
        return [w.decision for w in self.words]


def _num(x: float) -> str:
    """Numbers as the shortest text that reads back equal (rounded: 6 significant digits)."""
    x = float(f"{x:.6g}")
    return str(int(x)) if x == int(x) else repr(x)


# workload and target ---------------------------------------------------------------------------

_GRID = re.compile(
    r"^(\s*)for .* in (?:T\.grid|range|T\.serial|T\.parallel|T\.vectorized|"
    r"T\.unroll)\((.*)\):\s*$"
)
_BLOCK = re.compile(r"^(\s*)with T\.block\(\"([^\"]+)\"\)")
_REMAP = re.compile(r"T\.axis\.remap\(\"([A-Z]+)\"")


def block_axes(ir: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Block name -> (iteration types, e.g. ``"SSSR"``, the extents of its enclosing loops),
    read from the function's IR text."""
    stack: list[tuple[int, list[int]]] = []
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    pending: Optional[tuple[str, tuple[int, ...]]] = None
    for line in ir.splitlines():
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent and line.strip():
            stack.pop()
        m = _GRID.match(line)
        if m:
            ext = [int(x) for x in re.findall(r"-?\d+", m.group(2))]
            if "range" in line and len(ext) == 2:  # range(a, b)
                ext = [ext[1] - ext[0]]
            stack.append((indent, ext if "grid" in line else ext[-1:]))
            continue
        m = _BLOCK.match(line)
        if m:
            pending = (m.group(2), tuple(x for _, ext in stack for x in ext))
            continue
        m = _REMAP.search(line)
        if m and pending is not None:
            out[pending[0]] = (m.group(1), pending[1])
            pending = None
        elif pending is not None and line.strip().startswith("T.reads"):
            out[pending[0]] = ("S" * len(pending[1]), pending[1])  # no remap: all spatial
            pending = None
    return out


def workload_features(ir: str) -> tuple:
    """:data:`WORKLOAD_FEATURES` of a function, from its IR text (``str(func)``)."""
    axes = block_axes(ir)
    reductions = sum("R" in types for types, _ in axes.values())

    def size(item):
        return math.prod(item[1]) if item[1] else 1

    main = max(axes.values(), key=size, default=("", ()))
    types, ext = main
    spatial = math.prod(e for t, e in zip(types, ext) if t == "S") if ext else 1
    reduce = math.prod(e for t, e in zip(types, ext) if t != "S") if ext else 1
    total = sum(size(v) for v in axes.values()) or 1
    nonlinear = len(re.findall(r"T\.(exp|log|tanh|sqrt|sigmoid|max|min)\(", ir))
    return (
        float(len(axes)),
        float(reductions),
        round(math.log2(max(spatial, 1)), 3),
        round(math.log2(max(reduce, 1)), 3),
        float(types.count("S")),
        float(len(types) - types.count("S")),
        float(nonlinear),
        float("T.Select" in ir or "T.if_then_else" in ir),
        round(math.log2(total), 3),
    )


def target_features(target: Any) -> tuple:
    """:data:`TARGET_FEATURES` of a target (a string or ``Target``)."""
    t = Target.of(target)
    if t.kind == "llvm":
        return (float(t.vector_lanes("float32")), float(t.num_cores), 0.0)
    return (0.0, 0.0, 1.0 if t.kind == "cuda" else 0.0)


# decisions ---------------------------------------------------------------------------------------


def sampling_words(trace: Any, ir: str) -> list[Word]:
    """The words of the trace's sampling instructions (design-space part only), in order."""
    axes = block_axes(ir)
    where: dict[Any, tuple] = {}  # RV -> ("block", name) | ("loop", block, position)
    words = []
    for inst in without_postproc(trace).insts:
        name = inst.kind.name
        if name == "get_block":
            where[inst.outputs[0]] = ("block", inst.args.get("name"))
        elif name == "get_loops":
            src = where.get(inst.args.get("block"))
            for k, rv in enumerate(inst.outputs):
                where[rv] = ("loop", src[1] if src else None, k)
        if not inst.kind.is_sampling or name not in KINDS:
            continue
        words.append(word_of(inst, inst.decision, where, axes))
    return words


def word_of(inst: Any, decision: Any, where: dict, axes: dict, extent: Optional[int] = None) -> Word:
    """The word of one sampling instruction (``decision`` may be None: its context only).
    ``extent``: the tiled loop's extent when known from the schedule (else the product of the
    decision)."""
    kind = KINDS[inst.kind.name]
    if kind == "tile":
        src = where.get(inst.args["loop"])
        axis, pos, last = "O", -1, 0
        if src and src[0] == "loop" and src[1] in axes:
            types = axes[src[1]][0]
            pos = src[2]
            axis = types[pos] if pos < len(types) else "O"
            last = int(pos < len(types) and axis not in types[pos + 1 :])
        dec = tuple(int(x) for x in decision) if decision is not None else None
        if extent is None:
            extent = math.prod(dec) if dec else 0
        mi = inst.args.get("max_innermost_factor")
        return Word(
            "tile",
            axis if axis in "SR" else "O",
            pos,
            last,
            int(extent),
            int(inst.args["n"]),
            int(mi) if mi not in (None, -1) else 0,
            (),
            dec,
        )
    if kind == "cat":
        return Word(
            "cat",
            candidates=tuple(int(c) for c in inst.args["candidates"]),
            extent=len(inst.args["candidates"]),
            decision=None if decision is None else int(decision),
        )
    src = where.get(inst.args["block"])
    types = axes.get(src[1], ("", ()))[0] if src else ""
    return Word("loc", "R" if "R" in types else "S", decision=None if decision is None else int(decision))


def sentence_of(trace: Any, ir: str, target: Any) -> TensorSentence:
    """The tensor sentence of a trace of the function whose IR text is ``ir``."""
    return TensorSentence(workload_features(ir), target_features(target), tuple(sampling_words(trace, ir)))


def sentence_of_record(record: Any) -> Optional[TensorSentence]:
    """The sentence of a database record (None when its workload's IR text is unknown)."""
    if record.workload is None or not record.workload.ir:
        return None
    return sentence_of(record.trace, record.workload.ir, record.target)
