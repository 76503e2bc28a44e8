"""TVM MetaSchedule databases in and out: import tuning records, export traces as TVM Python.

**What TVM writes.** ``tune_tir`` keeps a JSON database in a directory of two JSON-lines files:

- ``database_workload.json``: one workload per line, ``[shash, module]``: TVM's structural hash
  (a decimal string) and the IRModule, serialized by ``tvm.ir.save_json`` (TVM 0.27's node
  types: ``tirx.PrimFunc``, ``s_tir.SBlock``, parameters typed by ``tirx.BufferType``) and
  base64-encoded: a little-endian 8-byte length, then a JSON node graph
  ``{"root_index", "nodes": [{"type", "data"}]}`` whose fields refer to other nodes by index.
- ``database_tuning_record.json``: one record per line,
  ``[workload_index, [[insts, decisions], run_secs, target, args_info]]``. ``insts`` is TVM's
  compact trace: ``[kind, inputs, attrs, outputs]`` per instruction, e.g.
  ``["Split", ["l2", "v6", "v7"], [1, 0], ["l10", "l11"]]``; ``decisions`` is
  ``[[instruction_index, decision], ...]``; ``run_secs`` the measured seconds per repeat.

In ``inputs``, a name (``"b0"``, ``"l2"``, ``"v6"``) is a random variable defined earlier,
``"None"`` is None, a quoted text (``"\\"SSRSRS\\""``, the JSON of a Python string literal) is
a string, numbers and nested lists are themselves; ``attrs`` hold plain values.

**The mapping.** Each TVM kind becomes the workbench primitive of the same name in snake case
(``GetSBlock`` is ``get_block``, ``RFactor`` is ``rfactor``), with TVM's inputs then attributes
as its arguments. Each primitive declares its TVM name, inputs and attributes where it is
registered (``@schedule_primitive(..., tvm_inputs=..., tvm_attrs=...)``); :data:`KIND_MAP` is
read from the registry::

    TVM kind                                  inputs                   attributes
    GetSBlock (older TVM: GetBlock)           -                        name, func_name (dropped)
    GetLoops, GetProducers, GetConsumers      block                    -
    GetChildBlocks                            block_or_loop            -
    SamplePerfectTile                         loop                     n, max_innermost_factor
    SampleCategorical                         -                        candidates, probs
    SampleComputeLocation                     block                    -
    Split                                     loop, *factors           preserve_unit_iters,
                                                                       disable_predication (0)
    Fuse                                      *loops                   preserve_unit_iters
    Reorder                                   *ordered_loops           -
    Parallel, Vectorize, Unroll               loop                     -
    AddUnitLoop                               block_or_loop            -
    Bind                                      loop                     thread_axis
    CacheRead, CacheWrite                     block, consumer_blocks   buffer index, scope
    ComputeAt, ReverseComputeAt               block, loop              preserve_unit_loops, index
    ComputeInline, ReverseComputeInline       block                    -
    DecomposeReduction, DecomposePadding      block, loop              -
    RFactor                                   loop                     factor_axis
    Annotate                                  block_or_loop, ann_val   ann_key
    Unannotate                                block_or_loop            ann_key
    StorageAlign                              block                    buffer_index, axis,
                                                                       factor, offset
    SetScope                                  block                    buffer_index, scope
    Blockize                                  loop                     preserve_unit_iters
    EnterPostproc                             -                        -
    GetOutputBlocks                           scope_block              -
    SamplePartitionedTile                     loop                     n, partition_pos,
                                                                       innerpart_factor
    Merge                                     *loops                   -
    ReorderBlockIterVar                       block, new_order         -
    UnsafeSetDType                            block                    buffer_index, dtype
    UnsafeHideBufferAccess                    block, buf_type,         -
                                              buf_index_array

Decisions are attached to their sampling instruction. Any other kind (``TransformLayout`` and
``AnnotateBufferAccess`` with their IndexMaps, ``Tensorize`` with TVM's intrinsics ...), an input this
format cannot carry (an IndexMap ``"{...}"``, a dict) or ``disable_predication=1`` makes that
record fail with the reason; the import goes on.

**Matching workloads.** TVM's ``shash`` is its own structural hash and means nothing here. A
TVM workload is matched to a workbench function by what a trace depends on: the parameters'
dtypes and shapes, in order, and every block with its name, iterator kinds and iterator
extents (``("Z", "SSSR", (1, 128, 128, 128))``). Block names must agree because a trace finds
blocks by name; iterator kinds and extents must agree because tile decisions factor those
extents. Parameter names are left out (they are no part of a trace). The candidates are every
registered workload at its default (paper) shape and at its small test shape, or the functions
you pass. A workload that matches none is reported, with its signature, and its records are
skipped.

**What is stored.** Each record whose converted trace replays on the workbench function
becomes a workbench :class:`Record`: the replayed trace, TVM's ``run_secs`` as the latencies
(not re-measured: they are the time TVM's kernel took on TVM's machine), status ``"ok"``, and
``meta = {"source": "tvm", "tvm_target": ..., "tvm_workload": shash}``. Its target is TVM's
target written as a workbench target (``llvm -mcpu=znver3 -num-cores=2``), so imported records
never rank against local measurements of ``llvm``; ``import_tvm(..., target="llvm")``
overrides that. A trace already stored for that workload and target is not added twice.
A record replays only if it reproduces TVM's program: a compute-location decision that
workbench would replace by another one counts as a failure.

**Export** (:func:`to_tvm_python`) renders a workbench trace as Python that TVM 0.27 runs on
the same ``te_workload`` function: ``sch.get_block(name)`` becomes ``sch.get_sblock(name)``,
``blockize``'s loop is TVM's ``target`` and ``max_innermost_factor=None`` is ``-1``; every other
primitive has TVM's name and keywords already.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence, Union

from ... import workloads
from ...target import KIND_OPTIONS, Target
from ...errors import ScheduleError, WorkbenchError
from ...ir.expr import IntImm
from ...ir.func import PrimFunc
from ...ir.functor import transform
from ...ir.stmt import OPAQUE, REDUCE, SPATIAL, For, ForKind
from ...ir.structural import structural_equal
from ...schedule import REGISTRY, Schedule, Trace
from ...schedule.instruction import py_value
from ...schedule.trace import JSON_FORMAT
from ...space import replay as replay_candidate
from ...space import without_postproc
from ...space.analysis import PARALLEL
from .base import Database, Record, target_str

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"


class TVMImportError(WorkbenchError):
    """A TVM database, workload or record that cannot be read or converted (the reason)."""


# ------------------------------------------------------------------------------------------
# workloads: the serialized IRModule


@dataclass(frozen=True)
class Signature:
    """What a trace depends on in a function: parameters (dtype, shape) in order, and the
    blocks (name, iterator kinds, iterator extents) sorted by name (the root left out)."""

    params: tuple[tuple[str, tuple[int, ...]], ...]
    blocks: tuple[tuple[str, str, tuple[int, ...]], ...]

    def __str__(self) -> str:
        params = ", ".join(f"{d}{list(s)}" for d, s in self.params)
        blocks = ", ".join(f"{n}[{k}]{list(e)}" for n, k, e in self.blocks)
        return f"params ({params}); blocks {blocks}"


def func_signature(func: PrimFunc) -> Signature:
    """The :class:`Signature` of a workbench function."""

    def extent(e: Any) -> int:
        return e.value if isinstance(e, IntImm) else -1

    params = tuple((b.dtype, tuple(int(s) for s in b.shape)) for b in func.params)
    blocks = tuple(
        sorted(
            (
                b.name,
                "".join(iv.iter_type for iv in b.iter_vars),
                tuple(extent(iv.dom.extent) for iv in b.iter_vars),
            )
            for b in func.blocks()
            if b is not func.root
        )
    )
    return Signature(params, blocks)


#: TVM's IterVar kinds (``IterVarType``): 0 data-parallel, 2 commutative reduce, else opaque
_ITER_KINDS = {0: SPATIAL, 2: REDUCE}


class _Graph:
    """TVM's JSON node graph (``tvm.ir.save_json``): nodes referring to nodes by index."""

    def __init__(self, data: dict):
        self.nodes = data["nodes"]

    def node(self, ref: int) -> dict:
        return self.nodes[ref]

    def value(self, ref: int) -> Any:
        """Plain value of a node: strings, ints, IntImm values, arrays (recursively), dtypes."""
        n = self.nodes[ref]
        t, d = n["type"], n.get("data")
        if t in ("ffi.String", "int", "bool", "float"):
            return d
        if t.endswith("IntImm") or t.endswith("FloatImm"):
            return self.value(d["value"])
        if t.endswith("PrimType"):
            return d["dtype"]
        if t.endswith("Array"):
            return [self.value(x) for x in d]
        if t == "None":
            return None
        return n

    def of_type(self, suffix: str) -> list[dict]:
        return [n for n in self.nodes if n["type"].endswith(suffix)]


