"""Traces: the linear record of the sampling and transformation instructions a schedule ran.

A trace is data (DESIGN decision 4). It renders as runnable Python (``str(trace)``), round-trips
through plain JSON without evaluating any code, and replays onto a fresh schedule of the same
function — with the recorded decisions, with decisions chosen by a ``decision_provider`` (how
the search mutates a trace), or resampled. A *pinned* decision is one the search must keep:
``apply_to_schedule`` never asks the provider about it, and replays it exactly or raises
(a sampler never swaps a pinned decision for a near valid one).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, Union

from ..errors import ScheduleError, TraceFormatError, UnknownInstructionKind
from .instruction import Instruction, get_kind, iter_rvs, map_rvs
from .rv import RV, RV_CLASSES

if TYPE_CHECKING:  # a hint only: schedule.py imports this module
    from .schedule import Schedule

#: ``decision_provider(inst, recorded_decision) -> decision``; returning None resamples.
DecisionProvider = Callable[[Instruction, Any], Any]

#: the ``format`` tag of :meth:`Trace.as_json`
JSON_FORMAT = "workbench.trace/1"

#: the class :meth:`Trace.from_python` runs text on: ``Schedule``, set by schedule.py when it
#: defines it (schedule.py imports this module, so this module does not import it)
schedule_class: Optional["type[Schedule]"] = None


def resample(inst: Instruction, decision: Any) -> None:
    """A decision provider that draws every (unpinned) decision anew from the schedule's rng."""
    return None


class Decisions(dict):
    """``trace.decisions``: a read-only snapshot, sampling instruction -> decision.

    A new decision makes a new trace (``trace.with_decision(inst, value)``); writing into this
    mapping would change nothing, so it raises instead. Looking up an instruction that samples
    nothing (a ``split``) names the sampling instruction whose decision to change instead.
    """

    def __init__(self, trace: "Trace"):
        super().__init__((i, i.decision) for i in trace.insts if i.kind.is_sampling)
        self._trace = trace

    def __missing__(self, inst: Any) -> Any:
        raise NoDecision(self._trace._why_no_decision(inst))

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "trace.decisions is a read-only snapshot: trace.with_decision(inst, "
            "value) returns a new trace with that decision (TVM's spelling: "
            "trace.with_decision(inst, value, remove_postproc=True))"
        )

    # every mutator raises (their signatures differ from dict's, hence the ignores)
    __setitem__ = __delitem__ = __ior__ = update = _read_only  # type: ignore[assignment]
    setdefault = pop = popitem = clear = _read_only  # type: ignore[assignment]


class NoDecision(KeyError):
    """Looking up the decision of an instruction that has none (a ``KeyError``)."""

    def __str__(self) -> str:  # KeyError would print the message's repr
        return str(self.args[0])


