"""Math intrinsics and masked memory operations, for scalars and vectors.

The IR's math functions map to LLVM intrinsics where one exists (``llvm.exp.v16f32`` …: LLVM
turns them into instructions or libm calls, and folds constants); ``erf`` has none, so it is a
libm call, one per lane for vectors. ``round`` rounds halves away from zero (C's ``round``, as
the python target does), not to even as numpy does. The masked load/store/gather/scatter
intrinsics let a vectorized loop touch only the lanes its conditions allow (a padded border, a
split tail).
"""

from __future__ import annotations

from llvmlite import ir

from .dtypes import FMF, I1, I32, PTR, VOID, const, is_float_dtype, lanes_of, vec

#: IR op -> LLVM intrinsic base name (overloaded on the argument type)
_LLVM = {
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "tanh": "tanh",
    "fabs": "fabs",
    "pow": "pow",
    "floor": "floor",
    "ceil": "ceil",
    "round": "round",
    "sin": "sin",
    "cos": "cos",
}
#: IR op -> libm function (float32 name; the float64 one drops the "f")
_LIBM = {"erf": "erff"}


def type_suffix(t: ir.Type) -> str:
    """LLVM's mangling of an overloaded intrinsic's type: f32, v16f32, i64, p0."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{type_suffix(t.element)}"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.PointerType):
        return "p0"
    raise TypeError(f"no intrinsic suffix for LLVM type {t}")


def declare(module: ir.Module, name: str, ret: ir.Type, args: list) -> ir.Function:
    """The function ``name`` of ``module``, declared on first use."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name=name)
    return fn


def call_intrinsic(
    b: ir.IRBuilder, base: str, args: list, ret: ir.Type | None = None, overload: list | None = None
) -> ir.Value:
    """Call ``llvm.<base>.<suffixes>``; suffixes come from ``overload`` (default: first arg)."""
    overload = overload if overload is not None else [args[0].type]
    name = ".".join([f"llvm.{base}"] + [type_suffix(t) for t in overload])
    ret = ret if ret is not None else args[0].type
    fn = declare(b.module, name, ret, [a.type for a in args])
    return b.call(fn, args)


def splat(b: ir.IRBuilder, v: ir.Value, lanes: int) -> ir.Value:
    """A vector of ``lanes`` copies of scalar ``v`` (``v`` itself when lanes is 1)."""
    if lanes == 1 or isinstance(v.type, ir.VectorType):
        return v
    if isinstance(v, ir.Constant):
        return ir.Constant(ir.VectorType(v.type, lanes), [v] * lanes)
    t = ir.VectorType(v.type, lanes)
    one = b.insert_element(ir.Constant(t, ir.Undefined), v, ir.Constant(I32, 0))
    return b.shuffle_vector(
        one, ir.Constant(t, ir.Undefined), ir.Constant(ir.VectorType(I32, lanes), [0] * lanes)
    )


def math(b: ir.IRBuilder, op: str, args: list, dtype: str) -> ir.Value:
    """The IR intrinsic ``op`` on register values ``args`` of ``dtype`` (scalar or vector)."""
    x = args[0]
    n = lanes_of(x)
    if op == "abs" and not is_float_dtype(dtype):
        neg = b.sub(const(dtype, 0, n), x)
        return b.select(b.icmp_signed("<", x, const(dtype, 0, n)), neg, x)
    if not is_float_dtype(dtype):
        raise TypeError(f"intrinsic {op} needs float arguments, got {dtype}")
    if op == "abs":
        op = "fabs"
    if op in _LLVM:
        return call_intrinsic(b, _LLVM[op], list(args))
    if op == "rsqrt":
        root = call_intrinsic(b, "sqrt", [x])
        return b.fdiv(const(dtype, 1.0, n), root, flags=FMF)
    if op == "sigmoid":
        e = call_intrinsic(b, "exp", [b.fsub(const(dtype, 0.0, n), x, flags=FMF)])
        return b.fdiv(const(dtype, 1.0, n), b.fadd(const(dtype, 1.0, n), e, flags=FMF), flags=FMF)
    if op in _LIBM:
        return _libm(b, _LIBM[op], x, dtype)
    raise TypeError(f"intrinsic {op!r} is not supported by the LLVM backend")


def _libm(b: ir.IRBuilder, fname: str, x: ir.Value, dtype: str) -> ir.Value:
    """A one-argument libm call, per lane for vectors; float16 goes through float32."""
    scalar_t = x.type.element if isinstance(x.type, ir.VectorType) else x.type
    if dtype == "float16":
        wide = b.fpext(x, vec(ir.FloatType(), lanes_of(x)))
        return b.fptrunc(_libm(b, fname, wide, "float32"), x.type)
    name = fname if dtype == "float32" else fname[:-1]
    fn = declare(b.module, name, scalar_t, [scalar_t])
    if not isinstance(x.type, ir.VectorType):
        return b.call(fn, [x])
    out = ir.Constant(x.type, ir.Undefined)
    for lane in range(x.type.count):
        i = ir.Constant(I32, lane)
        out = b.insert_element(out, b.call(fn, [b.extract_element(x, i)]), i)
    return out


# masked memory -------------------------------------------------------------------------------
# (the explicit alignment operand is the pre-LLVM-22 form; newer LLVMs upgrade it on parsing)


def masked_load(b: ir.IRBuilder, ptr: ir.Value, t: ir.VectorType, mask: ir.Value, align: int) -> ir.Value:
    passthru = ir.Constant(t, None)
    return call_intrinsic(
        b, "masked.load", [ptr, ir.Constant(I32, align), mask, passthru], ret=t, overload=[t, PTR]
    )


def masked_store(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, mask: ir.Value, align: int) -> None:
    name = f"llvm.masked.store.{type_suffix(value.type)}.p0"
    fn = declare(b.module, name, VOID, [value.type, PTR, I32, mask.type])
    b.call(fn, [value, ptr, ir.Constant(I32, align), mask])


def gather(b: ir.IRBuilder, ptrs: ir.Value, t: ir.VectorType, mask: ir.Value, align: int) -> ir.Value:
    passthru = ir.Constant(t, None)
    return call_intrinsic(
        b, "masked.gather", [ptrs, ir.Constant(I32, align), mask, passthru], ret=t, overload=[t, ptrs.type]
    )


def scatter(b: ir.IRBuilder, value: ir.Value, ptrs: ir.Value, mask: ir.Value, align: int) -> None:
    name = f"llvm.masked.scatter.{type_suffix(value.type)}.{type_suffix(ptrs.type)}"
    fn = declare(b.module, name, VOID, [value.type, ptrs.type, I32, mask.type])
    b.call(fn, [value, ptrs, ir.Constant(I32, align), mask])


def all_true(lanes: int) -> ir.Constant:
    return ir.Constant(ir.VectorType(I1, lanes), [ir.Constant(I1, 1)] * lanes)