def _decode_module(text: str) -> dict:
    """The JSON node graph of a serialized IRModule (base64 with an 8-byte header, or JSON)."""
    text = text.strip()
    if text.startswith("{"):
        return json.loads(text)
    raw = base64.b64decode(text)
    size = struct.unpack("<Q", raw[:8])[0] if len(raw) >= 8 else -1
    if size != len(raw) - 8:
        raise TVMImportError(
            "the workload's module is neither JSON nor TVM's base64 (a "
            "little-endian 8-byte length, then JSON)"
        )
    return json.loads(raw[8:].decode("utf-8"))


def module_signature(module: str) -> Signature:
    """The :class:`Signature` of the one PrimFunc in a serialized TVM IRModule."""
    try:
        g = _Graph(_decode_module(module))
        funcs = g.of_type("PrimFunc")
        if len(funcs) != 1:
            raise TVMImportError(
                f"the module holds {len(funcs)} PrimFuncs; workbench imports single-function workloads"
            )
        fdata = funcs[0]["data"]
        params = []
        for ref in g.node(fdata["params"])["data"]:  # Vars typed by their buffer
            buf = g.node(g.node(ref)["data"]["ty"])["data"]
            params.append((g.value(buf["dtype"]), tuple(g.value(buf["shape"]))))
        blocks = []
        for n in g.nodes:
            if not n["type"].endswith("SBlock"):
                continue
            b = n["data"]
            name = g.value(b["name_hint"])
            if name == "root":
                continue
            kinds, extents = [], []
            for ref in g.node(b["iter_vars"])["data"]:
                iv = g.node(ref)["data"]
                kinds.append(_ITER_KINDS.get(iv["iter_type"], OPAQUE))
                extent = g.value(g.node(iv["dom"])["data"]["extent"])
                extents.append(extent if isinstance(extent, int) else -1)
            blocks.append((name, "".join(kinds), tuple(extents)))
        return Signature(tuple(params), tuple(sorted(blocks)))
    except TVMImportError:
        raise
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise TVMImportError(f"cannot read the workload's IRModule ({type(exc).__name__}: {exc})") from None


