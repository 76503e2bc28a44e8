"""CUDA C from the device form (:mod:`.device`): one ``extern "C" __global__`` function per kernel.

* indices are flattened with ``Buffer.strides()`` and computed in ``int``; ``//`` and ``%``
  become C's ``/`` and ``%`` where the dividend is provably non-negative, else floor helpers;
* ``unrolled`` (and ``vthread``) loops get ``#pragma unroll``; a ``vectorized`` loop of 2 or 4
  copying contiguous, provably aligned float32 elements becomes one ``float2`` / ``float4``
  load and store, any other vectorized loop an unrolled one;
* shared buffers are ``__shared__`` arrays (``shared.dyn`` ones point into ``extern __shared__``
  memory), local ones per-thread arrays; every array is 16-byte aligned (vector accesses);
* :class:`~.device.AllReduce` is a butterfly of ``__shfl_xor_sync`` when it reduces over
  ``threadIdx.x`` with a power-of-two extent of at most a warp, else a tree in shared memory.
"""

from __future__ import annotations

import math
from typing import cast
from ...errors import BuildError
from ...ir import expr as E
from ...ir.arith import can_prove, simplify
from ...ir.buffer import Buffer
from ...ir.dtype import DTYPE_INFO
from ...ir.functor import pre_order, substitute
from ...ir.stmt import Allocate, BufferStore, Evaluate, For, ForKind, IfThenElse, Range, SeqStmt, Stmt
from .device import HW, AllReduce, Barrier, DeviceKernel, DeviceProgram, Wmma

#: the C spelling of each dtype (float16: ``half`` of cuda_fp16.h)
C_TYPES = {n: d.c for n, d in DTYPE_INFO.items()}

PRELUDE = """\
#include <cuda_fp16.h>

__device__ __forceinline__ int wb_floordiv(int a, int b) {
  int q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ int wb_floormod(int a, int b) {
  int r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
"""

_BINOPS = {
    E.Add: "+",
    E.Sub: "-",
    E.Mul: "*",
    E.EQ: "==",
    E.NE: "!=",
    E.LT: "<",
    E.LE: "<=",
    E.GT: ">",
    E.GE: ">=",
    E.And: "&&",
    E.Or: "||",
}

_F32_MATH = {
    "exp": "expf",
    "log": "logf",
    "sqrt": "sqrtf",
    "rsqrt": "rsqrtf",
    "tanh": "tanhf",
    "fabs": "fabsf",
    "pow": "powf",
    "erf": "erff",
    "floor": "floorf",
    "ceil": "ceilf",
    "round": "roundf",
    "sin": "sinf",
    "cos": "cosf",
    "abs": "fabsf",
}

_COMBINE = {"sum": "{a} + {b}", "prod": "{a} * {b}", "max": "max({a}, {b})", "min": "min({a}, {b})"}


WMMA_FRAGMENT = {"wmma.matrix_a": "matrix_a", "wmma.matrix_b": "matrix_b", "wmma.accumulator": "accumulator"}


def cuda_source(program: DeviceProgram) -> str:
    parts = [PRELUDE]
    if any(isinstance(n, Wmma) for k in program.kernels for n in pre_order(k.body)):
        parts.insert(0, "#include <mma.h>")
    for k in program.kernels:
        parts.append(_KernelPrinter(k).generate())
    return "\n".join(parts)


