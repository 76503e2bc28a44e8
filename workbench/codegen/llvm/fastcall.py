"""The fast way into a compiled kernel: check numpy arrays and call, in native code.

Calling a kernel through ctypes the obvious way costs microseconds per array: ``a.ctypes.data``
builds a helper object, the pointer array is built in Python, and the checks read ``dtype``,
``shape`` and ``flags`` through Python attributes. Instead one small function, compiled once per
process, receives the argument tuple as a ``PyObject*`` and a per-kernel spec, and for each
argument reads the ``PyArrayObject`` fields directly::

    i32 @wb_fastcall(ptr %args_tuple, ptr %spec)
        ; for each argument k:  type is exactly numpy.ndarray,  descr is the expected builtin
        ; dtype object, nd and every dimension match, the flags include C-contiguous (and
        ; writeable for an output); then ptrs[k] = data
        ; all good: call the kernel's packed entry on ptrs -> 0 (ok) or 2 (it failed)
        ; anything else -> 1, before running anything

``1`` sends the call to the Python path (:meth:`Kernel.check_args` and a pointer-array call),
which raises the precise error or runs the kernel when the array was fine after all (an
ndarray subclass, an equal but distinct dtype object). So the native check may be stricter
than the Python one, never looser.

The field offsets are CPython's and numpy's ABI on 64-bit builds (object header 16 bytes,
``PyArrayObject``: data 16, nd 24, dimensions 32, strides 40, base 48, descr 56, flags 64; a
tuple's items from 24). :func:`native_caller` checks them on real objects and runs the compiled
function on test arrays once per process; if anything differs (a debug or free-threaded
build, another Python), it returns None and kernels use the Python path alone.

Spec layout (``int64`` words, kept alive by the kernel)::

    spec  = [id(numpy.ndarray), entry address, nargs, address of table]
    table = per argument: [id(expected dtype), ndim, address of its dims, required flags]
"""
from __future__ import annotations

import ctypes
import functools
import sys
import sysconfig
from typing import Callable, Optional, Sequence

import numpy as np

#: return codes of the compiled function
OK, MISMATCH, FAILED = 0, 1, 2

#: numpy's flag bits (``ndarraytypes.h``)
C_CONTIGUOUS, WRITEABLE = 0x0001, 0x0400

#: byte offsets (CPython object header, tuple, ``PyArrayObject``), checked by the self-test
OFFSETS = dict(ob_type=8, tuple_size=16, tuple_items=24, data=16, nd=24, dims=32, descr=56,
               flags=64)