def default_candidates() -> dict[str, PrimFunc]:
    """Every registered workload at its default (paper) shape and at its small test shape."""
    out: dict[str, PrimFunc] = {}
    for name in workloads.names():
        out[name] = workloads.get(name)
        small = workloads.small(name)
        if small:
            out[f"{name} (small)"] = workloads.get(name, **small)
    return out


def match_workload(
    signature: Signature, candidates: Mapping[str, PrimFunc]
) -> Optional[tuple[str, PrimFunc]]:
    """The first candidate ``(name, func)`` with this signature, or None."""
    for name, func in candidates.items():
        if func_signature(func) == signature:
            return name, func
    return None


# ------------------------------------------------------------------------------------------
# traces: TVM's compact JSON -> workbench instructions


class _KindMap(Mapping[str, tuple[str, tuple[str, ...], tuple[str, ...], bool]]):
    """TVM kind -> (workbench kind, input names, attr names, output is a list), for every
    registered primitive that declares its TVM inputs (``tvm_inputs``), under its TVM name and
    its older names. A ``*name`` input takes the remaining inputs; a ``-name`` attribute is
    dropped, a ``!name`` one must be 0. Read from the registry at each lookup, so a primitive
    registered later (in a notebook) is importable too."""

    def _table(self) -> dict[str, tuple[str, tuple[str, ...], tuple[str, ...], bool]]:
        return {
            tvm: (kind.name, kind.tvm_inputs, kind.tvm_attrs, kind.returns_list)
            for kind in REGISTRY.values()
            if kind.tvm_inputs is not None
            for tvm in (kind.tvm_name, *kind.tvm_aliases)
        }

    def __getitem__(self, tvm_kind: str) -> tuple[str, tuple[str, ...], tuple[str, ...], bool]:
        return self._table()[tvm_kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


KIND_MAP = _KindMap()

#: attributes TVM stores as ints that workbench takes as bools
_BOOL_ATTRS = {"preserve_unit_iters", "preserve_unit_loops"}


def _input(value: Any, defined: set[str], where: str) -> Any:
    """A TVM trace input as workbench trace JSON (RVs as ``{"rv": name}``)."""
    if isinstance(value, list):
        return [_input(v, defined, where) for v in value]
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, str):
        if value == "None":
            return None
        if len(value) >= 2 and value[0] == value[-1] == '"':
            return value[1:-1]
        if value.startswith("{"):
            raise TVMImportError(f"{where}: an IndexMap input, which workbench does not import")
        if value not in defined:
            raise TVMImportError(f"{where}: uses random variable {value!r} before defining it")
        return {"rv": value}
    raise TVMImportError(f"{where}: cannot import the input {value!r}")


