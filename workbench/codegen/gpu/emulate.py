"""Target ``cuda-emulate``: the GPU kernels of :mod:`.device` run on the CPU, with GPU semantics.

Every thread of the grid is one *lane* of numpy arrays: a kernel runs as one Python function
(generated, shown by ``kernel.source("emulator")``) in which each statement executes for all
lanes at once, so the thread loop costs nothing and a statement costs a few numpy operations.
GPU semantics, as the CUDA C means them:

* hardware indices (``threadIdx.x`` ...) are lane arrays; serial loops must have the same trip
  count in every thread (they do in lowered IR) and run in Python;
* a thread-dependent ``if`` narrows the *active mask*; loads and stores touch active lanes only
  (``Select`` and ``&&`` evaluate their guarded side under the narrowed mask too, so a guarded
  out-of-bounds load is not an error, an unguarded one is);
* ``local`` buffers hold one copy per lane; ``shared`` ones one copy per block; ``global`` ones
  one copy;
* ``__syncthreads()`` ends a *phase*; reaching it under a condition that splits a block is an
  error (a deadlock or undefined behaviour on a GPU);
* an :class:`~.device.AllReduce` reduces across the lanes of each group with numpy, as the
  warp shuffles or the shared-memory tree would.

Races: all threads run each statement in lockstep, which is one of the schedules a GPU may
choose; the result is that of every schedule only if no two threads touch one element without
a barrier in between. The emulator checks it for shared buffers and for global buffers the
kernel writes: a thread writing, or reading, an element another thread of its block wrote in
the same phase (or read in it, for a write), or another block wrote at all, raises
:class:`GPURaceError` naming the buffer, the element, the two threads and the statement.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Optional, cast

import numpy as np

from ...errors import BuildError
from ...ir import expr as E
from ...ir.arith import simplify
from ...ir.buffer import Buffer
from ...ir.dtype import dtype_info
from ...ir.functor import pre_order, substitute
from ...ir.stmt import Allocate, BufferStore, Evaluate, For, IfThenElse, Range, SeqStmt, Stmt
from ..printing import SourceWriter, flat_index
from ..pyexpr import BINOPS, P_ATOM, PyExprPrinter
from .device import (
    HW,
    PRIVATE_SCOPES,
    AllReduce,
    Barrier,
    DeviceKernel,
    DeviceProgram,
    Wmma,
    host_count,
    host_sizes,
    perfect_nest,
)


class GPURaceError(RuntimeError):
    """Two threads touched one element without a barrier between them (or a barrier was
    reached by part of a block): the kernel's result would depend on the GPU's schedule."""


_OPS = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


class EmulatedProgram:
    """Runs a :class:`DeviceProgram`'s kernels in order on numpy arrays."""

    def __init__(self, program: DeviceProgram):
        self.program = program
        self.kernels = [_EmulatedKernel(k) for k in program.kernels]
        self.python_source = "\n".join(k.source for k in self.kernels)

    def run(self, *arrays: np.ndarray) -> None:
        mem: dict[Buffer, np.ndarray] = {}
        sizes = host_sizes(self.program.func, arrays)
        for buf, arr in zip(self.program.func.params, arrays):
            mem[buf] = arr.reshape(-1)  # a view: stores land in the caller's array
        for buf in self.program.host_buffers:
            mem[buf] = np.zeros(host_count(buf, sizes), buf.dtype)
        for k in self.kernels:
            k.run(mem, sizes)


# ------------------------------------------------------------------------------------------
# the runtime one kernel execution uses