_IR = """
define i32 @wb_fastcall(ptr %args, ptr %spec) nounwind {{
entry:
  %nargs.p = getelementptr inbounds i64, ptr %spec, i64 2
  %nargs = load i64, ptr %nargs.p
  %size.p = getelementptr inbounds i8, ptr %args, i64 {tuple_size}
  %size = load i64, ptr %size.p
  %count.ok = icmp eq i64 %size, %nargs
  br i1 %count.ok, label %setup, label %mismatch
setup:
  %ptrs = alloca ptr, i64 %nargs, align 16
  %ndarray = load ptr, ptr %spec
  %table.p = getelementptr inbounds i64, ptr %spec, i64 3
  %table = load ptr, ptr %table.p
  br label %head
head:
  %k = phi i64 [0, %setup], [%k.next, %store]
  %more = icmp slt i64 %k, %nargs
  br i1 %more, label %arg, label %call
arg:
  %item.off = shl i64 %k, 3
  %item.at = add i64 %item.off, {tuple_items}
  %item.p = getelementptr inbounds i8, ptr %args, i64 %item.at
  %obj = load ptr, ptr %item.p
  %type.p = getelementptr inbounds i8, ptr %obj, i64 {ob_type}
  %type = load ptr, ptr %type.p
  %is.ndarray = icmp eq ptr %type, %ndarray
  br i1 %is.ndarray, label %fields, label %mismatch
fields:
  %rec.at = shl i64 %k, 2
  %rec = getelementptr inbounds i64, ptr %table, i64 %rec.at
  %want.descr = load ptr, ptr %rec
  %descr.p = getelementptr inbounds i8, ptr %obj, i64 {descr}
  %descr = load ptr, ptr %descr.p
  %descr.ok = icmp eq ptr %descr, %want.descr
  %want.nd.p = getelementptr inbounds i64, ptr %rec, i64 1
  %want.nd = load i64, ptr %want.nd.p
  %nd.p = getelementptr inbounds i8, ptr %obj, i64 {nd}
  %nd32 = load i32, ptr %nd.p
  %nd = sext i32 %nd32 to i64
  %nd.ok = icmp eq i64 %nd, %want.nd
  %want.flags.p = getelementptr inbounds i64, ptr %rec, i64 3
  %want.flags = load i64, ptr %want.flags.p
  %flags.p = getelementptr inbounds i8, ptr %obj, i64 {flags}
  %flags32 = load i32, ptr %flags.p
  %flags = zext i32 %flags32 to i64
  %has = and i64 %flags, %want.flags
  %flags.ok = icmp eq i64 %has, %want.flags
  %ok.1 = and i1 %descr.ok, %nd.ok
  %ok = and i1 %ok.1, %flags.ok
  br i1 %ok, label %dims, label %mismatch
dims:
  %want.dims.p = getelementptr inbounds i64, ptr %rec, i64 2
  %want.dims = load ptr, ptr %want.dims.p
  %dims.p = getelementptr inbounds i8, ptr %obj, i64 {dims}
  %have.dims = load ptr, ptr %dims.p
  br label %dim.head
dim.head:
  %d = phi i64 [0, %dims], [%d.next, %dim.body]
  %dim.more = icmp slt i64 %d, %nd
  br i1 %dim.more, label %dim.body, label %store
dim.body:
  %want.dim.p = getelementptr inbounds i64, ptr %want.dims, i64 %d
  %want.dim = load i64, ptr %want.dim.p
  %have.dim.p = getelementptr inbounds i64, ptr %have.dims, i64 %d
  %have.dim = load i64, ptr %have.dim.p
  %d.next = add i64 %d, 1
  %dim.ok = icmp eq i64 %have.dim, %want.dim
  br i1 %dim.ok, label %dim.head, label %mismatch
store:
  %data.p = getelementptr inbounds i8, ptr %obj, i64 {data}
  %data = load ptr, ptr %data.p
  %slot = getelementptr inbounds ptr, ptr %ptrs, i64 %k
  store ptr %data, ptr %slot
  %k.next = add i64 %k, 1
  br label %head
call:
  %entry.p = getelementptr inbounds i64, ptr %spec, i64 1
  %kernel = load ptr, ptr %entry.p
  %status = call i32 %kernel(ptr %ptrs)
  %failed = icmp ne i32 %status, 0
  %code = select i1 %failed, i32 {failed_code}, i32 {ok_code}
  ret i32 %code
mismatch:
  ret i32 {mismatch_code}
}}
"""

#: ``fastcall(args_tuple, spec_address) -> code``; releases the GIL around the call, as any
#: ctypes call of a C function type does
FastCall = Callable[[tuple, int], int]


class Spec:
    """What the compiled function checks for one kernel, and the kernel's entry address."""

    def __init__(self, entry_address: int, dtypes: Sequence[str],
                 shapes: Sequence[Sequence[int]], writes: Sequence[bool]):
        n = len(dtypes)
        self._dtypes = [np.dtype(d) for d in dtypes]   # the singletons whose ids are compared
        self._dims = [(ctypes.c_int64 * max(len(s), 1))(*s) for s in shapes]
        table = []
        for dt, shape, dims, w in zip(self._dtypes, shapes, self._dims, writes):
            table += [id(dt), len(shape), ctypes.addressof(dims),
                      C_CONTIGUOUS | (WRITEABLE if w else 0)]
        self._table = (ctypes.c_int64 * max(len(table), 1))(*table)
        self._words = (ctypes.c_int64 * 4)(id(np.ndarray), entry_address, n,
                                           ctypes.addressof(self._table))
        self.address = ctypes.addressof(self._words)


