"""``Schedule``: the current function, the random variables' symbol table, the trace, the rng.

The IR is immutable and the schedule is the mutable thing (DESIGN decision 2): each primitive
replaces ``sch.func`` by a new function that shares the untouched subtrees, and ``sch.history``
keeps every step's function so a UI can step back and forth for free. A primitive either
succeeds or raises and leaves the schedule exactly as it was (function, symbols, trace,
history, rng state).

The primitives themselves (``split``, ``get_block``, ``sample_perfect_tile`` …) are functions
registered by ``@schedule_primitive`` (see :mod:`workbench.schedule.instruction`), one module per
family in :mod:`workbench.schedule.primitives`. The class body lists each built-in one
(``split = loops.split``), so this file, ``help(Schedule)`` and mypy see them all; a primitive
registered from outside this package is served from the registry by ``__getattr__``.
"""

from __future__ import annotations

import random
import types
from typing import TYPE_CHECKING, Any, Optional, Union

from ..errors import ScheduleError
from ..ir.func import PrimFunc
from ..ir.module import IRModule
from ..ir.stmt import BlockRealize, Stmt
from ..ir.verify import bounds_problems
from . import trace as _trace
from .instruction import REGISTRY, Instruction, InstructionKind, iter_rvs
from .primitives import (
    annotation,
    block_signature,
    cache,
    cache_variants,
    compute_location,
    for_kind,
    inline,
    layout,
    loops,
    padding,
    partition,
    postproc,
    query,
    read_write_at,
    reduction,
    sampling,
)
from .primitives import blockize as blockize_tensorize
from .rv import LOCATION_PRIMITIVES, RV, ExprRV, LoopRV
from ..ir.index import FuncIndex, index, replace
from .trace import Trace


class _RegisteredPrimitives(type):
    """``Schedule.<name>`` for a primitive registered outside the class body (a researcher's
    file, a notebook cell): looked up in the registry, so unregistering removes it too."""

    if not TYPE_CHECKING:  # mypy knows the listed primitives only, and flags misspelled ones

        def __getattr__(cls, name: str) -> Any:
            kind = None if name.startswith("_") else REGISTRY.get(name)
            if kind is None:
                raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")
            return kind.method


