"""A compiled Python entry point: calling a kernel costs what calling a C builtin costs.

Through ctypes, a call pays for ``arr.ctypes.data`` per array, a pointer-array object and
libffi (several microseconds): more than NRM's whole computation. So every kernel also gets a
second small LLVM module with a ``METH_FASTCALL`` function that CPython calls directly, as it
calls a builtin of a C extension::

    ptr @<name>_py(ptr %self, ptr* %args, i64 %nargs)   ; returns a Python int:
        ; 0: ran; 1: an argument is not what the fast checks accept (the caller then runs the
        ; full Python checks, which raise the precise error, or run the kernel); 2: the kernel
        ; could not allocate its intermediate buffers

For each argument it reads numpy's ``PyArrayObject`` fields (the layout numpy has kept since
1.7: ``data`` at byte 16, ``nd`` at 24, ``dimensions`` at 32, ``descr`` at 56, ``flags`` at 64
on 64-bit CPython) and accepts exactly an ``ndarray`` (not a subclass) whose ``descr`` is the
builtin dtype singleton, whose shape is the parameter's, that is C-contiguous and, for an
output, writeable. A symbolic kernel reads each size variable from the dimension it comes from
(:func:`~workbench.ir.func.size_var_sources`) and requires every other dimension that is the
same variable to agree; a dimension that is an expression of size variables (``n * 2``) is
left to the slow path. Static dimensions are compared with constants exactly as before.
Anything else goes to the slow path, so the fast path can only be stricter
than ``Kernel.check_args``. The GIL is released while the kernel runs, as ctypes did.

The layout is checked once per process on a real array (:func:`available`); where it does not
hold (another Python implementation, a debug or free-threaded build, a future numpy) kernels
are called through ctypes as before.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Sequence, cast

import numpy as np
from llvmlite import ir

from ...ir.expr import Var
from .dtypes import I32, I64, PTR

# offsets of numpy's PyArrayObject_fields on 64-bit CPython (see the module docstring)
_OB_TYPE, _DATA, _ND, _DIMS, _DESCR, _FLAGS = 8, 16, 24, 32, 56, 64
_C_CONTIGUOUS, _WRITEABLE = 0x0001, 0x0400
_METH_FASTCALL = 0x0080
#: the Python int the entry returns
RAN, MISMATCH, NO_MEMORY = 0, 1, 2


class _MethodDef(ctypes.Structure):
    _fields_ = [
        ("ml_name", ctypes.c_char_p),
        ("ml_meth", ctypes.c_void_p),
        ("ml_flags", ctypes.c_int),
        ("ml_doc", ctypes.c_char_p),
    ]


def _c_api(name: str) -> int:
    address = ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value
    return cast(int, address)  # an exported C API function: never NULL


@functools.cache
def available() -> bool:
    """Whether this process's CPython and numpy have the layout the entry reads."""
    if ctypes.sizeof(ctypes.c_void_p) != 8 or not hasattr(ctypes, "pythonapi"):
        return False
    try:
        for name in ("PyLong_FromLong", "PyEval_SaveThread", "PyEval_RestoreThread", "PyCFunction_NewEx"):
            _c_api(name)
    except AttributeError:
        return False
    a = np.zeros((3, 5), dtype="float32")
    base = id(a)

    def read(offset: int, ctype):
        return ctype.from_address(base + offset).value

    try:
        dims = ctypes.cast(read(_DIMS, ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64))
        return (
            read(_OB_TYPE, ctypes.c_void_p) == id(np.ndarray)
            and read(_DATA, ctypes.c_void_p) == a.ctypes.data
            and read(_ND, ctypes.c_int32) == 2
            and (dims[0], dims[1]) == (3, 5)
            and read(_DESCR, ctypes.c_void_p) == id(a.dtype) == id(np.dtype("float32"))
            and read(_FLAGS, ctypes.c_int32) & 0xFFFF == a.flags.num & 0xFFFF
        )
    except (ValueError, OSError):
        return False


