"""The IR's dtypes, one table: what the analyses and every backend know of each dtype.

A dtype is a string (``"float32"``, ``"int8"``, ``"bool"`` ...) on every IR node; this module is
where its width, kind, range and spellings are written, once. It imports nothing of the project,
so anything (the IR core, the arithmetic, a backend) can read it.

* ``bits``: bits of a value (``bool``: 1); ``nbytes``: bytes of one element in memory (``bool``:
  one byte, as numpy stores it);
* ``c``: the C spelling, the one CUDA uses (``float16`` is ``half`` of ``cuda_fp16.h``); a
  C-family language that spells types otherwise (OpenCL's ``uchar``, ``long``) has its own table;
* ``llvm``: the llvmlite type constructor (``IntType`` takes ``bits``);
* ``min`` / ``max``: the smallest and largest value (floats: the largest finite magnitudes).

numpy spells every IR dtype as the IR does (``np.dtype(name)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class DType:
    name: str
    kind: str  # "int", "uint", "float" or "bool"
    bits: int
    nbytes: int
    c: str
    llvm: str
    min: Union[int, float]
    max: Union[int, float]

    @property
    def numpy(self) -> str:
        return self.name

    @property
    def is_int(self) -> bool:
        """A signed or unsigned integer (not bool)."""
        return self.kind in ("int", "uint")

    @property
    def is_float(self) -> bool:
        return self.kind == "float"


def _int(bits: int, c: str) -> DType:
    return DType(
        f"int{bits}", "int", bits, bits // 8, c, "IntType", -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    )


def _uint(bits: int, c: str) -> DType:
    return DType(f"uint{bits}", "uint", bits, bits // 8, c, "IntType", 0, (1 << bits) - 1)


_F16_MAX, _F32_MAX, _F64_MAX = 65504.0, 3.4028234663852886e38, 1.7976931348623157e308

#: every dtype of the IR, in the order error messages list them
DTYPE_INFO: dict[str, DType] = {
    d.name: d
    for d in (
        _int(8, "signed char"),
        _int(16, "short"),
        _int(32, "int"),
        _int(64, "long long"),
        _uint(8, "unsigned char"),
        _uint(16, "unsigned short"),
        _uint(32, "unsigned int"),
        _uint(64, "unsigned long long"),
        DType("float16", "float", 16, 2, "half", "HalfType", -_F16_MAX, _F16_MAX),
        DType("float32", "float", 32, 4, "float", "FloatType", -_F32_MAX, _F32_MAX),
        DType("float64", "float", 64, 8, "double", "DoubleType", -_F64_MAX, _F64_MAX),
        DType("bool", "bool", 1, 1, "bool", "IntType", 0, 1),
    )
}

INT_DTYPES = tuple(n for n, d in DTYPE_INFO.items() if d.is_int)
SIGNED_INT_DTYPES = frozenset(n for n, d in DTYPE_INFO.items() if d.kind == "int")
FLOAT_DTYPES = tuple(n for n, d in DTYPE_INFO.items() if d.is_float)


def dtype_info(dtype: str) -> DType:
    """The table's entry of ``dtype`` (``TypeError`` for a dtype the IR does not have)."""
    info = DTYPE_INFO.get(dtype)
    if info is None:
        raise TypeError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_INFO)}")
    return info


def poison(dtype: str) -> Union[bool, int, float]:
    """What an intermediate buffer of ``dtype`` holds before it is written, in the backends that
    check reads of unwritten memory (python, llvm): NaN for floats, the minimum of a signed
    integer dtype, the maximum of an unsigned one (DESIGN decision 9)."""
    info = dtype_info(dtype)
    if info.kind == "bool":
        return False
    if info.kind == "uint":
        return info.max
    if info.kind == "int":
        return info.min
    return math.nan
