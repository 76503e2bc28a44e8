"""``Target``: what a function is compiled for, parsed from a string such as ``"llvm"``.

    >>> Target("llvm")                                   # the host CPU, all its cores
    Target('llvm')
    >>> Target("llvm -mcpu=skylake-avx512 -num-cores=2")
    Target('llvm -mcpu=skylake-avx512 -num-cores=2')
    >>> Target("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1")   # compile only, here
    Target('llvm -mcpu=neoverse-n1 -mtriple=aarch64-linux-gnu')
    >>> Target("cuda -arch=sm_80")                       # limits: max_threads_per_block, ...
    Target('cuda -arch=sm_80')
    >>> Target("cuda-emulate")                           # CUDA semantics, run on the CPU
    Target('cuda-emulate')

A target is a *kind* plus ``-key=value`` options. ``str(target)`` is canonical (the kind, then the
options given, sorted), so it can key a tuning database: ``"llvm"`` and ``"llvm -num-cores=4"``
are different targets, while option order and spacing do not matter. Properties that are not
given (the CPU name, its features, the core count) are resolved from the host when asked.

The target is the one source of SIMD widths: :attr:`Target.vector_width_bits` (512 with
AVX-512, 256 with AVX/AVX2, 128 for SSE and for NEON on AArch64) and
:meth:`Target.vector_lanes` (``vector_lanes("float32")`` is 16, 8 or 4). Code generation, the
tensor intrinsics and the schedule rules ask it rather than assuming a width.

Whether code for a target can run here is :meth:`Target.cannot_run`: the same architecture and
OS as the host, and every instruction-set extension the target's CPU has (a table of x86 CPUs
as LLVM names them, plus ``-mattr``) present on the host. Code for ``-mcpu=skylake-avx512``
is therefore never run on an AVX2-only host (it would die of SIGILL); it can still be compiled.
"""

from __future__ import annotations

import os
import re
from functools import cached_property, cache
from typing import Any, Mapping, Optional, Union

#: Options each target kind accepts (``-key=value``).
KIND_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "llvm": ("mcpu", "mattr", "mtriple", "num-cores"),
    "cuda": (
        "arch",
        "max-threads-per-block",
        "max-shared-memory-per-block",
        "thread-warp-size",
        "registers-per-block",
    ),
    "python": (),
}
#: the emulator runs CUDA kernels on the CPU with the limits of the GPU it stands for
KIND_OPTIONS = {**KIND_OPTIONS, "cuda-emulate": KIND_OPTIONS["cuda"]}

#: Instruction-set extensions LLVM may use in code generated from plain IR: the ones
#: :meth:`Target.cannot_run` requires of the host. SSE/SSE2 are part of x86-64 itself; AES,
#: carry-less multiply, SHA, SSE4a (...) only come from intrinsics workbench never emits.
_V2 = frozenset({"sse3", "ssse3", "sse4.1", "sse4.2", "popcnt"})
_AVX = _V2 | {"avx"}
_IVB = _AVX | {"f16c"}
_HSW = _IVB | {"avx2", "fma", "bmi", "bmi2", "lzcnt", "movbe"}
_SKX = _HSW | {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}
_CNL = _SKX | {"avx512ifma", "avx512vbmi"}
_ICL = _CNL | {"avx512vnni", "avx512vbmi2", "avx512bitalg", "avx512vpopcntdq", "gfni"}
_SPR = _ICL | {"avx512bf16", "avx512fp16", "avxvnni"}
_ADL = _HSW | {"avxvnni", "gfni"}
_SRF = _ADL | {"avxifma", "avxvnniint8", "avxneconvert"}
_ZN4 = _ICL | {"avx512bf16"}
_BD1 = _AVX | {"fma4", "xop", "lzcnt"}
_BD2 = _BD1 | {"fma", "f16c", "bmi"}
_SLM = _V2 | {"movbe"}