def convert_trace(trace: Sequence) -> Any:
    """A workbench :class:`~workbench.schedule.Trace` from TVM's ``[insts, decisions]``.

    Raises :class:`TVMImportError` naming the instruction that cannot be converted.
    """
    try:
        insts, decisions = trace
        decided = {int(k): d for k, d in decisions}
    except (TypeError, ValueError):
        raise TVMImportError("a trace must be [instructions, decisions]") from None
    defined: set[str] = set()
    out = []
    for k, inst in enumerate(insts):
        try:
            kind, inputs, attrs, outputs = inst
        except (TypeError, ValueError):
            raise TVMImportError(f"instruction {k}: not [kind, inputs, attrs, outputs]") from None
        where = f"instruction {k} ({kind})"
        if kind not in KIND_MAP:
            raise TVMImportError(f"{where}: no workbench counterpart for TVM's {kind}")
        wb_kind, in_names, attr_names, multi = KIND_MAP[kind]
        args: dict[str, Any] = {}
        rest = list(inputs)
        for name in in_names:
            if name.startswith("*"):
                args[name[1:]] = [_input(v, defined, where) for v in rest]
                rest = []
            else:
                if not rest:
                    raise TVMImportError(f"{where}: too few inputs")
                args[name] = _input(rest.pop(0), defined, where)
        if rest or len(attrs) != len(attr_names):
            raise TVMImportError(
                f"{where}: expected {len(in_names)} inputs and "
                f"{len(attr_names)} attributes, got {list(inputs)} "
                f"and {list(attrs)}"
            )
        for name, value in zip(attr_names, attrs):
            if name.startswith("-"):
                continue
            if name.startswith("!"):
                if value:
                    raise TVMImportError(f"{where}: {name[1:]}={value} is not supported by workbench")
                continue
            args[name] = bool(value) if name in _BOOL_ATTRS else value
        if wb_kind == "sample_perfect_tile" and args.get("max_innermost_factor") == -1:
            args["max_innermost_factor"] = None
        if args.get("consumer_blocks") == []:  # TVM's "every consumer"
            args["consumer_blocks"] = None
        if "_" in outputs:
            raise TVMImportError(f"{where}: an unnamed output")
        rec: dict[str, Any] = {"kind": wb_kind, "args": args, "outputs": list(outputs)}
        if multi:
            rec["multi"] = True
        if k in decided:
            rec["decision"] = decided[k]
        defined.update(outputs)
        out.append(rec)
    try:
        return Trace.from_json({"format": JSON_FORMAT, "insts": out})
    except (KeyError, ValueError, TypeError) as exc:
        raise TVMImportError(f"not a valid trace: {exc}") from None


