"""The instruction registry: every primitive is one function plus ``@schedule_primitive``.

Registering a function makes it an *instruction kind*, and ``sch.<name>(...)`` a method that
checks its arguments once, runs it atomically, records an :class:`Instruction` in the trace, and
the trace can render it as Python, serialize it to JSON and replay it::

    @schedule_primitive("double_split")
    def double_split(sch: Schedule, loop: LoopRV, inner: int) -> list[LoopRV]:
        \"\"\"Split ``loop`` twice: ``[None, inner, inner]``.\"\"\"
        outer, mid = sch.split(loop, [None, inner * inner])   # nested: not recorded
        return [outer, *sch.split(mid, [inner, inner])]

Argument checking comes from the annotations: a parameter annotated with ``LoopRV`` /
``BlockRV`` (or a union or list of them) must receive random variables of this schedule that
still exist; where a ``BlockRV`` is expected a block name is accepted and turned into a recorded
``get_block``. Every random variable anywhere in the arguments is checked the same way.

A parameter annotated with a class that defines ``__trace_arg__(value)`` (a classmethod) records
what that hook returns instead of what the caller passed: a Python lambda given as an index
map is recorded as its text, so the trace stays plain JSON (see ``workbench.ir.index_map``).

Sampling primitives (``sampling=True``) take ``decision=None`` and return ``(result,
decision)``: the decision they used (given, or freshly drawn from ``sch.rng``) is stored on the
instruction, and replaying the instruction with that decision reproduces the result.

The decorator returns the traced method, with the implementation's signature for type checkers:
``Schedule``'s class body lists the built-in primitives (``split = loops.split``), which is what
makes them visible to a reader of ``schedule.py``, to ``help()`` and to mypy. A primitive
registered elsewhere (a researcher's file, a notebook cell) is served from :data:`REGISTRY` by
``Schedule.__getattr__``; nothing is set on the class, so this module does not import it.

``tvm_name`` / ``tvm_inputs`` / ``tvm_attrs`` declare the primitive's TVM counterpart, as TVM's
instruction kind declares ``kName``, its inputs and its attributes; the TVM database importer
and :meth:`InstructionKind.matches` read them from here.
"""

from __future__ import annotations

import functools
import inspect
import json
import types
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, ParamSpec, TypeVar

from ..errors import ScheduleError
from .rv import RV, BlockRV

if TYPE_CHECKING:  # a hint only: schedule.py imports the primitives, which import this module
    from .schedule import Schedule

#: name -> kind, for every registered primitive
REGISTRY: dict[str, "InstructionKind"] = {}


@dataclass(frozen=True, eq=False)
class Instruction:
    """One recorded step: ``outputs = kind(**args, decision=decision)``.

    ``args`` maps every parameter (defaults included, in signature order) to its value, with
    random variables referenced by identity; ``multi`` tells a list result from a single one.
    ``pinned``: the search must keep this sampling decision. ``kind.name`` is workbench's
    spelling (``"split"``); ``kind.matches("Split")`` also accepts TVM's, ``kind.tvm_name``
    gives it.
    """

    kind: "InstructionKind"
    args: Mapping[str, Any]
    outputs: tuple[RV, ...] = ()
    multi: bool = False
    decision: Any = None
    pinned: bool = False

    @property
    def inputs(self) -> list[RV]:
        """The random variables this instruction reads, in argument order."""
        return [rv for v in self.args.values() for rv in iter_rvs(v)]

    @property
    def attrs(self) -> dict[str, Any]:
        """The arguments that mention no random variable (plain attributes)."""
        return {k: v for k, v in self.args.items() if not any(True for _ in iter_rvs(v))}

    def __repr__(self) -> str:
        return f"<Instruction {self.kind.name}>"