#: x86 CPUs (LLVM's names) -> the checked extensions they have. A CPU missing here can be
#: compiled for, but code for it runs only when it is the host's own CPU.
X86_CPU_FEATURES: Mapping[str, frozenset] = {
    **dict.fromkeys(("x86-64", "generic"), frozenset()),
    "core2": frozenset({"sse3", "ssse3"}),
    "penryn": frozenset({"sse3", "ssse3", "sse4.1"}),
    **dict.fromkeys(("x86-64-v2", "nehalem", "corei7", "westmere"), _V2),
    **dict.fromkeys(("silvermont", "slm", "goldmont", "goldmont-plus"), _SLM),
    "tremont": _SLM | {"gfni"},
    **dict.fromkeys(("sandybridge", "corei7-avx"), _AVX),
    **dict.fromkeys(("ivybridge", "core-avx-i"), _IVB),
    **dict.fromkeys(
        ("haswell", "core-avx2", "broadwell", "skylake", "x86-64-v3", "znver1", "znver2", "znver3"), _HSW
    ),
    **dict.fromkeys(("knl", "knm"), _HSW | {"avx512f", "avx512cd"}),
    **dict.fromkeys(("skylake-avx512", "skx", "x86-64-v4"), _SKX),
    "cascadelake": _SKX | {"avx512vnni"},
    "cooperlake": _SKX | {"avx512vnni", "avx512bf16"},
    "cannonlake": _CNL,
    **dict.fromkeys(("icelake-client", "icelake-server", "tigerlake", "rocketlake"), _ICL),
    **dict.fromkeys(("sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d"), _SPR),
    "diamondrapids": _SPR | _SRF | {"avx10.1", "avx10.2"},
    **dict.fromkeys(("alderlake", "raptorlake", "meteorlake", "gracemont"), _ADL),
    **dict.fromkeys(
        (
            "sierraforest",
            "grandridge",
            "arrowlake",
            "arrowlake-s",
            "lunarlake",
            "pantherlake",
            "clearwaterforest",
        ),
        _SRF,
    ),
    "znver4": _ZN4,
    "znver5": _ZN4 | {"avxvnni"},
    "bdver1": _BD1,
    "bdver2": _BD2,
    "bdver3": _BD2,
    "bdver4": _BD2 | {"avx2", "bmi2", "movbe"},
    "btver2": _AVX | {"f16c", "bmi", "movbe", "lzcnt"},
}
_CHECKED = frozenset().union(*X86_CPU_FEATURES.values())

#: feature -> the features it implies (LLVM's), so ``-mattr=+avx512f`` brings AVX2 and
#: ``-mattr=-avx`` takes AVX2, FMA and AVX-512 away
_IMPLIES: Mapping[str, tuple[str, ...]] = {
    "ssse3": ("sse3",),
    "sse4.1": ("ssse3",),
    "sse4.2": ("sse4.1",),
    "avx": ("sse4.2",),
    "avx2": ("avx",),
    "fma": ("avx",),
    "f16c": ("avx",),
    "fma4": ("avx",),
    "xop": ("fma4",),
    "avxvnni": ("avx2",),
    "avxifma": ("avx2",),
    "avxvnniint8": ("avx2",),
    "avxneconvert": ("avx2",),
    "avx512f": ("avx2", "fma", "f16c"),
    **dict.fromkeys(
        ("avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512vnni", "avx512ifma", "avx512vpopcntdq"),
        ("avx512f",),
    ),
    **dict.fromkeys(("avx512vbmi", "avx512vbmi2", "avx512bitalg", "avx512bf16"), ("avx512bw",)),
    "avx512fp16": ("avx512bw", "avx512dq", "avx512vl"),
    "avx10.1": ("avx512fp16",),
    "avx10.2": ("avx10.1",),
}

#: GPU architecture of a ``cuda`` target without ``-arch``
DEFAULT_CUDA_ARCH = "sm_80"

_X86 = ("x86_64", "i386", "i486", "i586", "i686", "x86")
_ARCH_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}
_OSES = ("linux", "darwin", "macos", "ios", "windows", "win32", "freebsd", "netbsd", "openbsd")


def _arch_os(triple: str) -> tuple[str, str]:
    """``("x86_64", "linux")`` for ``x86_64-unknown-linux-gnu`` (vendor and ABI ignored)."""
    arch, *rest = triple.lower().split("-")
    os_name = next((p for p in rest if p.rstrip("0123456789.") in _OSES), "unknown")
    return _ARCH_ALIASES.get(arch, arch), os_name.rstrip("0123456789.")


def _apply(features: set, changes: str) -> set:
    """``features`` after ``"+a,-b"``, with what each added feature implies and without what
    depends on each removed one."""
    out = set(features)
    for change in filter(None, (c.strip() for c in changes.split(","))):
        name = change[1:]
        if change[0] == "+":
            todo = [name]
            while todo:
                f = todo.pop()
                if f not in out:
                    out.add(f)
                    todo.extend(_IMPLIES.get(f, ()))
        elif change[0] == "-":
            gone = {name}
            while True:
                more = {f for f, deps in _IMPLIES.items() if gone & set(deps)} - gone
                if not more:
                    break
                gone |= more
            out -= gone
    return out


@cache
def _host_features() -> str:
    import llvmlite.binding as llvm

    return llvm.get_host_cpu_features().flatten()