def convert_target(target: Any) -> str:
    """TVM's target (a dict such as ``{"kind": "llvm", "mcpu": "znver3", "num-cores": 2}``, or
    its string) as a workbench target string; options workbench does not know are dropped."""
    if isinstance(target, str):
        try:
            target = json.loads(target)
        except json.JSONDecodeError:
            return target_str(" ".join(p for p in target.split() if not p.startswith("-keys")))
    if not isinstance(target, dict) or target.get("kind") not in KIND_OPTIONS:
        raise TVMImportError(f"unsupported target {target!r}")
    kind = target["kind"]
    opts = [f"-{k}={v}" for k, v in target.items() if k in KIND_OPTIONS[kind] and v not in (None, "", [])]
    return target_str(" ".join([kind, *opts]))


# ------------------------------------------------------------------------------------------
# import


@dataclass
class WorkloadReport:
    """What happened to one TVM workload's records."""

    source: str  # the directory
    tvm_hash: str
    name: Optional[str] = None  # the matched workbench workload, None if unmatched
    func: Optional[PrimFunc] = field(default=None, repr=False)
    imported: int = 0
    duplicates: int = 0
    failures: list[tuple[int, str]] = field(default_factory=list)  # (record line, reason)
    best: Optional[float] = None  # seconds, among the records that replayed (stored or not)
    target: Optional[str] = None

    @property
    def failed(self) -> int:
        return len(self.failures)


@dataclass
class ImportReport:
    """Per-workload outcome of :func:`import_tvm`."""

    workloads: list[WorkloadReport] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # unreadable files, unmatched workloads

    @property
    def imported(self) -> int:
        return sum(w.imported for w in self.workloads)

    @property
    def failed(self) -> int:
        return sum(w.failed for w in self.workloads)

    def summary(self, reasons: int = 3) -> str:
        """Lines per workload: imported / failed counts, best latency, first reasons."""
        lines = []
        for w in self.workloads:
            best = f"best {w.best * 1e3:.4f} ms" if w.best is not None else "no record replayed"
            name = w.name or "unmatched"
            dup = f", {w.duplicates} already stored" if w.duplicates else ""
            lines.append(f"{w.source}: {name}: {w.imported} imported, {w.failed} failed{dup}; {best}")
            for line, reason in w.failures[:reasons]:
                lines.append(f"    record {line}: {reason}")
        lines += [f"error: {e}" for e in self.errors]
        return "\n".join(lines)


