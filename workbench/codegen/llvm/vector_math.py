"""Whole-register math (``exp``, ``log``, ``tanh``, ...) through glibc's libmvec.

LLVM has no vector library configured in llvmlite's pipeline, so ``llvm.exp.v16f32`` becomes
sixteen scalar ``expf`` calls: softmax (SFM) then spends most of its time in libm, one lane at
a time. glibc ships vector versions of these functions (``libmvec``, glibc >= 2.22; ``tanh``
since 2.35) under the x86 vector-function ABI names::

    _ZGV<isa>N<lanes>v_<name>     isa: b = SSE4 (128 bits), d = AVX2 (256), e = AVX-512 (512)
    _ZGVeN16v_expf (<16 x float>) -> <16 x float>      _ZGVdN4v_exp (<4 x double>) -> ...

and the vector ABI passes a register-wide vector the way the C ABI does for that type, so the
kernel calls them like any function. A vector of another lane count is cut into register-wide
pieces (the last padded), each piece is one call. Accuracy is glibc's (within 4 ulp).

Used where the target is the host (the JIT resolves the symbols in this process), an x86-64
Linux whose libmvec has the function at the target's register width; elsewhere (another
architecture, a cross-compiled CPU, no libmvec) math stays on LLVM's intrinsics.
"""

from __future__ import annotations

import functools
from typing import Optional

from llvmlite import ir

from ...target import Target
from .dtypes import I32
from .intrinsics import declare
from .jit import has_symbol

#: register bits -> libmvec's ISA letter
_ISA = {512: "e", 256: "d", 128: "b"}
#: the IR's math functions libmvec provides (one argument)
FUNCTIONS = ("exp", "log", "tanh", "sin", "cos")


def _symbol(op: str, dtype: str, bits: int) -> str:
    lanes = bits // (32 if dtype == "float32" else 64)
    return f"_ZGV{_ISA[bits]}N{lanes}v_{op}{'f' if dtype == 'float32' else ''}"


@functools.lru_cache(maxsize=64)
def register_bits(target: Target, op: str, dtype: str) -> Optional[int]:
    """The register width at which the host's libmvec computes ``op`` on ``dtype`` vectors
    for code of ``target``; None when it cannot be used (see the module docstring)."""
    if op not in FUNCTIONS or dtype not in ("float32", "float64"):
        return None
    if target.kind != "llvm" or target.cannot_run() is not None:
        return None
    if not target.triple.startswith("x86_64") or "linux" not in target.triple:
        return None
    bits = target.vector_width_bits
    if bits == 256 and not target.has_feature("avx2"):
        return None  # the 'd' variants are AVX2 code
    if bits not in _ISA:
        return None
    return bits if has_symbol(_symbol(op, dtype, bits)) else None


def call(b: ir.IRBuilder, op: str, x: ir.Value, dtype: str, bits: int) -> ir.Value:
    """``op`` of every lane of vector ``x`` through libmvec, one call per register."""
    n = x.type.count
    lanes = bits // (32 if dtype == "float32" else 64)
    reg_t = ir.VectorType(x.type.element, lanes)
    fn = declare(b.module, _symbol(op, dtype, bits), reg_t, [reg_t])
    undef = ir.Constant(x.type, ir.Undefined)
    out = undef
    for start in range(0, n, lanes):
        # lanes past the end of x read lane 0 (a valid input) rather than undef
        picks = [start + k if start + k < n else 0 for k in range(lanes)]
        piece = b.shuffle_vector(x, undef, ir.Constant(ir.VectorType(I32, lanes), picks))
        result = b.call(fn, [piece])
        if n == lanes:
            return result
        for k in range(min(lanes, n - start)):  # LLVM folds these into shuffles
            out = b.insert_element(
                out, b.extract_element(result, ir.Constant(I32, k)), ir.Constant(I32, start + k)
            )
    return out
