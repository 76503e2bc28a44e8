"""The CPU backend: lowered IR -> LLVM IR (llvmlite) -> optimized native code, in process.

    >>> kernel = build_llvm(func, "llvm")       # usually through wb.build(sch, target="llvm")
    >>> kernel(a, b, c)
    >>> print(kernel.source("llvm"))             # optimized LLVM IR; "llvm-raw": as emitted
    ; ModuleID = '<string>'
    ...
    >>> kernel.source("asm").split()[0]           # the target's assembly
    '.file'

Code for a CPU this host cannot run (another architecture, e.g. ``"llvm -mtriple=aarch64-linux-gnu
-mcpu=neoverse-n1"``, or extensions the host lacks, e.g. ``-mcpu=skylake-avx512`` on an AVX2
machine; see :meth:`Target.cannot_run`) is cross-compiled, not JIT-compiled: ``build_llvm``
returns a :class:`CompileOnlyKernel`, which shows the same sources and raises ``RuntimeError``
naming the target and the host when called or timed, instead of crashing on an illegal
instruction.

Modules: :mod:`.emitter` (statements, loops, SIMD loops), :mod:`.expressions` (expressions,
memory accesses), :mod:`.parallel` (thread pool), :mod:`.runtime` (thread cap, fork safety),
:mod:`.intrinsics` (math, masked memory), :mod:`.dtypes`, :mod:`.analysis`, :mod:`.jit`
(optimization, MCJIT).
"""

from __future__ import annotations

import ctypes
from typing import Any, NoReturn, Optional, Union

import numpy as np

from ...errors import BufferIndexError, BuildError
from ...ir.buffer import Buffer
from ...ir.func import PrimFunc
from ..kernel import Kernel
from ...target import Target
from ..lower import lower
from .emitter import OUT_OF_BOUNDS, KernelEmitter
from . import pycall
from .jit import Compiled, assembly, jit, link, optimize
from .runtime import before_parallel_call, set_max_threads

__all__ = [
    "build_llvm",
    "emit_llvm",
    "LLVMKernel",
    "CheckedLLVMKernel",
    "CompileOnlyKernel",
    "set_max_threads",
]


def emit_llvm(func: PrimFunc, target: Union[str, Target] = "llvm", check_bounds: bool = False) -> str:
    """The unoptimized LLVM IR text of ``func`` (lowered first)."""
    target = _llvm_target(target)
    lowered = lower(func, compact=not check_bounds, version_tails=True)
    return str(KernelEmitter(lowered, target, check_bounds).emit())


def build_llvm(
    func: PrimFunc, target: Union[str, Target] = "llvm", check_bounds: bool = False
) -> "LLVMKernel":
    """Compile ``func`` (scheduled or lowered) to native code for a CPU target; for a target
    this host cannot run, only to its sources (a :class:`CompileOnlyKernel`).

    ``check_bounds``: the debug build (see :mod:`.emitter`): intermediate buffers are not
    compacted, so an out-of-bounds access is reported against the shapes the function declares.
    """
    target = _llvm_target(target)
    emitter = KernelEmitter(lower(func, compact=not check_bounds, version_tails=True), target, check_bounds)
    raw = str(emitter.emit())
    reason = target.cannot_run()
    if reason is not None:
        return CompileOnlyKernel(func, target, str(optimize(raw, target)), raw, reason)
    compiled = jit(raw, emitter.name + "_packed", target)
    if check_bounds:
        return CheckedLLVMKernel(func, target, compiled, raw, emitter)
    return LLVMKernel(func, target, compiled, raw, parallel=emitter.n_parallel > 0, symbol=emitter.name)


def _llvm_target(target: Union[str, Target]) -> Target:
    target = Target.of(target)
    if target.kind != "llvm":
        raise BuildError(f"build_llvm: target {str(target)!r} is not an 'llvm' target")
    return target


class LLVMKernel(Kernel):
    """A ``Kernel`` running JIT-compiled code. Sources: ``"llvm"`` (optimized IR, the default),
    ``"llvm-raw"`` (IR as emitted) and ``"asm"`` (generated on first request)."""

    def __init__(
        self,
        func: PrimFunc,
        target: Target,
        compiled: Compiled,
        raw_ir: str,
        parallel: bool = False,
        symbol: Optional[str] = None,
    ):
        self._compiled = compiled  # owns the machine code: must live as long as the entry
        self._parallel = parallel
        super().__init__(
            func, target, self._refuse_early, {"llvm": compiled.optimized_ir, "llvm-raw": raw_ir}
        )
        # a symbolic kernel's pointer entry also passes the sizes, read from the arrays
        sizes = len(func.size_vars)
        self.entry = _entry(compiled, len(func.params), parallel, self.sizes if sizes else None, sizes)
        by_pointers = self.entry

        def checked(*arrays: np.ndarray) -> None:  # the Python path: full checks, ctypes call
            self.check_args(arrays)
            by_pointers(*arrays)

        self._checked = checked
        self._fast: Optional[pycall.PythonEntry] = None  # None: the Python path only
        if pycall.available() and symbol is not None:  # symbol: the kernel's LLVM function
            module = pycall.python_entry_module(
                symbol,
                [b.shape for b in self._params],
                [b.dtype for b in self._params],
                self._writes,
                func.size_vars,
            )
            fast = self._fast = pycall.PythonEntry(
                link(compiled, str(module), symbol + "_py", target), symbol + "_py"
            )
            # arguments the native checks do not take (an ndarray subclass, an equal dtype
            # object, ...) go to the Python path: checked for __call__, as they are for entry
            self._checked = _fast_entry(fast, checked, parallel)
            self.entry = _fast_entry(fast, by_pointers, parallel)

    @staticmethod
    def _refuse_early(*_: object) -> None:  # pragma: no cover - replaced before any call
        raise AssertionError("LLVMKernel entry used before it was set")

    def __call__(self, *arrays: np.ndarray) -> None:
        """Run: the arguments are checked in native code (:mod:`.pycall`); anything it does
        not accept takes the Python path, which raises the precise error (or runs)."""
        self._checked(*arrays)

    def source(self, kind: Optional[str] = None) -> str:
        if kind == "asm" and "asm" not in self._sources:
            self._sources["asm"] = assembly(self._compiled.optimized_ir, self.target)
        return super().source(kind)

    @property
    def source_kinds(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(tuple(self._sources) + ("asm",)))