def find_databases(path: Union[str, os.PathLike]) -> list[str]:
    """``path`` itself if it holds a TVM database, else its subdirectories that do (sorted)."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise TVMImportError(f"{path}: no such directory")
    if os.path.exists(os.path.join(path, WORKLOAD_FILE)):
        return [path]
    found = sorted(
        os.path.join(path, d)
        for d in os.listdir(path)
        if os.path.exists(os.path.join(path, d, WORKLOAD_FILE))
    )
    if not found:
        raise TVMImportError(
            f"{path}: neither it nor a subdirectory holds a TVM database ({WORKLOAD_FILE} and {RECORD_FILE})"
        )
    return found


def _json_lines(path: str) -> Iterable[tuple[int, Any]]:
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield n, json.loads(line)
                except json.JSONDecodeError as exc:
                    yield n, TVMImportError(f"not JSON ({exc.msg})")


def replay(trace: Any, func: PrimFunc):
    """Replay an imported trace on ``func``; the schedule, or TVMImportError with the reason
    (a primitive refusing, or a decision workbench would change)."""
    sch = Schedule(func)
    try:
        trace.apply_to_schedule(sch)
    except (ScheduleError, ValueError, TypeError) as exc:
        raise TVMImportError(f"replay: {exc}") from None
    for given, got in zip(trace.insts, sch.trace.insts):
        if given.kind.is_sampling and given.decision != got.decision:
            raise TVMImportError(
                f"replay: {given.kind.name} decision {given.decision!r} became {got.decision!r} in workbench"
            )
    return sch


def import_tvm(
    path: Union[str, os.PathLike],
    database: Any = None,
    *,
    target: Union[str, Target, None] = None,
    candidates: Optional[Mapping[str, PrimFunc]] = None,
) -> ImportReport:
    """Import the TVM MetaSchedule database(s) at ``path`` into ``database``.

    ``path`` is a database directory or a directory of them (one per workload). ``database``:
    a :class:`Database` or a path (None: an in-memory one, for checking only). ``target``:
    store the records under this target instead of TVM's. ``candidates``: name -> function to
    match TVM's workloads against (default: :func:`default_candidates`). Raises
    :class:`TVMImportError` only when ``path`` holds no TVM database; bad records, unreadable
    lines and unmatched workloads are in the returned report.
    """
    dirs = find_databases(path)
    db = Database.open(database) if database is not None else None
    cands = dict(candidates) if candidates is not None else default_candidates()
    report = ImportReport()
    for d in dirs:
        wfile, rfile = os.path.join(d, WORKLOAD_FILE), os.path.join(d, RECORD_FILE)
        workloads: list[WorkloadReport] = []
        for n, entry in _json_lines(wfile):
            wr = WorkloadReport(d, "?")
            workloads.append(wr)
            try:
                if isinstance(entry, Exception):
                    raise entry
                wr.tvm_hash = str(entry[0])
                sig = module_signature(entry[1])
            except (TVMImportError, TypeError, IndexError) as exc:
                report.errors.append(f"{wfile}:{n}: {exc}")
                continue
            match = match_workload(sig, cands)
            if match is None:
                report.errors.append(f"{wfile}:{n}: no workbench workload matches ({sig})")
                continue
            wr.name, wr.func = match
        report.workloads += [w for w in workloads if w.func is not None]
        if not os.path.exists(rfile):
            report.errors.append(f"{d}: no {RECORD_FILE}")
            continue
        pending: dict[int, list[Record]] = {}
        seen: dict[tuple[int, str], set] = {}
        for n, entry in _json_lines(rfile):
            try:
                if isinstance(entry, Exception):
                    raise entry
                index, (trace_data, run_secs, tvm_target, _args) = entry
                wr = workloads[index]
            except (TVMImportError, TypeError, ValueError, IndexError) as exc:
                report.errors.append(f"{rfile}:{n}: {exc}")
                continue
            if wr.func is None:
                continue
            try:
                latencies = [float(s) for s in run_secs or ()]
                if not latencies or not all(0 < s < float("inf") for s in latencies):
                    raise TVMImportError(f"run_secs {run_secs!r}: not a successful measurement")
                rec_target = target_str(target) if target else convert_target(tvm_target)
                sch = replay(convert_trace(trace_data), wr.func)
            except TVMImportError as exc:
                wr.failures.append((n, str(exc)))
                continue
            wr.target = rec_target
            rec = Record.of(
                wr.func,
                rec_target,
                sch.trace,
                latencies,
                source="tvm",
                tvm_target=tvm_target,
                tvm_workload=wr.tvm_hash,
            )
            wr.best = min(rec.latency, wr.best if wr.best is not None else float("inf"))
            key = (index, rec_target)
            if key not in seen:
                seen[key] = db.trace_hashes(wr.func, rec_target) if db is not None else set()
            if rec.trace_hash in seen[key]:
                wr.duplicates += 1
                continue
            seen[key].add(rec.trace_hash)
            wr.imported += 1
            pending.setdefault(index, []).append(rec)
        if db is not None:
            for recs in pending.values():
                db.add(recs)
    return report


# ------------------------------------------------------------------------------------------
# export


#: workbench kind -> (TVM method, keyword renames); kinds missing here have no TVM counterpart
TVM_METHODS: dict[str, tuple[str, dict[str, str]]] = {
    "get_block": ("get_sblock", {}),
    "blockize": ("blockize", {"loop": "target"}),
    **{
        k: (k, {})
        for k in (
            "get_loops",
            "get_child_blocks",
            "get_producers",
            "get_consumers",
            "sample_perfect_tile",
            "sample_categorical",
            "sample_compute_location",
            "split",
            "fuse",
            "reorder",
            "add_unit_loop",
            "parallel",
            "vectorize",
            "unroll",
            "bind",
            "cache_read",
            "cache_write",
            "reindex",
            "compute_at",
            "reverse_compute_at",
            "compute_inline",
            "reverse_compute_inline",
            "decompose_reduction",
            "decompose_padding",
            "rfactor",
            "annotate",
            "unannotate",
            "storage_align",
            "set_scope",
            "tensorize",
            "transform_layout",
            "transform_block_layout",
            "enter_postproc",
        )
    },
}


def to_tvm_python(trace: Any) -> str:
    """A workbench trace (a ``Trace``, its JSON data or a ``Record``) as TVM 0.27 Python.

    The text expects ``sch`` to be a ``tvm.s_tir.Schedule`` of the same workload. Raises
    ValueError for a primitive TVM does not have.
    """
    if isinstance(trace, Record):
        trace = trace.trace
    elif isinstance(trace, (dict, str)):
        trace = Trace.from_json(trace)
    names = trace.rv_names()
    lines = []
    for inst in trace.insts:
        name = inst.kind.name
        if name not in TVM_METHODS:
            raise ValueError(f"{name} has no TVM counterpart: this trace cannot be exported")
        method, renames = TVM_METHODS[name]
        if inst.kind.renderer is not None:  # custom rendering (index maps): TVM's form already
            lines.append(inst.kind.as_python(inst, names).replace(f"sch.{name}(", f"sch.{method}(", 1))
            continue
        parts: list[str] = []
        for p in inst.kind.params:
            value = inst.args[p.name]
            if p.kind == p.VAR_POSITIONAL:
                parts.extend(py_value(v, names) for v in value)
                continue
            if name == "sample_perfect_tile" and p.name == "max_innermost_factor" and value is None:
                value = -1
            parts.append(f"{renames.get(p.name, p.name)}={py_value(value, names)}")
        if inst.kind.is_sampling:
            parts.append(f"decision={py_value(inst.decision, names)}")
        call = f"sch.{method}({', '.join(parts)})"
        outs = [names[rv] for rv in inst.outputs]
        if not outs:
            lines.append(call)
        elif inst.multi:
            lines.append(f"{', '.join(outs)}{',' if len(outs) == 1 else ''} = {call}")
        else:
            lines.append(f"{outs[0]} = {call}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# sketches: is a TVM trace a point of a workbench design space?


def _is_parallel_limit(inst: Any) -> bool:
    """The root's ``meta_schedule.parallel`` annotation: a value MutateParallel changes, so a
    decision of the space though not a sampled one."""
    return inst.kind.name == "annotate" and inst.args.get("ann_key") == PARALLEL


def structure(trace: Trace) -> list[str]:
    """The instructions of ``trace`` before ``enter_postproc``, one JSON line each without the
    decisions (random variables named by order of creation; the parallel limit counts as a
    decision): two traces with equal structures are the same sketch with different
    decisions."""
    out = []
    for inst, rec in zip(trace.insts, trace.as_json()["insts"]):
        if rec["kind"] == "enter_postproc":
            break
        rec = {k: v for k, v in rec.items() if k not in ("decision", "pinned")}
        if _is_parallel_limit(inst):
            rec["args"] = {**rec["args"], "ann_val": None}
        out.append(json.dumps(rec, sort_keys=True))
    return out


@dataclass
class SketchMatch:
    """Where a trace sits among the sketches of a design space.

    ``index``: the sketch with the trace's structure, or None. ``closest``: the sketch sharing
    the longest leading run of instructions with it, ``position`` the first instruction where
    the two differ, ``theirs`` / ``ours`` those instructions as Python (``""`` past an end).
    """

    index: Optional[int]
    closest: int
    position: int
    theirs: str
    ours: str


def _inst_text(trace: Trace, k: int) -> str:
    if k >= len(trace.insts) or trace.insts[k].kind.name == "enter_postproc":
        return ""
    return trace.insts[k].kind.as_python(trace.insts[k], trace.rv_names())


def match_sketch(trace: Trace, sketches: Sequence[Trace], simplify: bool = False) -> SketchMatch:
    """The sketch of ``sketches`` that ``trace`` is a point of (see :class:`SketchMatch`).

    ``simplify``: compare the traces without their unused queries and samples
    (:meth:`Trace.simplified`), as TVM's database stores a trace."""
    if not sketches:
        raise ValueError("match_sketch: no sketches to match")

    def prep(t: Trace) -> Trace:
        return t.simplified() if simplify else t

    theirs = prep(trace)
    target = structure(theirs)
    best = (-1, 0)
    for j, sketch in enumerate(sketches):
        ours = structure(prep(sketch))
        if ours == target:
            return SketchMatch(j, j, len(target), "", "")
        n = next((n for n, (a, b) in enumerate(zip(ours, target)) if a != b), min(len(ours), len(target)))
        if n > best[0]:
            best = (n, j)
    n, j = best
    return SketchMatch(None, j, n, _inst_text(theirs, n), _inst_text(prep(sketches[j]), n))


