"""``build``: compile a scheduled function for a target into a :class:`Kernel`."""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import BuildError
from ..ir.func import PrimFunc
from .kernel import Kernel

#: target kind -> (module, function) building a Kernel; imported only when asked for, so a
#: machine without llvmlite or CUDA can still use the other targets.
TARGETS: dict[str, tuple[str, str]] = {
    "python": ("workbench.codegen.python", "build_python"),
    "llvm": ("workbench.codegen.llvm", "build_llvm"),
    "cuda": ("workbench.codegen.cuda", "build_cuda"),
    "cuda-emulate": ("workbench.codegen.cuda", "build_cuda_emulate"),
}


def target_kind(target: Any) -> str:
    """``"llvm"`` for ``"llvm -mcpu=skylake"`` or for a target object whose ``kind`` is llvm."""
    kind = getattr(target, "kind", target)
    if not isinstance(kind, str) or not kind.strip():
        raise BuildError(f"a target is a string such as 'llvm' or an object with a .kind; got {target!r}")
    return kind.split()[0]


#: targets that take ``check_bounds`` (the python target always checks)
CHECKED_TARGETS = ("python", "llvm")


def build(sch_or_func: Any, target: Any = "python", *, check_bounds: bool = False) -> Kernel:
    """Compile a ``PrimFunc`` (or a ``Schedule``: its current ``.func``) for ``target``.

    >>> kernel = build(sch, target="llvm")
    >>> kernel(a, b, c)          # numpy arrays in parameter order; outputs written in place

    ``check_bounds=True`` (llvm): a debug build that checks every buffer access at run time
    and raises :class:`~workbench.errors.BufferIndexError` (an ``IndexError``) naming the
    buffer, the index and the shape instead of reading or writing out of bounds; its
    intermediate buffers start poisoned (NaN / the integer dtype's minimum) as the python
    target's do, so reading what was never written shows. It runs serially and without SIMD
    code: for finding a bug, not for timing. The python target always checks.
    """
    func = getattr(sch_or_func, "func", sch_or_func)
    if not isinstance(func, PrimFunc):
        raise TypeError(f"build expects a PrimFunc or a Schedule, got {type(sch_or_func).__name__}")
    kind = target_kind(target)
    if kind not in TARGETS:
        raise BuildError(f"unknown target {kind!r}; known targets: {', '.join(TARGETS)}")
    if check_bounds and kind not in CHECKED_TARGETS:
        supported = " and ".join(CHECKED_TARGETS)
        raise BuildError(f"check_bounds is supported by the {supported} targets, not {kind}")
    module_name, fn_name = TARGETS[kind]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BuildError(f"target {kind} is not available: {exc}") from exc
    if not check_bounds or kind == "python":  # the python target always checks
        return getattr(module, fn_name)(func, target)
    return getattr(module, fn_name)(func, target, check_bounds=True)
