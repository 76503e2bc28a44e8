"""In-process compilation: optimize LLVM IR for the target CPU and JIT it with MCJIT.

Each kernel gets its own execution engine, so kernels are independent and their machine code is
freed with them. Generated code calls into libm (math without an LLVM lowering), libmvec (vector math) and
workbench's thread pool (parallel loops, :mod:`.pool`); the libraries are loaded into the
process once so the JIT resolves their symbols.

Every LLVM target is initialized, so IR can be optimized and printed as assembly for any triple
and CPU (cross-compilation, :func:`optimize` and :func:`assembly`); only :func:`jit` needs a
target whose code this host can run (:meth:`Target.cannot_run`), and refuses the others.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from dataclasses import dataclass

import llvmlite.binding as llvm

from ...errors import BuildError
from ...target import Target
from .runtime import bound_spinning

#: shared libraries generated code may call, by the names tried in order
_LIBRARIES = {
    "libm": ("libm.so.6", "m"),
    "libmvec": ("libmvec.so.1", "mvec"),
}
#: libraries only some code needs: their absence is reported when that code is built
_OPTIONAL = ("libmvec",)


#: widest SLP vector (elements); see _initialize
SLP_MAX_VF = 16


@functools.cache
def _initialize() -> None:
    llvm.initialize_all_targets()  # every triple, for cross-compilation
    llvm.initialize_all_asmprinters()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # LLVM 22's loop-idiom recognition never finishes on some loop nests MetaSchedule produces
    # (softmax with an exp row recomputed inside the normalisation loop: 6 of TVM's 192 SFM
    # records compiled for 100-340 s, a second without it). What it adds here is turning
    # zero-fill and copy loops into memset/memcpy calls, which vectorized stores already do.
    llvm.set_option("", "-disable-loop-idiom-all")
    # SLP vectors no wider than one AVX-512 register of floats. Once a tile's accumulators are
    # promoted to registers (scalars, one per element), SLP otherwise bundles them into a single
    # vector as wide as the tile (<224 x float> for a 7 x 32 GEMM tile), which the backend
    # splits back with thousands of inserts and shuffles: TVM's 5th-best GMM record ran 28x
    # slower. TVM's build keeps those accumulators in memory until SLP has run, so SLP finds
    # 16-wide groups there by itself.
    llvm.set_option("", f"-slp-max-vf={SLP_MAX_VF}")
    bound_spinning()  # libgomp reads its wait policy once, when loaded (see runtime.py)
    for lib, names in _LIBRARIES.items():
        for name in names:
            path = name if "." in name else ctypes.util.find_library(name)
            if not path:
                continue
            try:
                llvm.load_library_permanently(path)
                break
            except RuntimeError:
                continue
        else:
            if lib in _OPTIONAL:  # vector math: checked where it is used
                continue
            raise BuildError(f"llvm: cannot load {lib} ({', '.join(names)})")


@functools.cache
def has_symbol(name: str) -> bool:
    """Whether JIT-compiled code of this process can call the C function ``name``."""
    _initialize()
    return llvm.address_of_symbol(name) is not None


@functools.lru_cache(maxsize=16)
def target_machine(target: Target) -> llvm.TargetMachine:
    """A shared LLVM target machine for ``target`` (optimization and assembly printing)."""
    return new_target_machine(target)


def new_target_machine(target: Target) -> llvm.TargetMachine:
    """An LLVM target machine for ``target``'s triple, CPU and features (O3, JIT code model).
    An execution engine takes ownership of (and frees) the one it is given: never share it."""
    _initialize()
    try:
        t = llvm.Target.from_triple(target.triple)
    except RuntimeError as err:
        raise BuildError(f"llvm: unknown target triple {target.triple!r}: {err}") from None
    return t.create_target_machine(cpu=target.mcpu, features=target.features, opt=3, codemodel="jitdefault")


@dataclass
class Compiled:
    """A JIT-compiled module: ``address`` of its entry; ``engine`` owns the machine code."""

    engine: llvm.ExecutionEngine
    address: int
    optimized_ir: str


def optimize(text: str, target: Target) -> llvm.ModuleRef:
    """Parse ``text`` and run LLVM's O3 pipeline tuned for the target CPU."""
    tm = target_machine(target)
    try:
        mod = llvm.parse_assembly(text)
        mod.verify()
    except RuntimeError as err:
        raise BuildError(f"llvm: generated invalid IR (a workbench bug): {err}") from None
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


def jit(text: str, entry: str, target: Target) -> Compiled:
    """Optimize and JIT-compile ``text``; return the address of function ``entry``. Refuses
    a target whose code this host cannot run (another architecture, or a CPU with extensions
    the host lacks: running it would crash the process with SIGILL)."""
    reason = target.cannot_run()
    if reason is not None:
        raise BuildError(f"llvm: {reason}")
    mod = optimize(text, target)
    optimized = str(mod)
    engine = llvm.create_mcjit_compiler(mod, new_target_machine(target))
    engine.finalize_object()
    address = engine.get_function_address(entry)
    if not address:
        raise BuildError(f"llvm: entry {entry!r} missing after compilation (a workbench bug)")
    return Compiled(engine, address, optimized)


def link(compiled: Compiled, text: str, name: str, target: Target) -> int:
    """Compile module ``text`` (which may call the kernel's functions) into ``compiled``'s engine;
    the address of its function ``name``. Used for the Python entry (:mod:`.pycall`), kept out
    of the kernel's own module so the IR shown to users holds no process addresses."""
    compiled.engine.add_module(optimize(text, target))
    compiled.engine.finalize_object()
    address = compiled.engine.get_function_address(name)
    if not address:
        raise BuildError(f"llvm: {name!r} missing after compilation (a workbench bug)")
    return address


def assembly(optimized_ir: str, target: Target) -> str:
    """The target assembly of already-optimized IR (parsed again: code generation mutates it)."""
    _initialize()
    mod = llvm.parse_assembly(optimized_ir)
    return target_machine(target).emit_assembly(mod)