def with_decisions(sketch: Trace, trace: Trace, simplify: bool = False) -> Trace:
    """``sketch`` (before postprocessing, simplified when ``simplify``) carrying the decisions
    of ``trace``, a trace of the same structure (:func:`match_sketch`)."""
    out = without_postproc(sketch.simplified() if simplify else sketch)
    given = without_postproc(trace.simplified() if simplify else trace)
    if structure(out) != structure(given):
        raise ValueError("with_decisions: the traces are not the same sketch")
    for k, inst in enumerate(given.insts):
        if inst.kind.is_sampling:
            out = out.with_decision(k, inst.decision)
        elif _is_parallel_limit(inst):
            insts = list(out.insts)
            insts[k] = dataclasses.replace(insts[k], args={**insts[k].args, "ann_val": inst.args["ann_val"]})
            out = Trace(insts, out.base_func)
    return out


@dataclass
class Coverage:
    """Whether a TVM trace is a schedule of a workbench design space (:func:`coverage`).

    ``match``: where it sits among the sketches. ``program``: ``"same"`` when the sketch with
    its decisions, postprocessed by workbench, gives the program of the trace itself (TVM's
    postprocessing included) replayed in workbench; ``"differs"``, ``"rejected"`` (a
    postprocessor refused it, ``why`` says which) or ``None`` when no sketch matched.
    """

    match: SketchMatch
    program: Optional[str] = None
    why: str = ""