def host_cores() -> int:
    """CPUs this process may run on (its affinity mask; all of them where the OS has none)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Target:
    """A compilation target: ``kind`` (``"llvm"``, ``"cuda"``, ``"python"``) and options.

    Accepts a string or another ``Target`` (returned unchanged by :meth:`of`).
    """

    def __init__(self, spec: str):
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError(f"target must be a non-empty string such as 'llvm', got {spec!r}")
        kind, *opts = spec.split()
        if kind not in KIND_OPTIONS:
            raise ValueError(
                f"unknown target kind {kind!r} in {spec!r}; expected one of {', '.join(KIND_OPTIONS)}"
            )
        options: dict[str, str] = {}
        for opt in opts:
            key, eq, value = opt.lstrip("-").partition("=")
            if not opt.startswith("-") or not eq or not value:
                raise ValueError(f"target {spec!r}: option {opt!r} must look like -key=value")
            if key not in KIND_OPTIONS[kind]:
                known = ", ".join(f"-{k}" for k in KIND_OPTIONS[kind]) or "none"
                raise ValueError(f"target {spec!r}: unknown option -{key} for {kind}; known: {known}")
            options[key] = value
        for key in (
            "max-threads-per-block",
            "max-shared-memory-per-block",
            "thread-warp-size",
            "registers-per-block",
        ):
            if key in options and (not options[key].isdigit() or int(options[key]) < 1):
                raise ValueError(f"target {spec!r}: -{key} must be a positive integer, got {options[key]!r}")
        if "arch" in options and not re.fullmatch(r"sm_\d+[a-z]?", options["arch"]):
            raise ValueError(f"target {spec!r}: -arch must look like sm_80, got {options['arch']!r}")
        if "num-cores" in options:
            n = options["num-cores"]
            if not n.isdigit() or int(n) < 1:
                raise ValueError(f"target {spec!r}: -num-cores must be a positive integer, got {n!r}")
        self.kind = kind
        self.options: Mapping[str, str] = dict(sorted(options.items()))

    @staticmethod
    def of(target: Union[str, "Target"]) -> "Target":
        """``target`` as a ``Target`` (strings are parsed)."""
        return target if isinstance(target, Target) else Target(target)

    @staticmethod
    def host() -> "Target":
        """The CPU this process runs on."""
        return Target("llvm")

    # CPU properties ---------------------------------------------------------------------------
    @cached_property
    def mcpu(self) -> str:
        """LLVM's name of the CPU: ``-mcpu``, else the host's (``"generic"`` for another
        architecture than the host's)."""
        if "mcpu" in self.options:
            return self.options["mcpu"]
        return self.mcpu_of_host() if self._host_arch else "generic"

    @property
    def is_host_cpu(self) -> bool:
        """Whether this target is the host's own CPU (no ``-mcpu``, or the host's name)."""
        return self._host_arch and self.options.get("mcpu", self.mcpu_of_host()) == self.mcpu_of_host()

    @staticmethod
    def mcpu_of_host() -> str:
        import llvmlite.binding as llvm

        return llvm.get_host_cpu_name()

    @cached_property
    def features(self) -> str:
        """LLVM feature string (``"+avx2,+fma,..."``): the host's for the host CPU, else only
        ``-mattr`` (LLVM then uses the named CPU's own features)."""
        parts = []
        if self.kind == "llvm" and self.is_host_cpu:
            parts.append(_host_features())
        if "mattr" in self.options:
            parts.append(self.options["mattr"])
        return ",".join(p for p in parts if p)

    @cached_property
    def isa_features(self) -> Optional[frozenset]:
        """The enabled features: the host's for the host CPU, else those of
        :data:`X86_CPU_FEATURES` for the named CPU, changed by ``-mattr``. None for a CPU
        this table does not know (only ``-mattr`` is known of it)."""
        if self.is_host_cpu:
            base: Optional[set] = {f[1:] for f in _host_features().split(",") if f[:1] == "+"}
        else:
            known = X86_CPU_FEATURES.get(self.mcpu) if self.is_x86 else None
            base = set(known) if known is not None else None
        out = _apply(base or set(), self.options.get("mattr", ""))
        return frozenset(out) if base is not None else None

    def has_feature(self, name: str) -> bool:
        """Whether feature ``name`` (e.g. ``"avx512f"``, ``"fma"``) is enabled (``-mattr``
        wins over the CPU's own features)."""
        found = self.isa_features
        if found is None:  # an unknown CPU: what -mattr says
            found = frozenset(_apply(set(), self.options.get("mattr", "")))
        return name in found

    @property
    def arch(self) -> str:
        """The architecture of :attr:`triple` (``"x86_64"``, ``"aarch64"``, ...)."""
        return _arch_os(self.triple)[0]

    @property
    def is_x86(self) -> bool:
        return self.arch in _X86

    @cached_property
    def vector_width_bits(self) -> int:
        """Width of the widest SIMD register: on x86 512 (AVX-512), 256 (AVX), else 128 (SSE);
        128 elsewhere (NEON on AArch64; SVE is not used)."""
        if self.is_x86:
            if self.has_feature("avx512f"):
                return 512
            if self.has_feature("avx") or self.has_feature("avx2"):
                return 256
        return 128

    def vector_lanes(self, dtype: str = "float32") -> int:
        """Elements of ``dtype`` in one SIMD register (``"float32"``: 16, 8 or 4)."""
        digits = re.fullmatch(r"[a-z]+?(\d+)", dtype) if isinstance(dtype, str) else None
        bits = 8 if dtype == "bool" else int(digits.group(1)) if digits else 0
        if not bits:
            raise ValueError(f"vector_lanes: {dtype!r} is not a dtype such as 'float32'")
        return max(self.vector_width_bits // bits, 1)

    @cached_property
    def num_cores(self) -> int:
        """Threads a parallel loop uses (``-num-cores``, else the cores this process may use)."""
        return int(self.options.get("num-cores", 0)) or host_cores()

    @property
    def triple(self) -> str:
        if "mtriple" in self.options:
            return self.options["mtriple"]
        import llvmlite.binding as llvm

        return llvm.get_process_triple()

    @property
    def _host_arch(self) -> bool:
        """Same architecture and OS as the host (no ``-mtriple``, or the host's)."""
        import llvmlite.binding as llvm

        return "mtriple" not in self.options or _arch_os(self.options["mtriple"]) == _arch_os(
            llvm.get_process_triple()
        )

    # GPU properties (kind "cuda"; defaults are those of every GPU from sm_75 on) -------------
    @property
    def cuda_arch(self) -> str:
        """The GPU architecture code is compiled for: ``-arch`` (default ``sm_80``; CUDA 13
        compiles for sm_75 and newer)."""
        return self.options.get("arch", DEFAULT_CUDA_ARCH)

    @property
    def max_threads_per_block(self) -> int:
        """Threads one block may have (``-max-threads-per-block``, default 1024)."""
        return int(self.options.get("max-threads-per-block", 1024))

    @property
    def max_shared_memory_per_block(self) -> int:
        """Bytes of shared memory one block may use (``-max-shared-memory-per-block``; default
        48 KiB, what a kernel gets without opting in to more)."""
        return int(self.options.get("max-shared-memory-per-block", 48 * 1024))

    @property
    def thread_warp_size(self) -> int:
        """Threads of a warp (``-thread-warp-size``, 32 on every NVIDIA GPU)."""
        return int(self.options.get("thread-warp-size", 32))

    @property
    def registers_per_block(self) -> int:
        """32-bit registers one block may use (``-registers-per-block``, default 65536)."""
        return int(self.options.get("registers-per-block", 65536))

    #: largest extent of threadIdx.x / .y / .z and of blockIdx.x / .y / .z
    max_thread_dims = (1024, 1024, 64)
    max_grid_dims = (2**31 - 1, 65535, 65535)

    # running ----------------------------------------------------------------------------------
    def cannot_run(self, host: Optional["Target"] = None) -> Optional[str]:
        """Why code compiled for this target cannot run on ``host`` (default: this machine,
        ``Target.host()``), or None when it can: the same architecture and OS, and every
        instruction-set extension the target's CPU has (:data:`X86_CPU_FEATURES`, ``-mattr``)
        present on the host.

        >>> Target("llvm -mcpu=skylake-avx512").cannot_run(host=Target("llvm -mcpu=znver3"))
        "code for 'llvm -mcpu=skylake-avx512' needs avx512bw, ..., avx512vl, which the host
        (znver3) lacks"
        """
        host = Target.host() if host is None else Target.of(host)
        if self.kind == "python":
            return None
        if self.kind != "llvm":
            return f"{self.kind} code does not run on the CPU"
        what = f"code for {str(self)!r}"
        if _arch_os(self.triple) != _arch_os(host.triple):
            return f"{what} ({self.triple}) cannot run on this {host.triple} host"
        need, have = self.isa_features, host.isa_features
        if need is None:
            return (
                f"{what}: CPU {self.mcpu!r} is not one whose features workbench knows, so it "
                f"may not run on the host ({host.mcpu}); leave out -mcpu to build for the "
                f"host, or name a known CPU ({', '.join(sorted(X86_CPU_FEATURES)[:6])}, ...)"
            )
        explicit = {c[1:] for c in self.options.get("mattr", "").split(",") if c[:1] == "+"}
        missing = sorted(((need & _CHECKED) | explicit) - (have or frozenset()))
        if missing:
            return f"{what} needs {', '.join(missing)}, which the host ({host.mcpu}) lacks"
        return None

    # identity ---------------------------------------------------------------------------------
    def __str__(self) -> str:
        return " ".join([self.kind] + [f"-{k}={v}" for k, v in self.options.items()])

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, str):
            try:
                other = Target(other)
            except ValueError:
                return False
        return isinstance(other, Target) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))
