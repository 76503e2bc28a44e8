"""The workload registry: a name -> (IR builder, numpy reference, FLOP formula, small shapes).

A workload is a function of keyword shape parameters whose defaults are the paper's shape
(seeds ``000_…`` A.2) returning a ``PrimFunc``. Registering one is a decorator::

    @register("MYOP", reference=lambda a, /, *, n: a * 2, flops=lambda n: n, small={"n": 8})
    def myop(n: int = 1024) -> PrimFunc:
        \"\"\"Doubles a vector.\"\"\"
        A = placeholder((n,), name="A")
        return create_func([A, compute((n,), lambda i: A[i] * 2.0, name="B")])

``reference(*inputs, /, **shape)`` computes the expected output(s) in numpy, independently of the
IR (make the inputs positional-only: shape keywords such as ``w`` must not collide with them);
``flops(**shape)`` counts floating-point operations. The paper's twelve come first in
``names()``, then user workloads in registration order.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

import numpy as np

from ..codegen.arrays import aligned, zeros
from ..ir import PrimFunc
from ..ir.expr import is_float

#: The workloads of the MetaSchedule paper's evaluation (seeds 000 A.2), in the paper's order.
PAPER_ORDER = ("C1D", "C2D", "C3D", "DEP", "DIL", "GMM", "GRP", "T2D", "CBR", "TBG", "NRM", "SFM")


@dataclass(frozen=True)
class Workload:
    """One registered workload; ``defaults`` is its paper (or default) shape."""

    name: str
    builder: Callable[..., PrimFunc]
    reference_fn: Callable[..., Any]
    flops_fn: Optional[Callable[..., int]]
    small: Mapping[str, Any]
    description: str
    defaults: Mapping[str, Any]

    def shape(self, **overrides: Any) -> dict[str, Any]:
        """The full shape: the defaults with ``overrides`` applied (unknown keys rejected)."""
        unknown = sorted(set(overrides) - set(self.defaults))
        if unknown:
            raise TypeError(
                f"workload {self.name}: unknown shape parameter(s) {unknown}; "
                f"known: {', '.join(self.defaults)}"
            )
        return {**self.defaults, **overrides}


_REGISTRY: dict[str, Workload] = {}


def register(
    name: str,
    *,
    reference: Callable[..., Any],
    flops: Optional[Callable[..., int]] = None,
    small: Optional[Mapping[str, Any]] = None,
    description: Optional[str] = None,
):
    """Decorator registering ``builder(**shape) -> PrimFunc`` as workload ``name``.

    Every builder parameter needs a default (the workload's default shape). Registering an
    existing user workload's name again replaces it (re-running a notebook cell); the paper's
    twelve cannot be replaced.
    """

    def decorate(builder: Callable[..., PrimFunc]) -> Callable[..., PrimFunc]:
        defaults = {}
        for p in inspect.signature(builder).parameters.values():
            if p.default is inspect.Parameter.empty or p.kind not in (
                p.POSITIONAL_OR_KEYWORD,
                p.KEYWORD_ONLY,
            ):
                raise TypeError(
                    f"register({name!r}): parameter {p.name!r} of {builder.__name__} "
                    f"must be a keyword parameter with a default (the default shape)"
                )
            defaults[p.name] = p.default
        if name in _REGISTRY and name in PAPER_ORDER:
            raise ValueError(f"register: {name!r} is one of the paper's workloads; choose another name")
        unknown = sorted(set(small or {}) - set(defaults))
        if unknown:
            raise TypeError(f"register({name!r}): small shape names unknown parameter(s) {unknown}")
        _REGISTRY[name] = Workload(
            name,
            builder,
            reference,
            flops,
            {**defaults, **(small or {})},
            description or _first_line(builder.__doc__) or builder.__name__,
            defaults,
        )
        return builder

    return decorate


def unregister(name: str) -> None:
    """Remove a user workload (the paper's twelve stay)."""
    if name in PAPER_ORDER:
        raise ValueError(f"unregister: {name!r} is one of the paper's workloads")
    del _REGISTRY[lookup(name).name]


def _first_line(doc: Optional[str]) -> str:
    return inspect.cleandoc(doc).splitlines()[0] if doc else ""


def lookup(name: str) -> Workload:
    """The registered workload ``name`` (exact, else case-insensitive match)."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    folded = [k for k in _REGISTRY if k.lower() == str(name).lower()]
    if len(folded) == 1:
        return _REGISTRY[folded[0]]
    raise KeyError(f"no workload named {name!r}; known: {', '.join(names())}")


def names() -> list[str]:
    """The paper's twelve workloads in the paper's order, then user workloads."""
    extras = [k for k in _REGISTRY if k not in PAPER_ORDER]
    return [k for k in PAPER_ORDER if k in _REGISTRY] + extras


def get(name: str, **shape: Any) -> PrimFunc:
    """The workload's ``PrimFunc`` at its paper shape, with any shape parameter overridden."""
    wl = lookup(name)
    return wl.builder(**wl.shape(**shape))


def reference(name: str, **shape: Any) -> Callable[..., Any]:
    """A numpy function ``ref(*inputs) -> expected output`` for that shape."""
    wl = lookup(name)
    return functools.partial(wl.reference_fn, **wl.shape(**shape))


def flops(name: str, **shape: Any) -> int:
    """Floating-point operations of one run (formulas documented per workload)."""
    wl = lookup(name)
    if wl.flops_fn is None:
        raise ValueError(f"workload {wl.name} has no FLOP formula registered")
    return int(wl.flops_fn(**wl.shape(**shape)))


def small(name: str) -> dict[str, Any]:
    """Shape keywords small enough for a pure-Python interpreter (well under a second).

    A user workload registered without ``small`` gets its default shape.
    """
    return dict(lookup(name).small)


def describe(name: str) -> str:
    """One line: the workload, what it computes, and its default (paper) shape."""
    wl = lookup(name)
    shape = ", ".join(f"{k}={v}" for k, v in wl.defaults.items())
    return f"{wl.name}: {wl.description} [{shape}]"


def output_params(func: PrimFunc) -> list[int]:
    """Indices of the parameters some block writes (the outputs)."""
    written = {r.buffer for b in func.blocks() for r in b.writes}
    return [i for i, buf in enumerate(func.params) if buf in written]


def random_args(name: str, seed: int = 0, **shape: Any) -> list[np.ndarray]:
    """Arrays for every parameter in order: inputs uniform in [-1, 1), outputs zeroed.

    Integer inputs are uniform in [-8, 8). The same seed gives the same arrays. Every array is
    64-byte aligned (``wb.aligned``), as TVM's tensors are: wide loads then never straddle
    cache lines.
    """
    func = get(name, **shape)
    outputs = set(output_params(func))
    rng = np.random.default_rng(seed)
    args = []
    for i, buf in enumerate(func.params):
        if i in outputs:
            args.append(zeros(buf.shape, dtype=buf.dtype))
        elif is_float(buf.dtype):
            args.append(aligned(rng.uniform(-1.0, 1.0, size=buf.shape).astype(buf.dtype)))
        else:
            args.append(aligned(rng.integers(-8, 8, size=buf.shape).astype(buf.dtype)))
    return args