class Trace:
    """A list of :class:`Instruction` (instructions are immutable; decisions live on them).

    ``base_func``: the function the trace applies to, when known. A schedule's trace knows it
    (the function the schedule started from) and copies, edits and simplifications keep it; a
    trace read from JSON does not. It is not part of the trace's data: JSON and Python
    renderings leave it out. (Not ``func``: ``build(x)`` and friends take ``x.func`` as the
    *scheduled* function, which a trace does not hold.)
    """

    resample = staticmethod(resample)

    def __init__(self, insts: Iterable[Instruction] = (), base_func: Any = None):
        self.insts: list[Instruction] = list(insts)
        self.base_func = base_func

    # container --------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.insts)

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.insts)

    def __getitem__(self, i: int) -> Instruction:
        return self.insts[i]

    def append(self, inst: Instruction) -> None:
        self.insts.append(inst)

    def copy(self) -> "Trace":
        return Trace(self.insts, self.base_func)

    @property
    def decisions(self) -> Decisions:
        """Sampling instruction -> its decision, in trace order (a read-only snapshot: change a
        decision with :meth:`with_decision`)."""
        return Decisions(self)

    def _why_no_decision(self, inst: Any) -> str:
        """Why ``inst`` has no entry in :attr:`decisions`, and what to look up instead."""
        if not isinstance(inst, Instruction) or not any(cur is inst for cur in self.insts):
            return f"{inst!r} is not an instruction of this trace"
        names = self.rv_names()
        feeding = [
            cur for cur in self.insts if cur.kind.is_sampling and any(rv in inst.inputs for rv in cur.outputs)
        ]
        hint = (
            "; its inputs come from "
            + ", ".join(f"{cur.kind.name} ({', '.join(names[rv] for rv in cur.outputs)})" for cur in feeding)
            + ": change that decision"
            if feeding
            else ""
        )
        return (
            f"{inst.kind.name} samples nothing, so it has no decision: only sampling "
            f"instructions (sample_perfect_tile, sample_categorical, "
            f"sample_compute_location) do{hint}"
        )

    @property
    def pinned(self) -> set[Instruction]:
        return {i for i in self.insts if i.pinned}

    # rendering ---------------------------------------------------------------------------
    def rv_names(self) -> dict[RV, str]:
        """Trace names of the random variables: prefix + creation index (``b0``, ``l1``, ``v2``)."""
        names: dict[RV, str] = {}
        for inst in self.insts:
            for rv in inst.outputs:
                if rv not in names:
                    names[rv] = f"{rv.prefix}{len(names)}"
        return names

    def as_python(self) -> str:
        """Runnable Python, one line per instruction, with ``sch`` the schedule."""
        names = self.rv_names()
        return "\n".join(inst.kind.as_python(inst, names) for inst in self.insts)

    def __str__(self) -> str:
        return self.as_python()

    def __repr__(self) -> str:
        return f"<Trace of {len(self)} instructions>"

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(self.as_python())

    # JSON ----------------------------------------------------------------------------------
    def as_json(self) -> dict:
        """Plain JSON-able data: ``{"format", "insts": [{kind, args, outputs, ...}]}``.

        Random variables appear as ``{"rv": "l3"}``; dict values as ``{"dict": [[k, v], ...]}``.
        """
        names = self.rv_names()
        insts = []
        for inst in self.insts:
            rec: dict[str, Any] = {
                "kind": inst.kind.name,
                "args": {k: _to_json(v, names) for k, v in inst.args.items()},
                "outputs": [names[rv] for rv in inst.outputs],
            }
            if inst.multi:
                rec["multi"] = True
            if inst.kind.is_sampling:
                rec["decision"] = _to_json(inst.decision, names)
            if inst.pinned:
                rec["pinned"] = True
            insts.append(rec)
        return {"format": JSON_FORMAT, "insts": insts}

    @classmethod
    def from_json(cls, data: Union[dict, str]) -> "Trace":
        """Rebuild a trace from :meth:`as_json` data (or its JSON text); no code is evaluated.

        Anything malformed raises :class:`TraceFormatError` (a ``ValueError``) naming the
        instruction; an unknown instruction kind raises :class:`UnknownInstructionKind` (also a
        ``KeyError``). Replaying the trace checks the arguments themselves.
        """
        try:
            if isinstance(data, (str, bytes)):
                data = json.loads(data)
            if not isinstance(data, dict) or data.get("format") != JSON_FORMAT:
                raise TraceFormatError(f"not a workbench trace (expected format {JSON_FORMAT!r})")
            if not isinstance(data.get("insts"), list):
                raise TraceFormatError("trace JSON: 'insts' must be a list of instructions")
        except RecursionError:
            raise TraceFormatError("trace JSON nested too deeply") from None
        except ValueError as exc:  # json's decoding errors
            if isinstance(exc, TraceFormatError):
                raise
            raise TraceFormatError(f"trace JSON cannot be read: {exc}") from None
        rvs: dict[str, RV] = {}

        def ref(name: Any) -> RV:
            if not isinstance(name, str) or name not in rvs:
                raise TraceFormatError(f"trace uses random variable {name!r} before defining it")
            return rvs[name]

        insts = []
        for k, rec in enumerate(data["insts"]):
            try:
                insts.append(_instruction_from_json(rec, ref, rvs))
            except TraceFormatError as exc:
                raise type(exc)(f"instruction {k}: {exc}") from None
            except (KeyError, TypeError, AttributeError, ValueError, RecursionError) as exc:
                what = f"missing {exc}" if type(exc) is KeyError else str(exc)
                raise TraceFormatError(f"instruction {k}: malformed ({what}): {_clip(rec)}") from None
        return cls(insts)

    @staticmethod
    def from_python(text: str, func: Any, seed: Optional[int] = None) -> "Trace":
        """Run trace text (``as_python()`` output, or hand-written) on a fresh schedule of
        ``func`` and return the trace it records. This executes the text: use it for code you
        trust; databases use :meth:`from_json`. (``Schedule.from_python`` returns the schedule.)"""
        assert schedule_class is not None, "workbench.schedule.schedule defines the Schedule class"
        return schedule_class.from_python(text, func, seed).trace

    # replay --------------------------------------------------------------------------------
    def apply_to_schedule(
        self,
        sch: Schedule,
        decision_provider: Optional[DecisionProvider] = None,
    ) -> dict[RV, RV]:
        """Replay every instruction on ``sch``; returns this trace's RVs -> ``sch``'s RVs.

        Sampling instructions use their recorded decision unless a ``decision_provider`` is
        given and the instruction is not pinned: then ``decision_provider(inst, decision)`` is
        used (None draws a new one from ``sch.rng``; see :func:`resample`).

        All or nothing: an instruction that cannot be applied raises its ``ScheduleError``,
        whose ``step`` is that instruction's index in this trace (a trace that uses a variable
        it never defines: ``ValueError``), and ``sch`` is left as it was before the call.
        """
        saved = sch._save()
        try:
            return self._replay(sch, decision_provider)
        except BaseException:
            sch._restore(saved)
            raise

    def _replay(self, sch: Schedule, decision_provider: Optional[DecisionProvider]) -> dict[RV, RV]:
        rv_map: dict[RV, RV] = {}

        def lookup(rv: RV) -> RV:
            try:
                return rv_map[rv]
            except KeyError:
                raise ValueError(f"trace uses a random variable ({rv!r}) it never defines") from None

        for step, inst in enumerate(self.insts):
            try:
                args = {k: map_rvs(v, lookup) for k, v in inst.args.items()}
                decision = inst.decision
                if inst.kind.is_sampling and decision_provider is not None and not inst.pinned:
                    decision = decision_provider(inst, decision)
                result = sch._apply(inst.kind, args, decision, pinned=inst.pinned)
                outputs = list(iter_rvs(result))
                if len(outputs) != len(inst.outputs):
                    raise ScheduleError(
                        inst.kind.name,
                        f"replay returned {len(outputs)} "
                        f"random variables where the trace recorded "
                        f"{len(inst.outputs)}",
                    )
            except ScheduleError as exc:
                exc.step = step  # type: ignore[attr-defined]
                raise
            rv_map.update(zip(inst.outputs, outputs))
        return rv_map

    # editing -------------------------------------------------------------------------------
    def _locate(self, inst: Union[Instruction, RV, int]) -> int:
        """Position of an instruction given itself, its index, or one of its output RVs.

        Pinning replaces an instruction by an updated copy; a stale handle is still found
        through its outputs, which the copy shares.
        """
        if isinstance(inst, int):
            if not -len(self.insts) <= inst < len(self.insts):
                raise IndexError(f"trace has {len(self.insts)} instructions, no index {inst}")
            return inst % len(self.insts)
        for k, cur in enumerate(self.insts):
            if cur is inst:
                return k
        target = inst.outputs if isinstance(inst, Instruction) else (inst,)
        for k, cur in enumerate(self.insts):
            if target and any(rv in cur.outputs for rv in target):
                return k
        raise ValueError(f"{inst!r} is not an instruction of this trace")

    def _sampling_at(self, inst: Union[Instruction, RV, int]) -> int:
        k = self._locate(inst)
        if not self.insts[k].kind.is_sampling:
            raise ValueError(
                f"instruction {k} ({self.insts[k].kind.name}) samples nothing: "
                f"only sampling instructions have decisions"
            )
        return k

    def with_decision(
        self,
        inst: Union[Instruction, RV, int],
        value: Any,
        remove_postproc: bool = False,
        *,
        pinned: Optional[bool] = None,
    ) -> "Trace":
        """A new trace where ``inst`` has decision ``value`` (and ``pinned``, when given).

        ``remove_postproc`` (TVM's argument, what a mutator wants): the new trace stops before
        ``enter_postproc``, so the postprocessors run again when it is replayed.
        """
        k = self._sampling_at(inst)
        out = self.copy()
        if remove_postproc:
            cut = next(
                (n for n, cur in enumerate(out.insts) if cur.kind.name == "enter_postproc"), len(out.insts)
            )
            if k >= cut:
                raise ValueError(
                    f"instruction {k} ({out.insts[k].kind.name}) belongs to the "
                    f"postprocessing part that remove_postproc drops"
                )
            del out.insts[cut:]
        cur = out.insts[k]
        out.insts[k] = dataclasses.replace(
            cur, decision=value, pinned=cur.pinned if pinned is None else pinned
        )
        return out

    def pin(self, inst: Union[Instruction, RV, int], value: Any = None) -> None:
        """Mark a decision as fixed (search never changes it), optionally setting it first."""
        k = self._sampling_at(inst)
        cur = self.insts[k]
        self.insts[k] = dataclasses.replace(
            cur, pinned=True, decision=cur.decision if value is None else value
        )

    def free(self, inst: Union[Instruction, RV, int]) -> None:
        """Let the search change this decision again."""
        k = self._sampling_at(inst)
        self.insts[k] = dataclasses.replace(self.insts[k], pinned=False)

    def simplified(self) -> "Trace":
        """The trace without pure instructions (queries, sampling) whose outputs are unused."""
        used: set[RV] = set()
        keep: list[Instruction] = []
        for inst in reversed(self.insts):
            if inst.kind.is_pure and not any(rv in used for rv in inst.outputs):
                continue
            keep.append(inst)
            used.update(inst.inputs)
        keep.reverse()
        return Trace(keep, self.base_func)