def python_entry_module(
    kernel_name: str,
    shapes: Sequence[tuple],
    dtypes: Sequence[str],
    writes: Sequence[bool],
    size_vars: Sequence[Var] = (),
) -> ir.Module:
    """The module of ``@<kernel_name>_py`` (see the module docstring); it calls
    ``i32 @<kernel_name>(ptr, ..., i64 <size>, ...)``, defined in the kernel's own module.
    ``shapes`` hold ints and, for a symbolic kernel, the ``size_vars`` expressions."""
    mod = ir.Module(name=kernel_name + "_py")
    kernel = ir.Function(
        mod, ir.FunctionType(I32, [PTR] * len(shapes) + [I64] * len(size_vars)), name=kernel_name
    )
    limits = {v: 2**31 - 1 if v.dtype == "int32" else 2**63 - 1 for v in size_vars}
    values: dict = {}  # size variable -> its i64 value, once read
    fn = ir.Function(mod, ir.FunctionType(PTR, [PTR, PTR, I64]), name=kernel_name + "_py")
    fn.attributes.add("nounwind")
    _, args, nargs = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    mismatch = fn.append_basic_block("mismatch")

    def c_api(name: str, ret: ir.Type, arg_types: list) -> ir.Value:
        fnty = ir.FunctionType(ret, arg_types)
        return b.inttoptr(ir.Constant(I64, _c_api(name)), fnty.as_pointer())

    def require(cond: ir.Value) -> None:
        ok = fn.append_basic_block("ok")
        b.cbranch(cond, ok, mismatch)
        b.position_at_end(ok)

    def field(obj: ir.Value, offset: int, typ: ir.Type) -> ir.Value:
        return b.load(b.gep(obj, [ir.Constant(I64, offset)], source_etype=ir.IntType(8)), typ=typ)

    require(b.icmp_signed("==", nargs, ir.Constant(I64, len(shapes))))
    data = []
    for k, (shape, dtype, written) in enumerate(zip(shapes, dtypes, writes)):
        obj = b.load(b.gep(args, [ir.Constant(I64, k)], source_etype=PTR), typ=PTR)
        require(
            b.icmp_unsigned(
                "==", b.ptrtoint(field(obj, _OB_TYPE, PTR), I64), ir.Constant(I64, id(np.ndarray))
            )
        )
        require(
            b.icmp_unsigned(
                "==", b.ptrtoint(field(obj, _DESCR, PTR), I64), ir.Constant(I64, id(np.dtype(dtype)))
            )
        )
        require(b.icmp_signed("==", field(obj, _ND, I32), ir.Constant(I32, len(shape))))
        mask = ir.Constant(I32, _C_CONTIGUOUS | (_WRITEABLE if written else 0))
        require(b.icmp_unsigned("==", b.and_(field(obj, _FLAGS, I32), mask), mask))
        if shape:
            dims = field(obj, _DIMS, PTR)
            for d, extent in enumerate(shape):
                size = b.load(b.gep(dims, [ir.Constant(I64, d)], source_etype=I64), typ=I64)
                if isinstance(extent, int):
                    require(b.icmp_signed("==", size, ir.Constant(I64, extent)))
                elif isinstance(extent, Var) and extent in values:
                    require(b.icmp_signed("==", size, values[extent]))
                elif isinstance(extent, Var):  # its first appearance: where it is read from
                    require(b.icmp_signed("<=", size, ir.Constant(I64, limits[extent])))
                    values[extent] = size
                else:  # an expression of size variables: the slow path checks it
                    require(ir.Constant(ir.IntType(1), 0))
        data.append(field(obj, _DATA, PTR))
    long_t = [I64]
    save = b.call(c_api("PyEval_SaveThread", PTR, []), [])
    status = b.call(kernel, data + [values[v] for v in size_vars])
    b.call(c_api("PyEval_RestoreThread", ir.VoidType(), [PTR]), [save])
    code = b.select(
        b.icmp_signed("==", status, ir.Constant(I32, 0)), ir.Constant(I64, RAN), ir.Constant(I64, NO_MEMORY)
    )
    b.ret(b.call(c_api("PyLong_FromLong", PTR, long_t), [code]))
    b.position_at_end(mismatch)
    b.ret(b.call(c_api("PyLong_FromLong", PTR, long_t), [ir.Constant(I64, MISMATCH)]))
    return mod


class PythonEntry:
    """``entry(*arrays) -> int`` (:data:`RAN`, :data:`MISMATCH`, :data:`NO_MEMORY`): a builtin
    function object around the compiled ``@<name>_py`` at ``address``. Keep this object (it owns
    the method table the builtin points into) and the machine code alive while it is used."""

    def __init__(self, address: int, name: str):
        self._name = name.encode()
        self._def = _MethodDef(self._name, address, _METH_FASTCALL, None)
        new = ctypes.pythonapi.PyCFunction_NewEx
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.call = new(ctypes.addressof(self._def), None, None)