class _State:
    """Lanes, memories and the race detector of one kernel run (``S`` in generated code)."""

    def __init__(self, kernel: DeviceKernel, mem: dict[Buffer, np.ndarray], sizes: Optional[dict] = None):
        k = kernel
        self.kernel = k
        sizes = sizes or {}
        self.sizes = [sizes[v] for v in k.sizes]
        self.nt = k.num_threads
        self.nb = k.grid[0] * k.grid[1] * k.grid[2]
        self.n = self.nt * self.nb
        lane = self.lanes = np.arange(self.n, dtype=np.int64)
        tid, blk = lane % self.nt, lane // self.nt
        X, Y, _ = k.block
        GX, GY, _ = k.grid
        self.hw = {
            "threadIdx.x": tid % X,
            "threadIdx.y": (tid // X) % Y,
            "threadIdx.z": tid // (X * Y),
            "blockIdx.x": blk % GX,
            "blockIdx.y": (blk // GX) % GY,
            "blockIdx.z": blk // (GX * GY),
        }
        self.blk = blk
        self.warp_leader = tid % 32 == 0
        self.phase = 0
        written = {n.buffer for n in pre_order(k.body) if isinstance(n, BufferStore)}
        # buffer id -> [array, name, shared?, tracker or None]
        self.bufs: list[list[Any]] = []
        self.ids: dict[Buffer, int] = {}
        for b in list(k.params) + list(k.shared) + list(k.dyn_shared):
            shared = b.scope in ("shared", "shared.dyn")
            arr = np.zeros(b.alloc_size() * self.nb, b.dtype) if shared else mem[b]
            track = None
            if shared or b in written:
                track = [
                    np.full(arr.size, -1, np.int64),
                    np.zeros(arr.size, np.int64),
                    np.full(arr.size, -1, np.int64),
                    np.zeros(arr.size, np.int64),
                ]
            self.ids[b] = len(self.bufs)
            self.bufs.append([arr, b.name, shared, track, host_count(b, sizes)])
        self.at = ""  # the statement running (for messages)

    # masks ------------------------------------------------------------------------------------
    def band(self, m, c):
        """Mask ``m`` narrowed by condition ``c`` (None: all lanes; False: none)."""
        if m is False:
            return False
        if np.ndim(c) == 0:
            return m if bool(c) else False
        c = np.broadcast_to(c, (self.n,))
        return c if m is None else (m & c)

    def bandnot(self, m, c):
        if np.ndim(c) == 0:
            return False if bool(c) else m
        return self.band(m, np.logical_not(c))

    @staticmethod
    def any(m) -> bool:
        return m is None or (m is not False and bool(m.any()))

    # memory -----------------------------------------------------------------------------------
    def thread(self, lane: int) -> str:
        h = {t: int(v[lane]) for t, v in self.hw.items()}
        return (
            f"thread ({h['threadIdx.x']}, {h['threadIdx.y']}, {h['threadIdx.z']}) of block "
            f"({h['blockIdx.x']}, {h['blockIdx.y']}, {h['blockIdx.z']})"
        )

    def _keys(self, bid: int, flat, m, what: str):
        """(keys into the buffer's array, lanes) of the active lanes, flattened; bounds
        checked. ``flat``: one index per lane, or rows of them (shape (..., lanes))."""
        arr, name, shared, _, size = self.bufs[bid]
        flat = np.asarray(flat, dtype=np.int64)
        shape = flat.shape if flat.ndim and flat.shape[-1] == self.n else (self.n,)
        flat = np.broadcast_to(flat, shape)
        lanes = np.broadcast_to(self.lanes, shape)
        if m is not None:
            flat, lanes = flat[..., m], lanes[..., m]
        flat, lanes = flat.reshape(-1), lanes.reshape(-1)
        if flat.size:
            bad = (flat < 0) | (flat >= size)
            if bad.any():
                i = int(np.argmax(bad))
                raise IndexError(
                    f"cuda-emulate: {what} {name}[{int(flat[i])}] is out of bounds "
                    f"(size {size}) in {self.thread(int(lanes[i]))}, at "
                    f"{self.at}"
                )
        keys = flat * self.nb + self.blk[lanes] if shared else flat
        return keys, lanes, shape

    def ld(self, bid: int, flat, m):
        arr, name, shared, track, _ = self.bufs[bid]
        if m is False:
            return np.zeros((), arr.dtype)
        if track is None and not shared:
            if np.ndim(flat) == 0:
                if not 0 <= int(flat) < arr.size:
                    self._keys(bid, flat, m, "load")  # raises with the message
                return arr[int(flat)]
            if m is None:
                self._keys(bid, flat, m, "load")
                return arr[flat]
        keys, lanes, shape = self._keys(bid, flat, m, "load")
        if track is not None and keys.size:
            writer, wphase, reader, rphase = track
            w = writer[keys]
            bad = (
                (w >= 0) & (w != lanes) & ((wphase[keys] == self.phase) | (w // self.nt != lanes // self.nt))
            )
            if bad.any():
                i = int(np.argmax(bad))
                self.race(bid, keys[i], int(w[i]), int(lanes[i]), "wrote", "reads")
            reader[keys] = lanes
            rphase[keys] = self.phase
        if m is None:
            return arr[keys].reshape(shape)
        out = np.zeros(shape, arr.dtype)
        out[..., m] = arr[keys].reshape(shape[:-1] + (-1,))
        return out

    def st(self, bid: int, flat, value, m) -> None:
        if m is False:
            return
        arr, name, shared, track, _ = self.bufs[bid]
        keys, lanes, shape = self._keys(bid, flat, m, "store to")
        if not keys.size:
            return
        value = np.broadcast_to(np.asarray(value), shape)
        value = (value if m is None else value[..., m]).reshape(-1)
        if track is not None:
            writer, wphase, reader, rphase = track
            order = np.argsort(keys, kind="stable")
            dup = np.nonzero(keys[order][1:] == keys[order][:-1])[0]
            if dup.size:
                a, b = order[dup[0]], order[dup[0] + 1]
                self.race(bid, keys[a], int(lanes[a]), int(lanes[b]), "writes", "writes")
            for arr_, ph, verb in ((writer, wphase, "wrote"), (reader, rphase, "read")):
                w = arr_[keys]
                bad = (
                    (w >= 0) & (w != lanes) & ((ph[keys] == self.phase) | (w // self.nt != lanes // self.nt))
                )
                if bad.any():
                    i = int(np.argmax(bad))
                    self.race(bid, keys[i], int(w[i]), int(lanes[i]), verb, "writes")
            writer[keys] = lanes
            wphase[keys] = self.phase
        arr[keys] = value

    def race(self, bid: int, key: int, first: int, second: int, did: str, does: str) -> None:
        name, shared = self.bufs[bid][1], self.bufs[bid][2]
        elem = key // self.nb if shared else key
        raise GPURaceError(
            f"cuda-emulate: race on {'shared' if shared else 'global'} buffer {name}[{elem}] "
            f"(flat index) in kernel {self.kernel.name}: {self.thread(first)} {did} it and "
            f"{self.thread(second)} {does} it with no __syncthreads() in between, at "
            f"{self.at}"
        )

    # thread-private memory ---------------------------------------------------------------------
    def alloc(self, size: int, dtype: str) -> np.ndarray:
        return np.zeros((size, self.n), dtype)

    def ldl(self, arr: np.ndarray, flat, m):
        if np.ndim(flat) == 0:
            return arr[int(flat)]
        flat = np.where(m, flat, 0) if m is not None and m is not False else flat
        return arr[flat, self.lanes]

    def stl(self, arr: np.ndarray, flat, value, m) -> None:
        if m is False:
            return
        if m is None and np.ndim(flat) == 0:
            arr[int(flat)] = value
            return
        flat = np.broadcast_to(np.asarray(flat, dtype=np.int64), (self.n,))
        value = np.broadcast_to(np.asarray(value), (self.n,))
        if m is None:
            arr[flat, self.lanes] = value
        else:
            arr[flat[m], self.lanes[m]] = value[m]

    # synchronization ---------------------------------------------------------------------------
    def uniform_in_blocks(self, m, what: str) -> None:
        if m is None:
            return
        rows = (
            np.broadcast_to(m, (self.n,)).reshape(self.nb, self.nt)
            if m is not False
            else np.zeros((self.nb, self.nt), bool)
        )
        split = rows.any(axis=1) & ~rows.all(axis=1)
        if split.any():
            b = int(np.argmax(split))
            lane_on = b * self.nt + int(np.argmax(rows[b]))
            lane_off = b * self.nt + int(np.argmin(rows[b]))
            raise GPURaceError(
                f"cuda-emulate: {what} in kernel {self.kernel.name} is reached "
                f"by {self.thread(lane_on)} but not by {self.thread(lane_off)} "
                f"(it is under a condition that splits the block), at "
                f"{self.at}"
            )

    def barrier(self, m) -> None:
        self.uniform_in_blocks(m, "__syncthreads()")
        self.phase += 1

    def allreduce(self, acc: np.ndarray, op: str, tag: str, m) -> None:
        self.uniform_in_blocks(m, f"the cross-thread reduction over {tag}")
        X, Y, Z = self.kernel.block
        axis = {"threadIdx.x": 3, "threadIdx.y": 2, "threadIdx.z": 1}[tag]
        v = acc[0].reshape(self.nb, Z, Y, X)
        r = _OPS[op].reduce(v, axis=axis, keepdims=True)
        acc[0] = np.broadcast_to(r, v.shape).reshape(-1)
        self.phase += 1  # the reduction synchronizes the block

    # tensor-core tiles --------------------------------------------------------------------------
    @staticmethod
    def offsets(coefs: list, sizes: list) -> np.ndarray:
        """The flat offsets of a tile over the loop grid (one axis per loop)."""
        out = np.zeros(sizes, np.int64)
        for axis, (c, n) in enumerate(zip(coefs, sizes)):
            shape = [1] * len(sizes)
            shape[axis] = n
            out = out + c * np.arange(n, dtype=np.int64).reshape(shape)
        return out

    @staticmethod
    def varying(off: np.ndarray) -> np.ndarray:
        """``off`` with the grid axes it does not vary along cut to length 1."""
        return off[
            tuple(slice(None) if np.ptp(off, axis=ax).any() else slice(0, 1) for ax in range(off.ndim))
        ]

    def tile_load(self, spec, m) -> np.ndarray:
        """The tile ``spec`` names, for every lane: shape (*grid, lanes), axes the tile does
        not vary along of length 1."""
        where, private, base, off = spec
        off = self.varying(off)
        idx = off[..., None] + np.asarray(base, dtype=np.int64)
        if private:
            return where[idx, self.lanes]
        return self.ld(where, np.broadcast_to(idx, off.shape + (self.n,)), m)

    def tile_store(self, spec, value: np.ndarray, m) -> None:
        where, private, base, off = spec
        if m is False:
            return
        off = self.varying(off)
        idx = np.broadcast_to(off[..., None] + np.asarray(base, dtype=np.int64), off.shape + (self.n,))
        value = np.broadcast_to(value, off.shape + (self.n,))
        if private:
            if m is None:
                where[idx, self.lanes] = value
            else:
                where[idx[..., m], self.lanes[m]] = value[..., m]
            return
        self.st(where, idx, value, m)

    def tile_copy(self, dst, src, m, leader, const=None) -> None:
        """wmma load / store / fill: the whole tile at once (memory written by the warp's
        first lane, fragments by every lane: each holds the warp's fragment)."""
        value = self.tile_load(src, m) if src is not None else const
        self.tile_store(dst, value, m if dst[1] else leader)

    def tile_mma(self, c, a, b, m) -> None:
        """wmma mma_sync: C[i, j] += sum_k A * B in float32, the loops (i, j, k) being the grid
        axes; an operand's axes are those its offsets vary along."""
        tiles = [self.tile_load(x, m) for x in (c, a, b)]
        axes = [tuple(ax for ax in range(c[3].ndim) if np.ptp(x[3], axis=ax).any()) for x in (c, a, b)]
        letters = "ijklmn"
        terms = []
        for tile, ax in zip(tiles[1:], axes[1:]):
            squeezed = tile[tuple(slice(None) if i in ax else 0 for i in range(tile.ndim - 1))]
            terms.append((squeezed.astype(np.float32), "".join(letters[i] for i in ax) + "z"))
        out_axes = "".join(letters[i] for i in axes[0]) + "z"
        prod = np.einsum(f"{terms[0][1]},{terms[1][1]}->{out_axes}", terms[0][0], terms[1][0])
        acc = tiles[0][tuple(slice(None) if i in axes[0] else 0 for i in range(tiles[0].ndim - 1))]
        full = (acc + prod).astype(tiles[0].dtype)
        shape = [c[3].shape[i] if i in axes[0] else 1 for i in range(c[3].ndim)] + [self.n]
        self.tile_store(c, full.reshape(shape), m)

    @staticmethod
    def range(lo, ext, name: str):
        if np.ndim(lo) or np.ndim(ext):
            raise BuildError(
                f"cuda-emulate: loop {name} has a trip count that differs between "
                f"threads; the emulator needs uniform loops"
            )
        lo = int(lo)
        return range(lo, lo + int(ext))

    @staticmethod
    def cast(x, dtype: str):
        return np.asarray(x).astype(dtype)

    @staticmethod
    def where(c, a, b):
        return np.where(c, a, b)

    @staticmethod
    def truncdiv(a, b):
        q = np.floor_divide(a, b)
        return q + ((np.remainder(a, b) != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0)))


def _rsqrt(x):
    return 1 / np.sqrt(x)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _round(x):
    return np.trunc(x + np.copysign(0.5, x))


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(np.asarray(x).dtype)


# ------------------------------------------------------------------------------------------
# code generation


class _EmulatedKernel(SourceWriter, PyExprPrinter):
    TARGET = "cuda-emulate"
    FULL_PARENS = True
    BINOPS = {t: op for t, op in BINOPS.items() if t not in (E.And, E.Or)}
    MIN_MAX = {E.Min: "np.minimum", E.Max: "np.maximum"}
    TRUNCDIV = "S.truncdiv"
    CALLS = {
        "exp": "np.exp",
        "log": "np.log",
        "sqrt": "np.sqrt",
        "tanh": "np.tanh",
        "fabs": "np.abs",
        "abs": "np.abs",
        "pow": "np.power",
        "floor": "np.floor",
        "ceil": "np.ceil",
        "sin": "np.sin",
        "cos": "np.cos",
        "rsqrt": "_rsqrt",
        "sigmoid": "_sigmoid",
        "round": "_round",
        "erf": "_erf",
    }

    def __init__(self, kernel: DeviceKernel):
        SourceWriter.__init__(self)
        PyExprPrinter.__init__(self)
        self._dispatch[E.And] = self.and_
        self._dispatch[E.Or] = self.or_
        self.mask = "None"  # the lanes the expression being printed runs in
        self.kernel = kernel
        self.names: dict[Buffer, str] = {}
        self.ids: dict[Buffer, int] = {}
        self.ranges: dict[E.Var, Range] = {HW[t]: Range.from_extent(kernel.extent(t)) for t in HW}
        self.n = 0
        self.warp_store: Optional[str] = None  # the mask of stores inside a wmma operation
        for i, b in enumerate(list(kernel.params) + list(kernel.shared) + list(kernel.dyn_shared)):
            self.ids[b] = i
        self.source = self.generate()
        namespace: dict[str, Any] = {
            "np": np,
            "_rsqrt": _rsqrt,
            "_sigmoid": _sigmoid,
            "_round": _round,
            "_erf": _erf,
            "math": math,
            "inf": math.inf,
            "nan": math.nan,
        }
        exec(compile(self.source, f"<cuda-emulate {kernel.name}>", "exec"), namespace)  # noqa
        self.fn: Callable[[_State], None] = namespace[kernel.name]

    def run(self, mem: dict[Buffer, np.ndarray], sizes: Optional[dict] = None) -> None:
        with np.errstate(all="ignore"):  # IEEE results (inf, nan) as the GPU computes them
            self.fn(_State(self.kernel, mem, sizes))

    def fresh(self, name: str) -> str:
        # numbered, not looked up: every name of the kernel is a local of one function
        self.n += 1
        return f"{re.sub(r'[^0-9A-Za-z_]', '_', name)}_{self.n}"

    def generate(self) -> str:
        k = self.kernel
        self.emit(0, f"def {k.name}(S):")
        lanes = k.num_threads * k.grid[0] * k.grid[1] * k.grid[2]
        self.emit(1, f"# grid {k.grid}, block {k.block}: {lanes} lanes")
        for tag, var in HW.items():
            name = tag.replace(".", "_")
            self.vars[var] = name
            self.emit(1, f"{name} = S.hw[{tag!r}]")
        for i, v in enumerate(k.sizes):  # size variables, as the kernel's scalar parameters
            self.vars[v] = self.fresh(v.name)
            self.emit(1, f"{self.vars[v]} = S.sizes[{i}]")
        self.stmt(k.body, 1, "None")
        self.emit(1, "return None")
        return "\n".join(self.lines) + "\n"

    # statements -------------------------------------------------------------------------------
    def stmt(self, s: Stmt, d: int, m: str) -> None:
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.stmt(x, d, m)
        elif isinstance(s, For):
            var = self.fresh(s.loop_var.name)
            self.vars[s.loop_var] = var
            self.ranges[s.loop_var] = Range(s.min, s.extent)
            self.emit(
                d,
                f"for {var} in S.range({self.value(s.min, m)}, {self.value(s.extent, m)},"
                f" {s.loop_var.name!r}):",
            )
            n = len(self.lines)
            self.stmt(s.body, d + 1, m)
            if len(self.lines) == n:
                self.emit(d + 1, "pass")
            del self.ranges[s.loop_var]
        elif isinstance(s, BufferStore):
            self.emit(d, f"S.at = {_describe(s)!r}")
            value = self.value(s.value, m)
            flat = self.flat(s.buffer, s.indices, m)
            if s.buffer.scope in PRIVATE_SCOPES:
                self.emit(d, f"S.stl({self.names[s.buffer]}, {flat}, {value}, {m})")
            else:
                mask = self.warp_store or m
                self.emit(d, f"S.st({self.buffer_id(s.buffer)}, {flat}, {value}, {mask})")
        elif isinstance(s, IfThenElse):
            c, m1 = self.fresh("c"), self.fresh("m")
            self.emit(d, f"{c} = {self.value(s.condition, m)}")
            self.emit(d, f"{m1} = S.band({m}, {c})")
            self.emit(d, f"if S.any({m1}):")
            n = len(self.lines)
            self.stmt(s.then_case, d + 1, m1)
            if len(self.lines) == n:
                self.emit(d + 1, "pass")
            if s.else_case is not None:
                m2 = self.fresh("m")
                self.emit(d, f"{m2} = S.bandnot({m}, {c})")
                self.emit(d, f"if S.any({m2}):")
                n = len(self.lines)
                self.stmt(s.else_case, d + 1, m2)
                if len(self.lines) == n:
                    self.emit(d + 1, "pass")
        elif isinstance(s, Allocate):
            b = s.buffer
            self.names[b] = self.fresh(b.name)
            self.emit(d, f"{self.names[b]} = S.alloc({b.alloc_size()}, {b.dtype!r})  # {b.scope}")
            self.stmt(s.body, d, m)
        elif isinstance(s, Barrier):
            self.emit(d, "S.at = '__syncthreads()'")
            self.emit(d, f"S.barrier({m})")
        elif isinstance(s, AllReduce):
            self.emit(d, f"S.allreduce({self.names[s.acc]}, {s.op!r}, {s.tag!r}, {m})")
        elif isinstance(s, Wmma):
            # a warp-wide operation: every lane computes the fragments (its own copy), the
            # first lane of the warp stores to memory
            leader = self.fresh("m")
            self.emit(d, f"{leader} = S.band({m}, S.warp_leader)")
            if not self.wmma_tiles(s, d, m, leader):  # (the loop nest, element by element)
                self.warp_store = leader
                self.stmt(s.loop, d, m)
                self.warp_store = None
        elif isinstance(s, Evaluate):
            pass
        else:
            raise BuildError(f"cuda-emulate: cannot run statement {type(s).__name__}")

    def wmma_tiles(self, s: Wmma, d: int, m: str, leader: str) -> bool:
        """Emit ``s`` as whole-tile numpy operations (gathers and an einsum over the lanes)
        when its nest is a perfect one of affine accesses; False: not emitted."""
        try:
            loops, store = perfect_nest(s.loop)
        except BuildError:
            return False
        vars_ = [f.loop_var for f in loops]
        if any(not E.is_const(f.min, 0) or not isinstance(f.extent, E.IntImm) for f in loops):
            return False
        sizes = [cast(E.IntImm, f.extent).value for f in loops]  # checked just above

        def spec(buf: Buffer, indices) -> Any:
            """'(array or id, private?, base, offsets)' text, or None if not affine."""
            flat = flat_index(buf, indices)
            zero = {v: E.IntImm(0) for v in vars_}
            base = simplify(substitute(flat, zero), self.ranges)
            coefs = []
            for v in vars_:
                c = simplify(E.Sub(substitute(flat, {**zero, v: E.IntImm(1)}), base), self.ranges)
                if not isinstance(c, E.IntImm):
                    return None
                coefs.append(c.value)
            rest = flat
            for v, coef in zip(vars_, coefs):
                rest = E.Sub(rest, E.Mul(v, E.IntImm(coef)))
            if not E.is_const(simplify(E.Sub(rest, base), self.ranges), 0):
                return None
            private = buf.scope in PRIVATE_SCOPES
            where = self.names[buf] if private else str(self.buffer_id(buf))
            return f"({where}, {private}, {self.value(base, m)}, S.offsets({coefs}, {sizes}))"

        dst = spec(store.buffer, store.indices)
        if dst is None:
            return False
        value = store.value
        if s.op == "mma_sync":
            loads = [n for n in pre_order(value) if isinstance(n, E.BufferLoad)]
            a = next((n for n in loads if n.buffer.scope == "wmma.matrix_a"), None)
            b = next((n for n in loads if n.buffer.scope == "wmma.matrix_b"), None)
            if a is None or b is None:
                return False
            specs = [spec(a.buffer, a.indices), spec(b.buffer, b.indices)]
            if None in specs:
                return False
            self.emit(d, f"S.at = {('wmma mma_sync ' + _describe(store))!r}")
            self.emit(d, f"S.tile_mma({dst}, {specs[0]}, {specs[1]}, {m})")
            return True
        if isinstance(value, E.BufferLoad):
            src = spec(value.buffer, value.indices)
            if src is None:
                return False
            self.emit(d, f"S.at = {('wmma ' + s.op + ' ' + _describe(store))!r}")
            self.emit(d, f"S.tile_copy({dst}, {src}, {m}, {leader})")
            return True
        if isinstance(value, (E.FloatImm, E.IntImm)):
            self.emit(d, f"S.tile_copy({dst}, None, {m}, {leader}, {self.value(value, m)})")
            return True
        return False

    def buffer_id(self, b: Buffer) -> int:
        if b not in self.ids:
            raise BuildError(
                f"cuda-emulate: buffer {b.name} is neither a parameter nor "
                f"allocated in kernel {self.kernel.name}"
            )
        return self.ids[b]

    def flat(self, buf: Buffer, indices, m: str) -> str:
        return self.value(simplify(flat_index(buf, indices), self.ranges), m)

    # expressions (the rules this target does not share with the python target) -----------------
    def value(self, e: E.Expr, m: str) -> str:
        """``e`` evaluated for the lanes of mask ``m``."""
        outer, self.mask = self.mask, m
        try:
            return self.text(e)
        finally:
            self.mask = outer

    def float_imm(self, f: E.FloatImm) -> tuple[str, int]:
        v = f.value
        text = "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(float(v))
        return f"np.{dtype_info(f.dtype).numpy}({text})", P_ATOM

    def load(self, ld: E.BufferLoad) -> tuple[str, int]:
        m = self.mask
        flat = self.flat(ld.buffer, ld.indices, m)
        if ld.buffer.scope in PRIVATE_SCOPES:
            return f"S.ldl({self.names[ld.buffer]}, {flat}, {m})", P_ATOM
        return f"S.ld({self.buffer_id(ld.buffer)}, {flat}, {m})", P_ATOM

    def and_(self, e: E.And) -> tuple[str, int]:
        c = self.fresh("c")  # the right side runs only in the lanes where the left holds
        left = self.text(e.a)
        return f"np.logical_and({c} := {left}, {self.value(e.b, f'S.band({self.mask}, {c})')})", P_ATOM

    def or_(self, e: E.Or) -> tuple[str, int]:
        return f"np.logical_or({self.text(e.a)}, {self.text(e.b)})", P_ATOM

    def not_(self, e: E.Not) -> tuple[str, int]:
        return f"np.logical_not({self.text(e.a)})", P_ATOM

    def select(self, e: E.Select) -> tuple[str, int]:
        m, c = self.mask, self.fresh("c")
        return (
            f"S.where({c} := {self.text(e.condition)}, "
            f"{self.value(e.true_value, f'S.band({m}, {c})')}, "
            f"{self.value(e.false_value, f'S.bandnot({m}, {c})')})"
        ), P_ATOM

    def cast(self, e: E.Cast) -> tuple[str, int]:
        return f"S.cast({self.text(e.value)}, {e.dtype!r})", P_ATOM


def _describe(s: BufferStore) -> str:
    text = str(s).strip().splitlines()[0]
    return text if len(text) < 160 else text[:157] + "..."