@functools.lru_cache(maxsize=None)
def native_caller() -> Optional[FastCall]:
    """The compiled checker-caller, or None where the ABI does not match (see the module doc)."""
    if not _abi_plausible() or not _layout_matches():
        return None
    from ..target import Target
    from .jit import jit
    codes = dict(ok_code=OK, mismatch_code=MISMATCH, failed_code=FAILED)
    try:
        compiled = jit(_IR.format(**OFFSETS, **codes), "wb_fastcall", Target("llvm"))
    except Exception:  # noqa: BLE001  (no fast path is a slowdown, never an error)
        return None
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.py_object, ctypes.c_void_p)(compiled.address)
    fn.compiled = compiled  # type: ignore[attr-defined]  (keeps the machine code alive)
    return fn if _self_test(fn) else None


def _abi_plausible() -> bool:
    """CPython, 64-bit, with the GIL and without the debug build's extra object fields."""
    return (sys.implementation.name == "cpython" and sys.maxsize == 2 ** 63 - 1
            and not sysconfig.get_config_var("Py_GIL_DISABLED")
            and not hasattr(sys, "gettotalrefcount"))


def _layout_matches() -> bool:
    """Read the fields at ``OFFSETS`` of real objects and compare with what Python says."""
    o = OFFSETS

    def i64(address: int) -> int:
        return ctypes.c_int64.from_address(address).value

    def i32(address: int) -> int:
        return ctypes.c_int32.from_address(address).value

    a = np.zeros((2, 3), np.float32)
    r = np.zeros(6, np.int64)[::2]
    r.flags.writeable = False
    t = (a, r)
    if i64(id(t) + o["tuple_size"]) != 2 or i64(id(t) + o["tuple_items"]) != id(a) \
            or i64(id(t) + o["tuple_items"] + 8) != id(r):
        return False
    for arr, flags in ((a, C_CONTIGUOUS | WRITEABLE), (r, 0)):
        dims = i64(id(arr) + o["dims"])
        if (i64(id(arr) + o["ob_type"]) != id(np.ndarray)
                or i64(id(arr) + o["data"]) != arr.ctypes.data
                or i32(id(arr) + o["nd"]) != arr.ndim
                or [i64(dims + 8 * d) for d in range(arr.ndim)] != list(arr.shape)
                or i64(id(arr) + o["descr"]) != id(arr.dtype)
                or i32(id(arr) + o["flags"]) & (C_CONTIGUOUS | WRITEABLE) != flags):
            return False
    return a.dtype is np.dtype("float32")


class _Subclass(np.ndarray):
    """Not exactly ``numpy.ndarray``: the native checks must refuse it."""


def _self_test(fn: FastCall) -> bool:
    """Run the compiled function on good and bad arguments with a recording entry."""
    seen: list = []
    entry_t = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))
    entry = entry_t(lambda ptrs: seen.append((ptrs[0], ptrs[1])) or len(seen) - 1)
    spec = Spec(ctypes.cast(entry, ctypes.c_void_p).value, ["float32", "int64"],
                [(2, 3), ()], [False, True])
    a, s = np.zeros((2, 3), np.float32), np.zeros((), np.int64)
    frozen = s.copy()
    frozen.flags.writeable = False
    cases = [((a, s), OK), ((a, s), FAILED), ((a,), MISMATCH), ((a, s, s), MISMATCH),
             ((a.T.copy(), s), MISMATCH), ((a.astype(np.float64), s), MISMATCH),
             ((a, frozen), MISMATCH), ((np.zeros((6, 3), np.float32)[::3], s), MISMATCH),
             ((a.view(_Subclass), s), MISMATCH), ((a, 0), MISMATCH)]
    for args, want in cases:
        if fn(args, spec.address) != want:
            return False
    return seen == [(a.ctypes.data, s.ctypes.data)] * 2
