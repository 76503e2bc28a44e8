"""IR dtypes as LLVM types, and conversions between them (scalars and vectors alike).

Two representations per dtype: the *memory* type (how a buffer element is stored: ``bool`` is a
byte, as in numpy) and the *register* type (how a value is computed with). ``int32`` — the IR's
index dtype — is computed in ``i64`` registers, sign-extended: every address computation is then
64-bit without extensions in loops, which keeps LLVM's loop analyses simple. Values are only
narrowed back to 32 bits when stored into an ``int32`` buffer or cast.
"""

from __future__ import annotations

from llvmlite import ir

from ...ir.dtype import DTYPE_INFO, dtype_info

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()

#: the float dtypes' LLVM types (integers are ``IntType`` of the dtype's bits: ``bool`` is ``i1``;
#: int32 lives in i64 registers but has 32 bits)
_FLOAT = {n: getattr(ir, d.llvm)() for n, d in DTYPE_INFO.items() if d.is_float}

#: fast-math flags on float arithmetic: contraction into FMA and reassociation (so LLVM may
#: vectorize float reductions); NaN and infinity semantics are kept.
FMF = ("contract", "reassoc")


def is_float_dtype(dtype: str) -> bool:
    return dtype in _FLOAT


def is_signed(dtype: str) -> bool:
    return dtype.startswith("int")


def reg_type(dtype: str) -> ir.Type:
    if dtype in _FLOAT:
        return _FLOAT[dtype]
    if dtype == "int32":
        return I64
    return ir.IntType(dtype_info(dtype).bits)


def mem_type(dtype: str) -> ir.Type:
    if dtype == "bool":
        return I8
    if dtype == "int32":
        return I32
    return reg_type(dtype)


def lanes_of(value: ir.Value) -> int:
    """1 for a scalar, the lane count of a vector."""
    t = value.type
    return t.count if isinstance(t, ir.VectorType) else 1


def vec(t: ir.Type, lanes: int) -> ir.Type:
    """``t`` with ``lanes`` lanes (itself for 1)."""
    return t if lanes == 1 else ir.VectorType(t, lanes)


def const(dtype: str, value, lanes: int = 1) -> ir.Constant:
    t = reg_type(dtype)
    if dtype == "bool":
        value = int(bool(value))
    elif dtype not in _FLOAT:
        bits = t.width
        value = int(value) & ((1 << bits) - 1)  # two's complement bit pattern
    else:
        value = float(value)
    c = ir.Constant(t, value)
    return c if lanes == 1 else ir.Constant(ir.VectorType(t, lanes), [c] * lanes)


def _int_resize(b: ir.IRBuilder, v: ir.Value, bits: int, signed: bool) -> ir.Value:
    width = (v.type.element if isinstance(v.type, ir.VectorType) else v.type).width
    t = vec(ir.IntType(bits), lanes_of(v))
    if width > bits:
        return b.trunc(v, t)
    if width < bits:
        return b.sext(v, t) if signed else b.zext(v, t)
    return v


def cast(b: ir.IRBuilder, v: ir.Value, src: str, dst: str) -> ir.Value:
    """Convert register value ``v`` of dtype ``src`` to dtype ``dst`` (numpy's ``astype``,
    except that out-of-range float -> int conversions are undefined, as in C)."""
    if src == dst:
        return v
    n = lanes_of(v)
    if dst == "bool":
        if src in _FLOAT:
            return b.fcmp_unordered("!=", v, const(src, 0.0, n))
        return b.icmp_unsigned("!=", v, const(src, 0, n))
    if dst in _FLOAT:
        t = vec(_FLOAT[dst], n)
        if src in _FLOAT:
            return b.fpext(v, t) if dtype_info(dst).bits > dtype_info(src).bits else b.fptrunc(v, t)
        return b.sitofp(v, t) if is_signed(src) else b.uitofp(v, t)
    bits = dtype_info(dst).bits
    if src in _FLOAT:
        it = vec(ir.IntType(bits), n)
        v = b.fptosi(v, it) if is_signed(dst) else b.fptoui(v, it)
    else:
        v = _int_resize(b, v, bits, is_signed(src))
    return _int_resize(b, v, reg_type(dst).width, True)  # int32 back to its i64 register


def to_memory(b: ir.IRBuilder, v: ir.Value, dtype: str) -> ir.Value:
    """Register value -> the value to store into a ``dtype`` buffer."""
    if dtype in ("bool", "int32"):
        return _int_resize(b, v, mem_type(dtype).width, False)
    return v


def from_memory(b: ir.IRBuilder, v: ir.Value, dtype: str) -> ir.Value:
    """Loaded value of a ``dtype`` buffer -> register value."""
    if dtype == "bool":
        return b.icmp_unsigned("!=", v, ir.Constant(v.type, None))
    if dtype == "int32":
        return _int_resize(b, v, 64, True)
    return v