class _KernelPrinter:
    def __init__(self, kernel: DeviceKernel):
        self.k = kernel
        self.lines: list[str] = []
        self.names: dict[Buffer, str] = {}
        self.taken: set[str] = set()
        self.vars: dict[E.Var, str] = {HW[t]: f"((int){t})" for t in HW}
        self.ranges: dict[E.Var, Range] = {HW[t]: Range.from_extent(kernel.extent(t)) for t in HW}
        self.n_tmp = 0

    def fresh(self, name: str) -> str:
        import re

        base = re.sub(r"\W", "_", name) or "v"
        if base[0].isdigit():
            base = "_" + base
        out, n = base, 0
        while out in self.taken:
            n += 1
            out = f"{base}_{n}"
        self.taken.add(out)
        return out

    def emit(self, d: int, line: str) -> None:
        self.lines.append("  " * d + line)

    def generate(self) -> str:
        k = self.k
        args = []
        for b in k.params:
            self.names[b] = self.fresh(b.name)
            args.append(f"{C_TYPES[b.dtype]}* __restrict__ {self.names[b]}")
        bounds = f"__launch_bounds__({k.num_threads}) " if k.num_threads > 1 else ""
        self.emit(
            0,
            f"// launch: grid ({', '.join(map(str, k.grid))}), "
            f"block ({', '.join(map(str, k.block))})"
            + (f", {k.dyn_shared_bytes} bytes of dynamic shared memory" if k.dyn_shared else ""),
        )
        self.emit(0, f'extern "C" __global__ void {bounds}{k.name}({", ".join(args)}) {{')
        for b in k.shared:
            self.names[b] = self.fresh(b.name)
            self.emit(1, f"__shared__ __align__(16) {C_TYPES[b.dtype]} {self.names[b]}[{b.alloc_size()}];")
        if k.dyn_shared:
            self.emit(1, "extern __shared__ __align__(16) unsigned char wb_dyn_shared[];")
            for b, off in k.dyn_offsets().items():
                self.names[b] = self.fresh(b.name)
                t = C_TYPES[b.dtype]
                self.emit(1, f"{t}* {self.names[b]} = ({t}*)(wb_dyn_shared + {off});")
        self.stmt(k.body, 1)
        self.emit(0, "}")
        return "\n".join(self.lines) + "\n"

    # statements ------------------------------------------------------------------------------
    def stmt(self, s: Stmt, d: int) -> None:
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.stmt(x, d)
        elif isinstance(s, For):
            self.loop(s, d)
        elif isinstance(s, BufferStore):
            self.emit(d, f"{self.access(s.buffer, s.indices)} = {self.expr(s.value)};")
        elif isinstance(s, IfThenElse):
            self.emit(d, f"if ({self.expr(s.condition)}) {{")
            self.stmt(s.then_case, d + 1)
            if s.else_case is not None:
                self.emit(d, "} else {")
                self.stmt(s.else_case, d + 1)
            self.emit(d, "}")
        elif isinstance(s, Allocate) and s.buffer.scope in WMMA_FRAGMENT:
            self.fragment(s, d)
        elif isinstance(s, Wmma):
            self.wmma(s, d)
        elif isinstance(s, Allocate):
            b = s.buffer
            self.names[b] = self.fresh(b.name)
            self.emit(d, "{")
            self.emit(
                d + 1, f"__align__(16) {C_TYPES[b.dtype]} {self.names[b]}[{b.alloc_size()}];  // {b.scope}"
            )
            self.stmt(s.body, d + 1)
            self.emit(d, "}")
        elif isinstance(s, Barrier):
            self.emit(d, "__syncthreads();")
        elif isinstance(s, AllReduce):
            self.all_reduce(s, d)
        elif isinstance(s, Evaluate):
            if not E.is_const(s.value):
                self.emit(d, f"{self.expr(s.value)};")
        else:
            raise BuildError(f"cuda: cannot print statement {type(s).__name__}")

    def loop(self, s: For, d: int) -> None:
        if s.kind == ForKind.VECTORIZED and self.vector_copy(s, d):
            return
        var = self.fresh(s.loop_var.name)
        self.vars[s.loop_var] = var
        self.ranges[s.loop_var] = Range(s.min, s.extent)
        lo, ext = self.expr(s.min), self.expr(s.extent)
        if s.kind in (ForKind.UNROLLED, ForKind.VECTORIZED):
            self.emit(d, "#pragma unroll")
        end = ext if E.is_const(s.min, 0) else f"{lo} + {ext}"
        self.emit(d, f"for (int {var} = {lo}; {var} < {end}; ++{var}) {{")
        self.stmt(s.body, d + 1)
        self.emit(d, "}")
        del self.vars[s.loop_var], self.ranges[s.loop_var]

    def vector_copy(self, s: For, d: int) -> bool:
        """``dst[base + v] = src[base' + v]`` for v < 2 or 4, float32, both bases provably
        multiples of the width: one float2/float4 access each."""
        body, n = s.body, s.extent
        if not (
            isinstance(body, BufferStore)
            and isinstance(body.value, E.BufferLoad)
            and isinstance(n, E.IntImm)
            and n.value in (2, 4)
            and E.is_const(s.min, 0)
            and body.buffer.dtype == "float32"
            and body.value.buffer.dtype == "float32"
        ):
            return False
        v = s.loop_var
        ranges = dict(self.ranges)
        bases = []
        for buf, idx in ((body.buffer, body.indices), (body.value.buffer, body.value.indices)):
            flat = _flat(buf, idx)
            base = simplify(_subst(flat, v, 0), ranges)
            step = simplify(E.Sub(_subst(flat, v, 1), base), ranges)
            if not E.is_const(step, 1) or not can_prove(
                E.EQ(E.FloorMod(base, E.IntImm(n.value)), E.IntImm(0)), ranges
            ):
                return False
            bases.append(base)
        vt = "float4" if n.value == 4 else "float2"
        dst = f"{self.names[body.buffer]} + {self.expr(bases[0])}"
        src = f"{self.names[body.value.buffer]} + {self.expr(bases[1])}"
        self.emit(d, f"*({vt}*)({dst}) = *(const {vt}*)({src});  // vectorized {s.loop_var.name}")
        return True

    # tensor cores ----------------------------------------------------------------------------
    def fragment(self, s: Allocate, d: int) -> None:
        """``wmma::fragment<...> name[tiles]``: one fragment per 16x16 tile of the buffer."""
        b = s.buffer
        if b.ndim < 2 or b.shape[-1] % 16 or b.shape[-2] % 16:
            raise BuildError(
                f"cuda: fragment buffer {b.name} has shape {b.shape}; the last two "
                f"dimensions of a wmma buffer must be multiples of 16"
            )
        tiles = b.size // 256
        use = WMMA_FRAGMENT[b.scope]
        ctype = "half" if b.dtype == "float16" else C_TYPES[b.dtype]
        layouts = {
            n.layout
            for n in pre_order(s.body)
            if isinstance(n, Wmma)
            and n.op.startswith("load")
            and n.loop.body is not None
            and _innermost(n.loop)[1].buffer is b
        }
        if len(layouts) > 1:
            raise BuildError(f"cuda: fragment {b.name} is loaded both row- and column-major")
        layout = (
            "" if use == "accumulator" else f", nvcuda::wmma::{layouts.pop() if layouts else 'row_major'}"
        )
        self.names[b] = self.fresh(b.name)
        self.emit(d, "{")
        self.emit(
            d + 1,
            f"nvcuda::wmma::fragment<nvcuda::wmma::{use}, 16, 16, 16, {ctype}"
            f"{layout}> {self.names[b]}[{tiles}];",
        )
        self.stmt(s.body, d + 1)
        self.emit(d, "}")

    def wmma(self, s: Wmma, d: int) -> None:
        loops, store = _innermost(s.loop)
        zero = {f.loop_var: E.IntImm(0) for f in loops}
        wm = "nvcuda::wmma::"

        def tile(buf: Buffer, indices) -> str:
            if buf.scope not in WMMA_FRAGMENT:
                raise BuildError(f"cuda: wmma {s.op} expects a fragment, got {buf.name} ({buf.scope})")
            idx = [simplify(substitute(i, zero), self.ranges) for i in indices]
            tiles_c = buf.shape[-1] // 16
            lead: E.Expr = E.IntImm(0)
            for i, n in zip(idx[:-2], buf.shape[:-2]):
                lead = lead * n + i
            t = (
                lead * ((buf.shape[-2] // 16) * tiles_c)
                + E.FloorDiv(idx[-2], E.IntImm(16)) * tiles_c
                + E.FloorDiv(idx[-1], E.IntImm(16))
            )
            return f"{self.names[buf]}[{self.expr(simplify(t, self.ranges))}]"

        def memory(buf: Buffer, indices) -> tuple[str, str]:
            flat = _flat(buf, indices)
            base = simplify(substitute(flat, zero), self.ranges)
            rows = simplify(
                E.Sub(substitute(flat, {**zero, loops[0].loop_var: E.IntImm(1)}), base), self.ranges
            )
            cols = simplify(
                E.Sub(substitute(flat, {**zero, loops[1].loop_var: E.IntImm(1)}), base), self.ranges
            )
            if not E.is_const(cols, 1) or not isinstance(rows, E.IntImm):
                raise BuildError(
                    f"cuda: wmma {s.op} on {buf.name}: the tile's rows must be "
                    f"{buf.name}'s rows and its columns contiguous (strides "
                    f"{rows}, {cols})"
                )
            return f"{self.names[buf]} + {self.expr(base)}", str(rows.value)

        if s.op == "fill":
            self.emit(d, f"{wm}fill_fragment({tile(store.buffer, store.indices)}, {self.expr(store.value)});")
        elif s.op in ("load_matrix_a", "load_matrix_b"):
            src = store.value
            if not isinstance(src, E.BufferLoad):
                raise BuildError(f"cuda: wmma {s.op} must copy a tile, got {store}")
            ptr, ldm = memory(src.buffer, src.indices)
            self.emit(d, f"{wm}load_matrix_sync({tile(store.buffer, store.indices)}, {ptr}, {ldm});")
        elif s.op == "store":
            src = cast(E.BufferLoad, store.value)  # a wmma store copies a fragment tile
            ptr, ldm = memory(store.buffer, store.indices)
            self.emit(
                d, f"{wm}store_matrix_sync({ptr}, {tile(src.buffer, src.indices)}, {ldm}, {wm}mem_row_major);"
            )
        elif s.op == "mma_sync":
            loads = {n.buffer.scope: n for n in pre_order(store.value) if isinstance(n, E.BufferLoad)}
            a, b = loads.get("wmma.matrix_a"), loads.get("wmma.matrix_b")
            if a is None or b is None:
                raise BuildError(f"cuda: wmma mma_sync needs matrix_a and matrix_b fragments, got {store}")
            c = tile(store.buffer, store.indices)
            self.emit(d, f"{wm}mma_sync({c}, {tile(a.buffer, a.indices)}, {tile(b.buffer, b.indices)}, {c});")
        else:
            raise BuildError(f"cuda: unknown wmma operation {s.op!r}")

    def all_reduce(self, s: AllReduce, d: int) -> None:
        k = self.k
        acc = f"{self.names[s.acc]}[0]"
        axis = "xyz".index(s.tag[-1])
        n = k.block[axis]
        if n == 1:
            return
        t = C_TYPES[s.acc.dtype]
        comb = _COMBINE[s.op]
        if s.tag == "threadIdx.x" and n <= 32 and n & (n - 1) == 0:
            total = k.num_threads
            mask = "0xffffffffu" if total >= 32 else f"{hex((1 << total) - 1)}u"
            self.emit(d, f"// all-reduce ({s.op}) over {s.tag}: warp shuffles")
            self.emit(d, f"for (int wb_off = {n // 2}; wb_off > 0; wb_off >>= 1) {{")
            other = f"__shfl_xor_sync({mask}, {acc}, wb_off, 32)"
            self.emit(d + 1, f"{acc} = {comb.format(a=acc, b=other)};")
            self.emit(d, "}")
            return
        # shared-memory tree: the group of a thread is its siblings along the axis
        buf = self.fresh("wb_red_buf")
        stride = [1, k.block[0], k.block[0] * k.block[1]][axis]
        tid = (
            f"((int)threadIdx.x + (int)threadIdx.y * {k.block[0]} + (int)threadIdx.z * "
            f"{k.block[0] * k.block[1]})"
        )
        me = f"((int){s.tag})"
        p = 1 << max(n - 1, 0).bit_length()
        self.emit(d, f"// all-reduce ({s.op}) over {s.tag}: a tree in shared memory")
        self.emit(d, "{")
        self.emit(d + 1, f"__shared__ {t} {buf}[{k.num_threads}];")
        self.emit(d + 1, f"{buf}[{tid}] = {acc};")
        self.emit(d + 1, "__syncthreads();")
        self.emit(d + 1, f"for (int wb_s = {p // 2}; wb_s > 0; wb_s >>= 1) {{")
        mine, other = f"{buf}[{tid}]", f"{buf}[{tid} + wb_s * {stride}]"
        self.emit(d + 2, f"if ({me} < wb_s && {me} + wb_s < {n}) {mine} = {comb.format(a=mine, b=other)};")
        self.emit(d + 2, "__syncthreads();")
        self.emit(d + 1, "}")
        self.emit(d + 1, f"{acc} = {buf}[{tid} - {me} * {stride}];")
        self.emit(d + 1, "__syncthreads();")
        self.emit(d, "}")

    # expressions -----------------------------------------------------------------------------
    def access(self, buf: Buffer, indices) -> str:
        if buf not in self.names:
            raise BuildError(
                f"cuda: buffer {buf.name} is neither a kernel parameter nor allocated in kernel {self.k.name}"
            )
        return f"{self.names[buf]}[{self.expr(simplify(_flat(buf, indices), self.ranges))}]"

    def expr(self, e: E.Expr) -> str:
        t = type(e)
        if t is E.Var:
            v = cast(E.Var, e)
            if v not in self.vars:
                raise BuildError(f"cuda: variable {v.name} is not bound in kernel {self.k.name}")
            return self.vars[v]
        if t is E.IntImm:
            i = cast(E.IntImm, e)
            if i.dtype == "bool":
                return "true" if i.value else "false"
            suffix = {"int64": "LL", "uint64": "ULL", "uint32": "u"}.get(i.dtype, "")
            text = f"{i.value}{suffix}"
            return f"({text})" if i.value < 0 else text
        if t is E.FloatImm:
            return _float_literal(cast(E.FloatImm, e).value, e.dtype)
        if t is E.BufferLoad:
            ld = cast(E.BufferLoad, e)
            return self.access(ld.buffer, ld.indices)
        if t in _BINOPS:
            op = cast(E.BinaryOp, e)
            return f"({self.expr(op.a)} {_BINOPS[t]} {self.expr(op.b)})"
        if t in (E.FloorDiv, E.FloorMod):
            op = cast(E.BinaryOp, e)
            a, b = self.expr(op.a), self.expr(op.b)
            if E.is_int(e.dtype) and not (
                isinstance(op.b, E.IntImm)
                and op.b.value > 0
                and can_prove(E.GE(op.a, E.IntImm(0, op.a.dtype)), self.ranges)
            ):
                fn = "wb_floordiv" if t is E.FloorDiv else "wb_floormod"
                return f"{fn}({a}, {b})"
            if E.is_float(e.dtype):  # floor semantics: a - floor(a / b) * b for the modulus
                fl = "floor" if e.dtype == "float64" else "floorf"
                return f"{fl}({a} / {b})" if t is E.FloorDiv else f"({a} - {fl}({a} / {b}) * {b})"
            return f"({a} {'/' if t is E.FloorDiv else '%'} {b})"
        if t is E.Div:
            op = cast(E.BinaryOp, e)
            return f"({self.expr(op.a)} / {self.expr(op.b)})"
        if t in (E.Min, E.Max):
            op = cast(E.BinaryOp, e)
            fn = "min" if t is E.Min else "max"
            if e.dtype == "float16":
                return f"__float2half({fn}(__half2float({self.expr(op.a)}), __half2float({self.expr(op.b)})))"
            return f"{fn}({self.expr(op.a)}, {self.expr(op.b)})"
        if t is E.Not:
            return f"(!{self.expr(cast(E.Not, e).a)})"
        if t is E.Select:
            sel = cast(E.Select, e)
            return (
                f"({self.expr(sel.condition)} ? {self.expr(sel.true_value)} : {self.expr(sel.false_value)})"
            )
        if t is E.Cast:
            c = cast(E.Cast, e)
            inner = self.expr(c.value)
            if c.dtype == "float16":
                return f"__float2half((float)({inner}))"
            if c.value.dtype == "float16":
                return f"(({C_TYPES[c.dtype]})__half2float({inner}))"
            return f"(({C_TYPES[c.dtype]})({inner}))"
        if t is E.Call:
            return self.call(cast(E.Call, e))
        raise BuildError(f"cuda: unsupported expression {t.__name__}")

    def call(self, e: E.Call) -> str:
        args = [self.expr(a) for a in e.args]
        dtype = e.dtype
        if E.is_int(dtype) and e.op == "abs":
            return f"abs({args[0]})"
        if dtype == "float16":  # computed in float32, as CUDA's half math does
            args = [f"__half2float({a})" for a in args]
        if e.op == "sigmoid":
            one = "1.0" if dtype == "float64" else "1.0f"
            ex = "exp" if dtype == "float64" else "expf"
            out = f"({one} / ({one} + {ex}(-({args[0]}))))"
        elif dtype == "float64":
            out = f"{'fabs' if e.op == 'abs' else e.op}({', '.join(args)})"
            if e.op == "rsqrt":
                out = f"rsqrt({args[0]})"
        else:
            out = f"{_F32_MATH[e.op]}({', '.join(args)})"
        return f"__float2half({out})" if dtype == "float16" else out


def _innermost(f: For) -> tuple[list[For], BufferStore]:
    """The loops of a perfect nest and the one store inside."""
    loops = [f]
    while isinstance(loops[-1].body, For):
        loops.append(loops[-1].body)
    body = loops[-1].body
    if not isinstance(body, BufferStore):
        raise BuildError(f"cuda: a wmma loop nest must hold one store, got {body}")
    return loops, body


def _flat(buf: Buffer, indices) -> E.Expr:
    flat: E.Expr = E.IntImm(0)
    for idx, stride in zip(indices, buf.strides()):
        flat = flat + idx * stride
    return flat


def _subst(e: E.Expr, v: E.Var, value: int) -> E.Expr:
    return substitute(e, {v: E.IntImm(value)})


def _float_literal(v: float, dtype: str) -> str:
    if dtype == "float64":
        if math.isnan(v):
            return "__longlong_as_double(0x7ff8000000000000LL)"
        if math.isinf(v):
            return ("" if v > 0 else "-") + "__longlong_as_double(0x7ff0000000000000LL)"
        return repr(float(v))
    if math.isnan(v):
        text = "__int_as_float(0x7fc00000)"
    elif math.isinf(v):
        text = ("" if v > 0 else "-") + "__int_as_float(0x7f800000)"
    else:
        text = f"{float(v)!r}f"
        if "e" in text or "inf" in text:
            text = f"{float(v):.9e}f"
    text = f"({text})" if text.startswith("-") else text
    return f"__float2half({text})" if dtype == "float16" else text