def _instruction_from_json(rec: Any, ref: Callable[[str], RV], rvs: dict[str, RV]) -> Instruction:
    if not isinstance(rec, dict):
        raise TraceFormatError(f"expected an object, got {_clip(rec)}")
    name = rec["kind"]
    if not isinstance(name, str):
        raise TraceFormatError(f"kind must be a string, got {_clip(name)}")
    try:
        kind = get_kind(name)
    except KeyError as exc:
        raise UnknownInstructionKind(str(exc.args[0])) from None
    if not isinstance(rec["args"], dict):
        raise TraceFormatError(f"{kind.name}: args must be an object, got {_clip(rec['args'])}")
    args = kind.complete({a: _from_json(v, ref) for a, v in rec["args"].items()})
    outputs = []
    names = rec.get("outputs", [])
    if not isinstance(names, list):
        raise TraceFormatError(f"{kind.name}: outputs must be a list, got {_clip(names)}")
    for out in names:
        cls_ = RV_CLASSES.get(out[:1]) if isinstance(out, str) else None
        if cls_ is None or out in rvs:
            raise TraceFormatError(f"{kind.name}: bad output name {out!r}")
        rvs[out] = cls_()
        outputs.append(rvs[out])
    return Instruction(
        kind,
        args,
        tuple(outputs),
        bool(rec.get("multi", False)),
        _from_json(rec.get("decision"), ref),
        bool(rec.get("pinned", False)),
    )


def _clip(value: Any, width: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _to_json(value: Any, names: dict[RV, str]) -> Any:
    if isinstance(value, RV):
        return {"rv": names[value]}
    if isinstance(value, (list, tuple)):
        return [_to_json(v, names) for v in value]
    if isinstance(value, dict):
        return {"dict": [[k, _to_json(v, names)] for k, v in value.items()]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot serialize {type(value).__name__} {value!r} in a trace")


def _from_json(value: Any, ref: Callable[[str], RV]) -> Any:
    if isinstance(value, list):
        return [_from_json(v, ref) for v in value]
    if isinstance(value, dict):
        if set(value) == {"rv"}:
            return ref(value["rv"])
        if set(value) == {"dict"}:
            return {k: _from_json(v, ref) for k, v in value["dict"]}
        raise TraceFormatError(f"unexpected object in trace JSON: {_clip(value)}")
    return value
