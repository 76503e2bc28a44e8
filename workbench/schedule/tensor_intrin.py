"""``TensorIntrin``: the registry of tensor intrinsics that ``tensorize`` can use.

An intrinsic is a pair of ``PrimFunc``s over the same parameters (same count, shapes and dtypes,
in the same order):

* the *description* says what is computed, as plain TensorIR: a nest of loops over one block,
  e.g. ``C[i, j] += A[i, k] * B[k, j]`` over a 4x16x4 tile (a reduction without ``init``: the
  init stays with the tensorized block);
* the *implementation* says how: any statements over the parameters (vectorized loops, local
  accumulators, nested blocks), which ``tensorize`` inserts with each parameter bound to the tile
  of the real buffer that the description matched.

    >>> builtin = TensorIntrin.get("avx2_f32_gemm_4x16x4")
    >>> TensorIntrin.register("my_gemm_4x16x4", builtin.desc, builtin.impl)   # your desc, impl
    <TensorIntrin my_gemm_4x16x4>

Then ``sch.tensorize(loop, "my_gemm_4x16x4")`` replaces the subtree under ``loop`` (a 4x16x4
tile of a matmul) with the implementation.

The built-in intrinsics (:mod:`workbench.schedule.intrinsics`) register themselves when that
package is imported, which ``workbench.schedule`` does: this module does not import them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from ..errors import ScheduleError
from ..ir.expr import BufferLoad
from ..ir.func import PrimFunc
from ..ir.functor import pre_order
from ..ir.stmt import BlockRealize, BufferStore
from ..ir.verify import verify


@dataclass(frozen=True, eq=False)
class TensorIntrin:
    """A registered intrinsic: ``name``, its description and its implementation."""

    name: str
    desc: PrimFunc
    impl: PrimFunc

    _registry: ClassVar[dict[str, "TensorIntrin"]] = {}

    @staticmethod
    def register(name: str, desc: PrimFunc, impl: PrimFunc, override: bool = False) -> "TensorIntrin":
        """Check and register an intrinsic under ``name`` (``override=True`` replaces one)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a tensor intrinsic needs a non-empty name, got {name!r}")
        if name in TensorIntrin._registry and not override:
            raise ValueError(
                f"tensor intrinsic {name!r} is already registered (pass override=True to replace it)"
            )
        _check_pair(name, desc, impl)
        intrin = TensorIntrin(name, desc, impl)
        TensorIntrin._registry[name] = intrin
        return intrin

    @staticmethod
    def get(name: str, primitive: Optional[str] = None) -> "TensorIntrin":
        """The intrinsic ``name``; an unknown name raises ``ScheduleError`` (from ``primitive``)
        or ``KeyError``, listing the registered ones."""
        found = TensorIntrin._registry.get(name) if isinstance(name, str) else None
        if found is None:
            msg = (
                f"no tensor intrinsic named {name!r}; registered: "
                f"{', '.join(TensorIntrin.names()) or '(none)'}"
            )
            if primitive is not None:
                raise ScheduleError(primitive, msg, argument="tensor_intrin")
            raise KeyError(msg)
        return found

    @staticmethod
    def names() -> list[str]:
        """The registered names, sorted."""
        return sorted(TensorIntrin._registry)

    @staticmethod
    def unregister(name: str) -> None:
        TensorIntrin._registry.pop(name)

    def __repr__(self) -> str:
        return f"<TensorIntrin {self.name}>"


def _check_pair(name: str, desc: PrimFunc, impl: PrimFunc) -> None:
    """The rules ``tensorize`` relies on, checked once at registration (ValueError)."""
    for role, func in (("description", desc), ("implementation", impl)):
        if not isinstance(func, PrimFunc):
            raise ValueError(
                f"tensor intrinsic {name!r}: the {role} must be a PrimFunc, got {type(func).__name__}"
            )
        verify(func)
    if len(desc.params) != len(impl.params) or any(
        (d.shape, d.dtype) != (i.shape, i.dtype) for d, i in zip(desc.params, impl.params)
    ):
        sig = lambda f: [f"{b.name}{list(b.shape)}:{b.dtype}" for b in f.params]  # noqa: E731
        raise ValueError(
            f"tensor intrinsic {name!r}: the description and the implementation "
            f"must take the same parameters (shapes, dtypes, order): "
            f"{sig(desc)} vs {sig(impl)}"
        )
    root = desc.root
    if root.alloc_buffers:
        raise ValueError(f"tensor intrinsic {name!r}: the description may not allocate buffers")
    realizes = [n for n in pre_order(root.body) if isinstance(n, BlockRealize)]
    if len(realizes) != 1 or realizes[0].block.init is not None:
        raise ValueError(
            f"tensor intrinsic {name!r}: the description must be a loop nest over "
            f"exactly one block, without init (found {len(realizes)} blocks)"
        )
    used = {n.buffer for n in pre_order(root.body) if isinstance(n, (BufferLoad, BufferStore))}
    unused = [b.name for b in desc.params if b not in used]
    if unused:
        raise ValueError(f"tensor intrinsic {name!r}: the description never accesses parameter(s) {unused}")


__all__ = ["TensorIntrin"]
