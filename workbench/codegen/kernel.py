"""``Kernel``: a compiled function, callable on numpy arrays (destination passing).

Backend-neutral: a backend compiles the function and hands over an ``entry`` callable that runs
it on arrays already checked here. Every argument is checked *before* anything runs, and a bad
one raises ``TypeError`` / ``ValueError`` naming the parameter, what was expected and what came.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Union

import numpy as np

from ..ir.arith import evaluate
from ..ir.buffer import Buffer, shape_str
from ..ir.expr import Var
from ..ir.func import PrimFunc, size_var_sources
from ..ir.functor import free_vars, pre_order
from ..ir.stmt import BufferStore
from .arrays import canonical_dtype
from .timing import MIN_REPEAT_MS, TimingResult, time_runs, timing_plan


def written_buffers(func: PrimFunc) -> set[Buffer]:
    """The buffers ``func`` stores into (its outputs, among its parameters)."""
    return {n.buffer for n in pre_order(func.body) if isinstance(n, BufferStore)}


def timing_args(arrays: Any) -> list:
    """The arrays a timing loop passes to a kernel's entry: the same data, with numpy's builtin
    dtype objects (:func:`~workbench.codegen.arrays.canonical_dtype`), so that every timed call
    takes the native entry whatever the arrays' history (``kernel.time`` and the tuner's
    workers time through this)."""
    return [canonical_dtype(a) for a in arrays]


class Kernel:
    """A built function: ``kernel(*arrays)`` runs it, writing outputs in place.

    Parameters
    ----------
    func : the scheduled ``PrimFunc`` that was built (kept for display and re-building).
    target : the target it was built for (``"python"``, ``"llvm"``, ...).
    entry : ``entry(*arrays)`` runs the compiled code on checked arrays, in parameter order;
        it must be synchronous (``time`` measures it with a wall clock).
    source_text : the generated code, a string (of kind ``target``) or ``{kind: text}`` for
        backends that produce several (e.g. LLVM IR and assembly); the first is the default.
    """

    def __init__(
        self,
        func: PrimFunc,
        target: Any,
        entry: Callable[..., Any],
        source_text: Union[str, Mapping[str, str]],
    ):
        self.func = func
        self.target = target
        self.entry = entry
        if isinstance(source_text, str):
            source_text = {str(getattr(target, "kind", target)).split()[0]: source_text}
        self._sources = dict(source_text)
        self._params = func.params
        written = written_buffers(func)
        self._writes = tuple(b in written for b in self._params)
        #: symbolic kernels: each size variable -> (parameter, dimension) its value is read from
        self._size_from: dict[Var, tuple[int, int]] = size_var_sources(func) if func.size_vars else {}

    @property
    def name(self) -> str:
        return self.func.name

    # running ---------------------------------------------------------------------------------
    def __call__(self, *arrays: Any) -> None:
        self.check_args(arrays)
        self.entry(*arrays)

    def time(
        self,
        *arrays: Any,
        number: Optional[int] = None,
        repeat: int = 5,
        min_repeat_ms: float = MIN_REPEAT_MS,
        warmup: int = 1,
        windows: Optional[int] = None,
    ) -> TimingResult:
        """Seconds per run as the tuner's records measure it: the median of ``repeat`` repeats,
        each the fastest of its ``windows`` windows of ``number`` runs.

        ``number`` None: grown until a window lasts ``min_repeat_ms / windows`` (a repeat
        ``min_repeat_ms``, TVM's rule), so short kernels are not timed at the clock's
        resolution; ``windows`` None is then ``WINDOWS`` (25, ~1 ms each), the runner's
        ``MeasureConfig.windows``: other work on the CPUs only adds time, in scheduler slices of
        milliseconds, and a window that ran between two of them is the kernel uncontended, so
        the figure agrees with the records under load (NRM with two busy loops: 13.4 us as a
        plain median, 2.2 us windowed and in the records). ``windows=1``: TVM's plain repeats.
        An explicit ``number``: each repeat is exactly ``number`` runs (``windows`` None is 1),
        or ``windows`` windows of ``number`` runs. The result is a float (the median) that also
        holds the repeats (:class:`~workbench.codegen.timing.TimingResult`)::

            >>> t = kernel.time(a, b, c)
            >>> t  # doctest: +ELLIPSIS
            0... ms ± ...% (median of 5 repeats, each the fastest of ... × ... runs)
            >>> t > 0, len(t.samples), t.spread >= 1.0     # seconds; 5 repeats; max / min
            (True, 5, True)
        """
        plan = timing_plan(number, repeat, min_repeat_ms, warmup, windows)
        self.check_args(arrays)
        return time_runs(self.entry, timing_args(arrays), **plan)

    def check_args(self, arrays: tuple) -> None:
        """Raise ``TypeError`` / ``ValueError`` naming the first bad argument."""
        fn, params = self.func.name, self._params
        if len(arrays) != len(params):
            names = ", ".join(b.name for b in params)
            raise TypeError(f"{fn}() takes {len(params)} arrays ({names}), got {len(arrays)}")
        for buf, arr, writes in zip(params, arrays, self._writes):
            if not isinstance(arr, np.ndarray):
                raise TypeError(
                    f"{fn}(): argument {buf.name!r} must be a numpy.ndarray, got {type(arr).__name__}"
                )
            if arr.dtype != np.dtype(buf.dtype):
                raise TypeError(f"{fn}(): argument {buf.name!r} has dtype {arr.dtype}, expected {buf.dtype}")
            if self._size_from:
                self._check_shape(buf, arr, arrays)
            elif arr.shape != buf.shape:
                raise ValueError(f"{fn}(): argument {buf.name!r} has shape {arr.shape}, expected {buf.shape}")
            if not arr.flags.c_contiguous:
                raise ValueError(
                    f"{fn}(): argument {buf.name!r} is not C-contiguous; "
                    f"pass np.ascontiguousarray({buf.name})"
                )
            if writes and not arr.flags.writeable:
                raise ValueError(f"{fn}(): argument {buf.name!r} is read-only, but the kernel writes it")

    def sizes(self, arrays: tuple) -> tuple[int, ...]:
        """The values of the size variables (``func.size_vars`` order), read from the arrays
        (unchecked: ``check_args`` checks them)."""
        return tuple(arrays[k].shape[d] for k, d in self._size_from.values())

    def _check_shape(self, buf: Buffer, arr: np.ndarray, arrays: tuple) -> None:
        """A symbolic kernel's argument: each dimension against the sizes the arrays give."""
        fn = self.func.name
        if arr.ndim != buf.ndim:
            raise ValueError(
                f"{fn}(): argument {buf.name!r} has {arr.ndim} dimensions (shape {arr.shape}), "
                f"expected {buf.ndim} (shape {shape_str(buf.shape)})"
            )
        env = {}
        for v, (k, d) in self._size_from.items():
            value = arrays[k].shape[d] if k < len(arrays) and arrays[k].ndim > d else None
            if value is not None and value >= 2 ** (31 if v.dtype == "int32" else 63):
                src = self._params[k].name
                raise ValueError(
                    f"{fn}(): {src}: dimension {d} is {value}, too large for {v.name} ({v.dtype})"
                )
            env[v] = value
        for d, (want, got) in enumerate(zip(buf.shape, arr.shape)):
            if isinstance(want, int):
                if want != got:
                    raise ValueError(
                        f"{fn}(): {buf.name}: dimension {d} is {got} but must be {want} "
                        f"(shape {shape_str(buf.shape)})"
                    )
                continue
            if isinstance(want, Var) and self._size_from[want] == (self._params.index(buf), d):
                continue  # where the variable is read from
            used = [v for v in self._size_from if v in free_vars(want)]
            if any(env[v] is None for v in used):
                continue  # a source array of the wrong rank: its own check reports it
            value = evaluate(want, env)
            if value != got:
                origin = ", ".join(
                    f"{v.name} = {env[v]} from {self._params[self._size_from[v][0]].name}" for v in used
                )
                what = origin if isinstance(want, Var) else f"{want} = {value} ({origin})"
                raise ValueError(f"{fn}(): {buf.name}: dimension {d} is {got} but {what}")

    # inspection ------------------------------------------------------------------------------
    def source(self, kind: Optional[str] = None) -> str:
        """The generated code: the default kind, or one of ``source_kinds``."""
        if kind is None:
            return next(iter(self._sources.values()))
        if kind not in self._sources:
            raise ValueError(f"no source of kind {kind!r}; available: {', '.join(self._sources)}")
        return self._sources[kind]

    @property
    def source_kinds(self) -> tuple[str, ...]:
        return tuple(self._sources)

    def __repr__(self) -> str:
        args = ", ".join(
            f"{b.name}: {b.dtype}{shape_str(b.shape)}{' (out)' if w else ''}"
            for b, w in zip(self._params, self._writes)
        )
        return f"Kernel({self.func.name}({args}), target={str(self.target)!r})"

    def _repr_pretty_(self, p, cycle):  # IPython plain-text display
        p.text(repr(self))
