"""``Target``: what a function is compiled for, parsed from a string such as ``"llvm"``.

    >>> Target("llvm")                                   # the host CPU, all its cores
    >>> Target("llvm -mcpu=skylake-avx512 -num-cores=2")
    >>> Target("cuda -arch=sm_80")

A target is a *kind* plus ``-key=value`` options. ``str(target)`` is canonical (the kind, then the
options given, sorted), so it can key a tuning database: ``"llvm"`` and ``"llvm -num-cores=4"``
are different targets, while option order and spacing do not matter. Properties that are not
given (the CPU name, its features, the core count) are resolved from the host when asked.
"""
from __future__ import annotations

import os
from functools import cached_property
from typing import Any, Mapping, Union

#: Options each target kind accepts (``-key=value``).
KIND_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "llvm": ("mcpu", "mattr", "mtriple", "num-cores"),
    "cuda": ("arch", "max-threads-per-block", "max-shared-memory-per-block", "thread-warp-size"),
    "python": (),
}

#: CPU names (LLVM spelling) with 512-bit AVX-512 registers; others get 256 bits if they have AVX.
_AVX512_CPUS = ("knl", "knm", "skylake-avx512", "skx", "cascadelake", "cooperlake", "cannonlake",
                "icelake-client", "icelake-server", "tigerlake", "rocketlake", "sapphirerapids",
                "emeraldrapids", "graniterapids", "graniterapids-d", "diamondrapids", "znver4",
                "znver5", "x86-64-v4")
_AVX_CPUS = ("sandybridge", "ivybridge", "haswell", "broadwell", "skylake", "alderlake",
             "raptorlake", "meteorlake", "arrowlake", "lunarlake", "pantherlake", "gracemont",
             "znver1", "znver2", "znver3", "bdver1", "bdver2", "bdver3", "bdver4", "btver2",
             "x86-64-v3", "corei7-avx", "core-avx-i", "core-avx2")


def _host_cores() -> int:
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
            raise ValueError(f"unknown target kind {kind!r} in {spec!r}; "
                             f"expected one of {', '.join(KIND_OPTIONS)}")
        options: dict[str, str] = {}
        for opt in opts:
            key, eq, value = opt.lstrip("-").partition("=")
            if not opt.startswith("-") or not eq or not value:
                raise ValueError(f"target {spec!r}: option {opt!r} must look like -key=value")
            if key not in KIND_OPTIONS[kind]:
                known = ", ".join(f"-{k}" for k in KIND_OPTIONS[kind]) or "none"
                raise ValueError(f"target {spec!r}: unknown option -{key} for {kind}; "
                                 f"known: {known}")
            options[key] = value
        if "num-cores" in options:
            n = options["num-cores"]
            if not n.isdigit() or int(n) < 1:
                raise ValueError(f"target {spec!r}: -num-cores must be a positive integer, "
                                 f"got {n!r}")
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
        """LLVM's name of the CPU (the host's unless ``-mcpu`` was given)."""
        if "mcpu" in self.options:
            return self.options["mcpu"]
        import llvmlite.binding as llvm
        return llvm.get_host_cpu_name()

    @property
    def is_host_cpu(self) -> bool:
        return "mcpu" not in self.options or self.options["mcpu"] == self.mcpu_of_host()

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
            import llvmlite.binding as llvm
            parts.append(llvm.get_host_cpu_features().flatten())
        if "mattr" in self.options:
            parts.append(self.options["mattr"])
        return ",".join(p for p in parts if p)

    def has_feature(self, name: str) -> bool:
        """Whether feature ``name`` (e.g. ``"avx512f"``) is enabled (``mattr`` wins)."""
        enabled = None
        for f in self.features.split(","):
            if f[1:] == name:
                enabled = f[0] == "+"
        if enabled is not None:
            return enabled
        if name == "avx512f":
            return self.mcpu in _AVX512_CPUS
        if name in ("avx", "avx2"):
            return self.mcpu in _AVX512_CPUS + _AVX_CPUS
        return False

    @cached_property
    def vector_width_bits(self) -> int:
        """Width of the widest SIMD register: 512 (AVX-512), 256 (AVX), else 128."""
        if self.has_feature("avx512f"):
            return 512
        if self.has_feature("avx") or self.has_feature("avx2"):
            return 256
        return 128

    @cached_property
    def num_cores(self) -> int:
        """Threads a parallel loop uses (``-num-cores``, else the cores this process may use)."""
        return int(self.options.get("num-cores", 0)) or _host_cores()

    @property
    def triple(self) -> str:
        if "mtriple" in self.options:
            return self.options["mtriple"]
        import llvmlite.binding as llvm
        return llvm.get_process_triple()

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