class Schedule(metaclass=_RegisteredPrimitives):
    """Transform ``func`` step by step with traced primitives.

    >>> sch = Schedule(func, seed=0)
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> io, ii = sch.split(i, factors=[None, 16])
    >>> print(sch.trace)
    b0 = sch.get_block(name="C")
    l1, l2, l3 = sch.get_loops(block=b0)
    l4, l5 = sch.split(loop=l1, factors=[None, 16], preserve_unit_iters=True)
    """

    #: the module's functions by name (``self.func`` is the current one's latest version) and
    #: the name of the current one; a schedule of a PrimFunc has a module of one
    _funcs: dict[str, PrimFunc]
    _func_name: str

    def __init__(self, func: Union[PrimFunc, IRModule], seed: Optional[int] = None):
        if isinstance(func, IRModule):
            mod = func
            func = mod[mod.default_name]
            self._funcs, self._func_name = dict(mod), func.name
        elif isinstance(func, PrimFunc):
            self._funcs, self._func_name = {func.name: func}, func.name
        if not isinstance(func, PrimFunc):
            raise TypeError(f"Schedule expects a PrimFunc or an IRModule, got {type(func).__name__}")
        if not isinstance(func.body, BlockRealize):
            raise TypeError(f"function {func.name}: the body must be the root block's realize")
        self.func: PrimFunc = func
        #: random variable -> block name (BlockRV) / loop variable (LoopRV) / int (ExprRV)
        self.symbols: dict[RV, Any] = {}
        self.trace = Trace(base_func=func)
        #: (instruction or None for the start, function after it), one entry per step
        self.history: list[tuple[Optional[Instruction], PrimFunc]] = [(None, func)]
        self.rng = random.Random(seed)
        self._running: list[str] = []  # names of the primitives being applied (nesting)

    # primitives: every built-in one, by family (one module each, in workbench.schedule.primitives);
    # a new built-in primitive gets its line here, which is what shows it to readers and mypy
    # queries
    get_block = query.get_block
    get_loops = query.get_loops
    get_child_blocks = query.get_child_blocks
    get_producers = query.get_producers
    get_consumers = query.get_consumers
    get_output_blocks = query.get_output_blocks
    # sampling
    sample_perfect_tile = sampling.sample_perfect_tile
    sample_categorical = sampling.sample_categorical
    sample_partitioned_tile = sampling.sample_partitioned_tile
    sample_compute_location = compute_location.sample_compute_location
    # loops
    split = loops.split
    fuse = loops.fuse
    reorder = loops.reorder
    add_unit_loop = loops.add_unit_loop
    merge = loops.merge
    loop_partition = partition.loop_partition
    # loop kinds and thread binding
    parallel = for_kind.parallel
    vectorize = for_kind.vectorize
    unroll = for_kind.unroll
    bind = for_kind.bind
    # annotations
    annotate = annotation.annotate
    unannotate = annotation.unannotate
    # compute location and inlining
    compute_at = compute_location.compute_at
    reverse_compute_at = compute_location.reverse_compute_at
    compute_inline = inline.compute_inline
    reverse_compute_inline = inline.reverse_compute_inline
    # caching and buffer copies
    cache_read = cache.cache_read
    cache_write = cache.cache_write
    reindex = cache.reindex
    read_at = read_write_at.read_at
    write_at = read_write_at.write_at
    reindex_cache_read = cache_variants.reindex_cache_read
    reindex_cache_write = cache_variants.reindex_cache_write
    cache_inplace = cache_variants.cache_inplace
    # layout
    set_scope = layout.set_scope
    storage_align = layout.storage_align
    transform_layout = layout.transform_layout
    transform_block_layout = layout.transform_block_layout
    decompose_padding = layout.decompose_padding
    can_decompose_padding = padding.can_decompose_padding
    pad_einsum = padding.pad_einsum
    # block signatures (TVM's unsafe_* and buffer-access overrides)
    reorder_block_iter_var = block_signature.reorder_block_iter_var
    unsafe_set_dtype = block_signature.unsafe_set_dtype
    unsafe_hide_buffer_access = block_signature.unsafe_hide_buffer_access
    annotate_buffer_access = block_signature.annotate_buffer_access
    # reductions
    rfactor = reduction.rfactor
    decompose_reduction = reduction.decompose_reduction
    # blockize and tensorize
    blockize = blockize_tensorize.blockize
    tensorize = blockize_tensorize.tensorize
    # trace markers
    enter_postproc = postproc.enter_postproc

    if not TYPE_CHECKING:  # mypy knows the listed primitives only, and flags misspelled ones

        def __getattr__(self, name: str) -> Any:
            """``sch.<name>`` for a primitive registered outside the class body."""
            kind = None if name.startswith("_") else REGISTRY.get(name)
            if kind is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            return types.MethodType(kind.method, self)

    def __dir__(self) -> list[str]:  # tab completion offers every registered primitive
        return sorted({*super().__dir__(), *REGISTRY})

    @classmethod
    def from_python(cls, text: str, func: PrimFunc, seed: Optional[int] = None) -> "Schedule":
        """A fresh schedule of ``func`` that ran trace text (``trace.as_python()`` output, or
        hand-written). This executes the text: use it for code you trust; databases read
        traces with :meth:`Trace.from_json`."""
        sch = cls(func, seed=seed)
        exec(compile(text, "<trace>", "exec"), {"sch": sch})
        return sch

    # modules ----------------------------------------------------------------------------
    @property
    def mod(self) -> IRModule:
        """The scheduled module: the current function as scheduled so far, the others as the
        last :meth:`work_on` left them (unscheduled ones as they were)."""
        return IRModule({**self._funcs, self._func_name: self.func})

    def work_on(self, func_name: str) -> None:
        """Schedule the module's function ``func_name`` from now on (``sch.func`` becomes it).

        As in TVM, this is not a traced instruction; a trace that must replay on a module
        names the function in ``get_block(name, func_name=...)``, which switches too. Unlike
        TVM, random variables belong to the function they were made in: one of another
        function is refused until :meth:`work_on` switches back."""
        if func_name not in self._funcs:
            raise ScheduleError(
                "work_on",
                f"no function named {func_name!r}; the module has {', '.join(map(repr, self._funcs))}",
                argument="func_name",
            )
        if func_name == self._func_name:
            return
        parked = self.__dict__.setdefault("_parked", {})
        parked[self._func_name] = {rv: v for rv, v in self.symbols.items() if not isinstance(rv, ExprRV)}
        self._funcs = {**self._funcs, self._func_name: self.func}
        self.symbols = {rv: v for rv, v in self.symbols.items() if isinstance(rv, ExprRV)}
        self.symbols.update(parked.pop(func_name, {}))
        self._func_name = func_name
        self.func = self._funcs[func_name]

    # state ------------------------------------------------------------------------------
    @property
    def index(self) -> FuncIndex:
        """Lookup tables of the current function (cached)."""
        return index(self.func)

    def replace(self, old: Stmt, new: Optional[Stmt]) -> None:
        """Replace a statement of the current function (for primitive implementations)."""
        self.func = replace(self.func, old, new)

    def new_rv(self, cls: type, value: Any) -> Any:
        """A fresh random variable standing for ``value`` (for primitive implementations)."""
        rv = cls()
        self.symbols[rv] = value
        return rv

    # random variables ---------------------------------------------------------------------
    def get(self, rv: Union[RV, list, tuple]) -> Any:
        """What a random variable stands for now: a ``Block``, a ``For`` or an int.

        A list (or tuple) of variables gives a list.
        """
        if isinstance(rv, (list, tuple)):
            return [self.get(x) for x in rv]
        primitive = self._running[-1] if self._running else "get"
        return self._lookup(rv, primitive, None)

    def _resolve_rv(self, rv: RV, primitive: str, argument: Optional[str]) -> RV:
        """Check that ``rv`` is a live variable of this schedule (used on every argument)."""
        self._lookup(rv, primitive, argument)
        return rv

    def _lookup(self, rv: RV, primitive: str, argument: Optional[str]) -> Any:
        if not isinstance(rv, RV):
            raise ScheduleError(primitive, f"expected a random variable, got {rv!r}", argument=argument)
        try:
            value = self.symbols[rv]
        except KeyError:
            owner = next((f for f, syms in self.__dict__.get("_parked", {}).items() if rv in syms), None)
            if owner is not None:
                raise ScheduleError(
                    primitive,
                    f"this {type(rv).__name__} belongs to function {owner!r}, not to "
                    f"{self._func_name!r} scheduled now; call sch.work_on({owner!r}) first",
                    argument=argument,
                ) from None
            raise ScheduleError(
                primitive,
                f"this {type(rv).__name__} is not a random variable "
                f"of this schedule (it was made by another one)",
                argument=argument,
            ) from None
        if isinstance(rv, ExprRV):
            return value
        if isinstance(rv, LoopRV) and isinstance(value, str):
            return self._location(value, primitive, argument)
        idx = self.index
        if isinstance(rv, LoopRV):
            node = idx.loops.get(value)
            if node is None:
                raise self._gone(rv, f"loop {value.name!r}", primitive, argument)
            return node
        realize = idx.realizes.get(value)
        if realize is None:
            raise self._gone(rv, f"block {value!r}", primitive, argument)
        return realize.block

    @staticmethod
    def _location(mark: str, primitive: str, argument: Optional[str]) -> str:
        """A LoopRV holding a compute location (``"root"`` / ``"inline"``) instead of a loop."""
        if primitive in LOCATION_PRIMITIVES:
            return mark
        raise ScheduleError(
            primitive,
            f"this LoopRV is the compute location {mark!r} drawn by "
            f"sample_compute_location, not a loop; only "
            f"{', '.join(sorted(LOCATION_PRIMITIVES - {'get'}))} accept it",
            argument=argument,
        )

    def _gone(self, rv: RV, what: str, primitive: str, argument: Optional[str]) -> ScheduleError:
        """The error for a variable whose loop/block a later step removed, naming that step."""
        value = self.symbols[rv]

        def alive(step: int) -> bool:
            idx = index(self.history[step][1])
            return value in (idx.loops if isinstance(rv, LoopRV) else idx.realizes)

        name = self.trace.rv_names().get(rv, "it")
        lines = self.trace.as_python().splitlines()
        for step in range(1, len(self.history)):
            if alive(step - 1) and not alive(step) and step - 1 < len(lines):
                return ScheduleError(
                    primitive,
                    f"{what} ({name}) no longer exists: step {step} removed it: `{lines[step - 1]}`",
                    argument=argument,
                )
        return ScheduleError(
            primitive, f"{what} ({name}) no longer exists in the function", argument=argument
        )

    # applying primitives ------------------------------------------------------------------
    def _apply(
        self, kind: InstructionKind, args: dict[str, Any], decision: Any = None, pinned: bool = False
    ) -> Any:
        """Check, run atomically and (when outermost) record one primitive call."""
        outer = not self._running
        saved = self._save()
        try:
            args = kind.check(self, args)
            if decision is not None and not kind.is_sampling:
                raise ScheduleError(
                    kind.name, "only sampling instructions take a decision", argument="decision"
                )
            self._running.append(kind.name)
            try:
                result = kind.invoke(self, args, decision)
            finally:
                self._running.pop()
            if kind.is_sampling:
                given = decision
                result, decision = result
                if pinned and given is not None and _as_list(decision) != _as_list(given):
                    # a sampler may replace a replayed decision that no longer fits by a near
                    # one (sample_compute_location does, as TVM's); a pinned one must not move
                    raise ScheduleError(
                        kind.name,
                        f"the pinned decision {given!r} cannot be replayed: it is not a valid "
                        f"choice in this program (the sampler would take {decision!r} instead); "
                        f"a pinned decision is kept or refused, never replaced",
                        argument="decision",
                    )
            if outer and self.func is not saved[0] and self.func.name == saved[0].name:
                _check_bounds(kind.name, saved[0], self.func)
        except BaseException:
            self._restore(saved)
            raise
        if outer:
            outputs = tuple(iter_rvs(result))
            inst = Instruction(kind, args, outputs, isinstance(result, (list, tuple)), decision, pinned)
            self.trace.append(inst)
            self.history.append((inst, self.func))
        return result

    def _save(self) -> tuple:
        """What :meth:`_restore` needs to undo every step taken after this call."""
        return (self.func, dict(self.symbols), len(self.trace), len(self.history), self.rng.getstate())

    def _restore(self, saved: tuple) -> None:
        self.func, self.symbols, n_trace, n_hist, state = saved
        del self.trace.insts[n_trace:]
        del self.history[n_hist:]
        self.rng.setstate(state)

    # copies and randomness ----------------------------------------------------------------
    def copy(self) -> "Schedule":
        """An independent schedule: same function and variables, own trace/symbols, same rng
        state (both copies then draw the same numbers)."""
        out = Schedule.__new__(Schedule)
        out.func = self.func
        out.symbols = dict(self.symbols)
        out.trace = self.trace.copy()
        out.history = list(self.history)
        out.rng = random.Random()
        out.rng.setstate(self.rng.getstate())
        out._running = []
        out._funcs, out._func_name = self._funcs, self._func_name
        if "_parked" in self.__dict__:
            out.__dict__["_parked"] = {f: dict(syms) for f, syms in self.__dict__["_parked"].items()}
        return out

    def fork_seed(self) -> int:
        """A seed drawn from this schedule's rng (to seed another schedule or a worker)."""
        return self.rng.randrange(2**31)

    def seed(self, seed: int) -> None:
        """Reseed the random number generator."""
        self.rng.seed(seed)

    # display -----------------------------------------------------------------------------
    def __str__(self) -> str:
        return str(self.func)

    def __repr__(self) -> str:
        return f"<Schedule of {self.func.name}: {len(self.trace)} instructions>"

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self.func))

    def show(self) -> None:
        """Print the current function."""
        print(self.func)


def _as_list(decision: Any) -> Any:
    """A tiling as a list (a pin set by hand may be a tuple; the sampler records a list)."""
    return list(decision) if isinstance(decision, tuple) else decision


def _check_bounds(primitive: str, before: PrimFunc, after: PrimFunc) -> None:
    """Refuse a result with an access provably out of bounds that ``before`` did not have
    (a function built by hand may already hold one: it is not the primitive's doing)."""
    problems = bounds_problems(after)
    if not problems:
        return
    old = {p.key for p in bounds_problems(before)}
    new = [p for p in problems if p.key not in old]
    if new:
        lines = "\n".join(f"  - {p}" for p in new)
        raise ScheduleError(primitive, f"the result would access a buffer out of bounds:\n{lines}")


# Trace.from_python runs text on a new Schedule: the class is handed down, as trace.py sits
# below this module in the import tree
_trace.schedule_class = Schedule