def _serial_unrolled(func: PrimFunc) -> PrimFunc:
    def post(n: Any) -> Any:
        if isinstance(n, For) and n.kind == ForKind.UNROLLED:
            return dataclasses.replace(n, kind=ForKind.SERIAL)
        return n

    return transform(func, post)


def coverage(trace: Trace, func: PrimFunc, sketches: Sequence[Trace], postprocs: Sequence[Any]) -> Coverage:
    """Is ``trace`` (converted from TVM, :func:`convert_trace`) a point of the design space
    whose ``sketches`` and ``postprocs`` are given? Traces are compared simplified, as TVM's
    database stores them. Loops workbench's RewriteParallelVectorizeUnroll marks ``unrolled``
    count as serial: workbench unrolls in the postprocessor what TVM's lowering (UnrollLoop)
    unrolls from the same ``pragma_auto_unroll_max_step`` annotation."""
    m = match_sketch(trace, sketches, simplify=True)
    if m.index is None:
        return Coverage(m)
    mine, why = replay_candidate(func, with_decisions(sketches[m.index], trace, simplify=True), postprocs)
    if mine is None:
        return Coverage(m, "rejected", why or "")
    ref = Schedule(func)
    try:
        trace.apply_to_schedule(ref)
    except ScheduleError as exc:
        return Coverage(m, "differs", f"the trace itself does not replay: {exc}")
    same = structural_equal(_serial_unrolled(mine.func), _serial_unrolled(ref.func))
    return Coverage(m, "same" if same else "differs")