class CheckedLLVMKernel(LLVMKernel):
    """A kernel built with ``check_bounds=True``: an access out of its buffer's shape raises
    :class:`~workbench.errors.BufferIndexError` naming the buffer, the index and the shape (the
    kernel stops at the first one; outputs may be partly written). Called through ctypes only,
    and not from several threads at once (the violation is recorded in one global)."""

    def __init__(
        self, func: PrimFunc, target: Target, compiled: Compiled, raw_ir: str, emitter: KernelEmitter
    ):
        super().__init__(func, target, compiled, raw_ir)  # no symbol: no fast Python entry
        accesses = list(emitter.accesses)
        record = None
        if emitter.oob_record is not None:
            address = compiled.engine.get_global_value_address(emitter.oob_record.name)
            width = emitter.oob_record.value_type.count
            record = (ctypes.c_int64 * width).from_address(address)
        run = self.entry

        def entry(*arrays: np.ndarray) -> None:
            try:
                run(*arrays)
            except _OutOfBounds:
                if record is None:  # pragma: no cover - status 2 only comes with a record
                    raise BuildError("llvm: out-of-bounds status without a record (a bug)") from None
                verb, buf = accesses[record[0] - 1]
                index = tuple(record[1 : 1 + buf.ndim])
                record[0] = 0
                raise _index_error(func.name, verb, buf, index) from None

        self.entry = entry

    def __call__(self, *arrays: np.ndarray) -> None:
        self.check_args(arrays)
        self.entry(*arrays)


class _OutOfBounds(Exception):
    """The kernel returned OUT_OF_BOUNDS (turned into a BufferIndexError by its caller)."""


def _index_error(kernel: str, verb: str, buf: Buffer, index: tuple) -> BufferIndexError:
    bad = next(d for d, (x, n) in enumerate(zip(index, buf.shape)) if not 0 <= x < n)
    return BufferIndexError(
        f"kernel {kernel!r} {verb} {buf.name}{list(index)}, out of bounds: index {index[bad]} of "
        f"dimension {bad} is not in [0, {buf.shape[bad]}) (the shape of {buf.name} is {buf.shape})",
        buf.name,
        index,
        buf.shape,
    )


class CompileOnlyKernel(LLVMKernel):
    """The sources of a kernel compiled for a CPU this host cannot run (``reason`` says why):
    ``source("llvm" | "llvm-raw" | "asm")`` work; calling or timing it raises RuntimeError."""

    def __init__(self, func: PrimFunc, target: Target, optimized_ir: str, raw_ir: str, reason: str):
        self._compiled = Compiled(None, 0, optimized_ir)
        self.reason = reason
        Kernel.__init__(self, func, target, self._refuse, {"llvm": optimized_ir, "llvm-raw": raw_ir})

    def _refuse(self, *_: object) -> None:
        raise RuntimeError(
            f"cannot run kernel {self.func.name!r} on this host: {self.reason}. "
            f"It was only compiled: kernel.source('asm') shows its code"
        )

    def __call__(self, *arrays: object) -> None:
        self._refuse()

    def time(self, *arrays: Any, **_: Any) -> NoReturn:
        self._refuse()
        raise AssertionError("unreachable")


def _entry(compiled: Compiled, n_args: int, parallel: bool, sizes=None, n_sizes: int = 0):
    """``entry(*arrays)``: pass the arrays' data pointers (then, for a symbolic kernel, the
    ``n_sizes`` values ``sizes(arrays)`` of its size variables) to the packed C entry point."""
    cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(compiled.address)
    args_t = ctypes.c_void_p * (n_args + n_sizes)

    def check(status: int) -> None:
        if status == OUT_OF_BOUNDS:
            raise _OutOfBounds()
        if status:
            raise MemoryError("kernel could not allocate its intermediate buffers")

    if sizes is not None:  # a separate closure: the static one stays as it was

        def symbolic_entry(*arrays: np.ndarray) -> None:
            if parallel:
                before_parallel_call()
            check(cfunc(args_t(*[a.ctypes.data for a in arrays], *sizes(arrays))))

        symbolic_entry.compiled = compiled  # type: ignore[attr-defined]  # keeps the code alive
        return symbolic_entry

    def entry(*arrays: np.ndarray) -> None:
        if parallel:
            before_parallel_call()
        status = cfunc(args_t(*[a.ctypes.data for a in arrays]))
        if status == OUT_OF_BOUNDS:
            raise _OutOfBounds()
        if status:
            raise MemoryError("kernel could not allocate its intermediate buffers")

    entry.compiled = compiled  # type: ignore[attr-defined]  # keeps the code alive
    return entry


def _fast_entry(fast: pycall.PythonEntry, fallback, parallel: bool):
    """``entry(*arrays)`` through the compiled Python entry ``fast``; arrays it does not take
    go to ``fallback(*arrays)``."""
    call = fast.call

    def entry(*arrays: np.ndarray) -> None:
        if parallel:
            before_parallel_call()
        code = call(*arrays)
        if code == pycall.MISMATCH:
            fallback(*arrays)
        elif code:
            raise MemoryError("kernel could not allocate its intermediate buffers")

    return entry