def iter_rvs(value: Any):
    """Every random variable inside ``value`` (nested lists / tuples / dicts)."""
    if isinstance(value, RV):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from iter_rvs(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from iter_rvs(v)


def map_rvs(value: Any, fn: Callable[[RV], Any]) -> Any:
    """``value`` with each random variable replaced by ``fn(rv)`` (tuples become lists)."""
    if isinstance(value, RV):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return [map_rvs(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_rvs(v, fn) for k, v in value.items()}
    return value


# ------------------------------------------------------------------------------------------
# argument checking derived from annotations


def _rv_spec(hint: Any) -> Optional[tuple[tuple[type, ...], bool, bool]]:
    """For an annotation: (RV classes accepted, other values accepted too, is a list)."""
    origin = typing.get_origin(hint)
    if origin in (list, tuple) or getattr(origin, "__name__", "") == "Sequence":
        args = typing.get_args(hint)
        inner = _rv_spec(args[0]) if args else None
        return None if inner is None else (inner[0], inner[1], True)
    members = typing.get_args(hint) if origin in (typing.Union, types.UnionType) else (hint,)
    rvs = tuple(m for m in members if isinstance(m, type) and issubclass(m, RV))
    if not rvs:
        return None
    return rvs, len(rvs) < len(members), False


def _eval_hint(ann: Any, globalns: dict) -> Any:
    if not isinstance(ann, str):
        return ann
    try:
        return eval(ann, globalns)  # annotations of registered functions, not user data
    except Exception:  # an annotation we cannot resolve is simply not checked
        return None


class InstructionKind:
    """A registered primitive: name, implementation, traits, Python rendering, docs, and its
    TVM counterpart (:attr:`tvm_name`, :attr:`tvm_inputs`, :attr:`tvm_attrs`)."""

    def __init__(
        self,
        name: str,
        fn: Callable,
        *,
        sampling: bool,
        pure: bool,
        as_python: Optional[Callable[["Instruction", Mapping[RV, str]], str]],
        tvm_name: Optional[str] = None,
        tvm_aliases: tuple[str, ...] = (),
        tvm_inputs: Optional[tuple[str, ...]] = None,
        tvm_attrs: tuple[str, ...] = (),
    ):
        self.name = name
        self.fn = fn
        #: TVM's name of this kind: ``split`` -> ``"Split"``, ``sample_perfect_tile`` ->
        #: ``"SamplePerfectTile"`` (the CamelCase of ``name`` unless declared: ``"RFactor"``,
        #: ``"GetSBlock"``, TVM 0.27's; ``name`` stays workbench's spelling)
        self.tvm_name: str = tvm_name or "".join(p.capitalize() for p in name.split("_"))
        #: other TVM names of this kind (older releases: ``get_block`` was ``"GetBlock"``)
        self.tvm_aliases: tuple[str, ...] = tuple(tvm_aliases)
        #: TVM's inputs (random variables and lists of them), in TVM's order, as parameter
        #: names of this primitive; ``*name`` takes the remaining inputs. None: a TVM trace's
        #: instruction of this kind cannot be imported (an IndexMap or intrinsic input).
        self.tvm_inputs: Optional[tuple[str, ...]] = None if tvm_inputs is None else tuple(tvm_inputs)
        #: TVM's attributes (plain values), in TVM's order, as parameter names; ``-name``: TVM's
        #: attribute workbench drops, ``!name``: one that must be 0 (workbench has no such option)
        self.tvm_attrs: tuple[str, ...] = tuple(tvm_attrs)
        #: the traced method ``sch.<name>`` (set by :func:`schedule_primitive`)
        self.method: Callable[..., Any] = fn
        self.is_sampling = sampling
        self.is_pure = pure
        self.doc = inspect.getdoc(fn) or ""
        self.renderer = as_python
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
            raise TypeError(f"primitive {name}: the first parameter must be the schedule")
        if any(p.kind == p.VAR_KEYWORD for p in params):
            raise TypeError(f"primitive {name}: **kwargs cannot be recorded; name each parameter")
        if sampling and "decision" not in sig.parameters:
            raise TypeError(f"sampling primitive {name} must take a `decision=None` parameter")
        self.signature = sig
        #: the parameters recorded in an instruction (all but the schedule and the decision)
        self.params = [p for p in params[1:] if p.name != "decision" or not sampling]
        globalns = getattr(fn, "__globals__", {})
        self.specs = {
            p.name: _rv_spec(_eval_hint(p.annotation, globalns))
            for p in self.params
            if p.annotation is not p.empty
        }
        #: parameter -> its annotation's ``__trace_arg__`` hook (the value to record)
        self.recorders = {}
        for p in self.params:
            hint = _eval_hint(p.annotation, globalns) if p.annotation is not p.empty else None
            if typing.get_origin(hint) in (typing.Union, types.UnionType):  # Optional[X]: X's hook
                hint = next((a for a in typing.get_args(hint) if a is not type(None)), None)
            hook = getattr(hint, "__trace_arg__", None) if isinstance(hint, type) else None
            if hook is not None:
                self.recorders[p.name] = hook

    def __repr__(self) -> str:
        return f"<InstructionKind {self.name}>"

    # names ---------------------------------------------------------------------------------
    def matches(self, name: str) -> bool:
        """Whether ``name`` names this kind, in workbench's spelling or TVM's:
        ``kind.matches("split")``, ``kind.matches("Split")``; ``get_block`` also matches
        older TVM's ``"GetBlock"``. What a mutator ported from TVM compares with."""
        return name in (self.name, self.tvm_name, *self.tvm_aliases)

    @functools.cached_property
    def returns_list(self) -> bool:
        """Whether the method returns a list of random variables (its return annotation says
        ``list[...]``): TVM's traces do not record it, workbench's do."""
        hint = _eval_hint(self.signature.return_annotation, getattr(self.fn, "__globals__", {}))
        return typing.get_origin(hint) is list or hint is list

    # arguments -----------------------------------------------------------------------------
    def bind(self, args: tuple, kwargs: dict) -> tuple[dict[str, Any], Any]:
        """(arguments in signature order with defaults, decision) from a call's args."""
        try:
            bound = self.signature.bind(None, *args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"sch.{self.name}: {exc}") from None
        bound.apply_defaults()
        values = bound.arguments
        decision = values.get("decision") if self.is_sampling else None
        return {p.name: values[p.name] for p in self.params}, decision

    def complete(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Stored arguments in signature order, defaults filled in (for traces read back)."""
        unknown = set(args) - {p.name for p in self.params}
        if unknown:
            raise ValueError(f"instruction {self.name} has no parameter(s) {sorted(unknown)}")
        out = {}
        for p in self.params:
            if p.name in args:
                out[p.name] = args[p.name]
            elif p.kind == p.VAR_POSITIONAL:
                out[p.name] = []
            elif p.default is not p.empty:
                out[p.name] = p.default
            else:
                raise ValueError(f"instruction {self.name} lacks argument {p.name!r}")
        return out

    def check(self, sch: Schedule, args: dict[str, Any]) -> dict[str, Any]:
        """Check and normalize arguments: RV types, RVs of this schedule, names -> BlockRVs."""
        out = {}
        for p in self.params:
            value = args[p.name]
            spec = self.specs.get(p.name)
            if spec is not None:
                listy = spec[2] or p.kind == p.VAR_POSITIONAL
                if listy:
                    if not isinstance(value, (list, tuple)):
                        raise ScheduleError(self.name, f"expected a list, got {value!r}", argument=p.name)
                    value = [self._check_one(sch, p.name, spec, v) for v in value]
                else:
                    value = self._check_one(sch, p.name, spec, value)
            # (mypy cannot infer a lambda with a default argument)
            value = map_rvs(value, lambda rv, a=p.name: sch._resolve_rv(rv, self.name, a))  # type: ignore[misc]
            hook = self.recorders.get(p.name)
            if hook is not None:
                try:
                    value = hook(value)
                except (TypeError, ValueError) as exc:
                    raise ScheduleError(self.name, str(exc), argument=p.name) from None
            out[p.name] = value
        return out

    def _check_one(self, sch: Schedule, argument: str, spec, value: Any) -> Any:
        classes, others, _ = spec
        if isinstance(value, RV):
            if not isinstance(value, classes):
                raise ScheduleError(
                    self.name, f"expected {_names(classes)}, got a {type(value).__name__}", argument=argument
                )
            return value
        if isinstance(value, str) and BlockRV in classes and not others:
            return sch.get_block(value)  # recorded when called from the outermost primitive
        if not others:
            raise ScheduleError(self.name, f"expected {_names(classes)}, got {value!r}", argument=argument)
        return value

    # running and rendering -----------------------------------------------------------------
    def invoke(self, sch: Schedule, args: Mapping[str, Any], decision: Any = None) -> Any:
        """Call the implementation with checked arguments."""
        positional, keywords = [], {}
        for p in self.params:
            if p.kind == p.VAR_POSITIONAL:
                positional.extend(args[p.name])
            elif p.kind == p.KEYWORD_ONLY:
                keywords[p.name] = args[p.name]
            else:
                positional.append(args[p.name])
        if self.is_sampling:
            keywords["decision"] = decision
        return self.fn(sch, *positional, **keywords)

    def as_python(self, inst: Instruction, names: Mapping[RV, str]) -> str:
        """The instruction as a line of Python, TVM style: ``l1, l2 = sch.split(loop=l0, ...)``."""
        if self.renderer is not None:
            return self.renderer(inst, names)
        parts: list[str] = []
        for p in self.params:
            value = inst.args[p.name]
            if p.kind == p.VAR_POSITIONAL:
                parts.extend(py_value(v, names) for v in value)
            else:
                parts.append(f"{p.name}={py_value(value, names)}")
        if self.is_sampling:
            parts.append(f"decision={py_value(inst.decision, names)}")
        call = f"sch.{self.name}({', '.join(parts)})"
        outs = [names[rv] for rv in inst.outputs]
        if not outs:
            return call
        if inst.multi:
            return f"{', '.join(outs)}{',' if len(outs) == 1 else ''} = {call}"
        return f"{outs[0]} = {call}"


def _names(classes: tuple[type, ...]) -> str:
    return " or ".join(c.__name__ for c in classes)


def py_value(value: Any, names: Mapping[RV, str]) -> str:
    """Python source for an argument value (random variables by their trace names)."""
    if isinstance(value, RV):
        return names[value]
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else f'float("{value}")'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(py_value(v, names) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_value(k, names)}: {py_value(v, names)}" for k, v in value.items()) + "}"
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    raise TypeError(
        f"cannot render {type(value).__name__} {value!r} in a trace; arguments "
        f"must be ints, floats, strings, lists, dicts or random variables"
    )


#: Schedule attributes a primitive may not shadow
_RESERVED = {
    "func",
    "trace",
    "history",
    "rng",
    "symbols",
    "get",
    "copy",
    "seed",
    "fork_seed",
    "index",
    "replace",
    "new_rv",
    "show",
}


_P = ParamSpec("_P")
_R = TypeVar("_R")


def schedule_primitive(
    name: Optional[str] = None,
    *,
    sampling: bool = False,
    pure: Optional[bool] = None,
    as_python: Optional[Callable[[Instruction, Mapping[RV, str]], str]] = None,
    tvm_name: Optional[str] = None,
    tvm_aliases: tuple[str, ...] = (),
    tvm_inputs: Optional[tuple[str, ...]] = None,
    tvm_attrs: tuple[str, ...] = (),
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Register ``fn(sch, ...)`` as the instruction kind ``name``; ``sch.name(...)`` applies it.

    Returns the traced method (what ``sch.name`` is), with ``fn``'s signature and docstring.
    ``pure``: the instruction has no effect on the function (queries, sampling); a trace's
    ``simplified()`` drops pure instructions whose outputs are unused. Defaults to ``sampling``.
    ``as_python``: a custom renderer ``(inst, rv_names) -> str`` for the trace text.
    ``tvm_name``, ``tvm_aliases``, ``tvm_inputs``, ``tvm_attrs``: TVM's counterpart (see
    :class:`InstructionKind`); ``tvm_inputs`` given (``()`` for none) makes the kind importable
    from TVM's traces. Registering a name again replaces the earlier kind (re-running a
    notebook cell), for ``sch.name`` and for the methods listed in ``Schedule``'s class body.
    """

    def register(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        kind_name = name or fn.__name__
        if kind_name in _RESERVED or kind_name.startswith("_"):
            raise ValueError(f"cannot register a primitive named {kind_name!r}")
        kind = InstructionKind(
            kind_name,
            fn,
            sampling=sampling,
            pure=sampling if pure is None else pure,
            as_python=as_python,
            tvm_name=tvm_name,
            tvm_aliases=tvm_aliases,
            tvm_inputs=tvm_inputs,
            tvm_attrs=tvm_attrs,
        )

        @functools.wraps(fn)
        def method(sch: Schedule, *args: Any, **kwargs: Any) -> Any:
            # the kind registered under this name now: a notebook cell may have replaced it
            current = REGISTRY.get(kind_name)
            if current is None:
                raise AttributeError(f"the primitive {kind_name!r} was unregistered")
            arguments, decision = current.bind(args, kwargs)
            return sch._apply(current, arguments, decision)

        kind.method = method
        REGISTRY[kind_name] = kind
        return typing.cast(Callable[_P, _R], method)

    return register


def unregister(name: str) -> None:
    """Remove a registered primitive: its kind, and with it the method ``sch.name``."""
    REGISTRY.pop(name)


def get_kind(name: str) -> InstructionKind:
    """The registered kind ``name`` (KeyError naming the known kinds otherwise)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"unknown instruction kind {name!r}: import the module that registers it "
            f"(known: {', '.join(sorted(REGISTRY))})"
        ) from None
