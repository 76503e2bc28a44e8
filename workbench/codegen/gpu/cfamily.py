"""GPU kernels as C-family source: one printer, a table per language (CUDA C, OpenCL C ...).

The device form (:mod:`.device`) is printed the same way in every C-family GPU language: the
statements, expressions and loops are C's, and what differs — type names, the hardware indices,
the barrier, memory-space qualifiers, literal spellings, math function names, warp shuffles —
is a :class:`CLanguage` table. A language with more than the table can say (CUDA's tensor
cores) subclasses :class:`KernelPrinter` for those statements only.

* indices are flattened with ``Buffer.strides()`` and computed in ``int``; ``//`` and ``%``
  become C's ``/`` and ``%`` where the dividend is provably non-negative, else floor helpers;
* ``unrolled`` (and ``vthread``) loops get the language's unroll pragma; a ``vectorized`` loop
  of 2 or 4 copying contiguous, provably aligned float32 elements becomes one 2- or 4-wide
  load and store, any other vectorized loop an unrolled one;
* shared buffers are shared-memory arrays (``shared.dyn`` ones point into the dynamic shared
  memory, where the language has it), local ones per-thread arrays;
* :class:`~.device.AllReduce` is a butterfly of warp shuffles when the language has them and
  it reduces over ``threadIdx.x`` with a power-of-two extent of at most a warp, else a tree in
  shared memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional, cast

from ...errors import BuildError
from ...ir import expr as E
from ...ir.arith import can_prove, simplify
from ...ir.buffer import Buffer
from ...ir.functor import substitute
from ...ir.stmt import Allocate, BufferStore, Evaluate, For, ForKind, IfThenElse, Range, SeqStmt, Stmt
from ..printing import SourceWriter, flat_index
from .device import FRAGMENT_SCOPES, HW, AllReduce, Barrier, DeviceKernel, DeviceProgram, Wmma

#: the IR's floor division and modulo on ints (C's ``/`` and ``%`` truncate); {q}: qualifiers
FLOOR_HELPERS = """\
{q}int wb_floordiv(int a, int b) {{
  int q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}}
{q}int wb_floormod(int a, int b) {{
  int r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}}
"""


@dataclass(frozen=True)
class CLanguage:
    """What a C-family GPU language spells its own way. ``{...}`` fields are ``str.format``
    templates; an optional feature left ``None`` is refused with a ``BuildError`` (or, for warp
    shuffles, done another way)."""

    name: str  # prefix of error messages
    types: Mapping[str, str]  # dtype -> type name; a dtype absent is refused
    header: str  # text before the helpers (includes, pragmas)
    function_qualifiers: str  # of the helper functions
    kernel: str  # {bounds} {name} {params}
    launch_bounds: str  # {threads} {x} {y} {z}: only for more than one thread
    param: str  # {type} {name}
    shared_array: str  # {type} {name} {size}
    shared_scratch: str  # {type} {name} {size}: the all-reduce tree's array
    local_array: str  # {type} {name} {size} {scope}
    hw: Mapping[str, str]  # "threadIdx.x" ... -> the language's index
    barrier: str
    unroll: str  # the line before an unrolled loop
    vector_copy: str  # {n} {vt} (float2, float4) {dst} {src}: pointers
    int_suffix: Mapping[str, str]  # dtype -> suffix of its literals
    float_from_bits: str  # {}: a 32-bit int literal
    double_from_bits: str  # {}: a 64-bit int literal
    math_f32: Mapping[str, str]  # intrinsic -> function, float32 (and float16) arguments
    math_f64: Mapping[str, str]
    #: shared-memory arrays may be declared in a nested block (else at the kernel's top)
    nested_shared: bool = True
    dyn_shared: Optional[str] = None  # the dynamic shared memory's declaration
    dyn_shared_view: Optional[str] = None  # {type} {name} {offset}: a buffer in it
    shuffle_xor: Optional[str] = None  # {mask} {value} {offset}
    to_half: Optional[str] = None  # {}: a float
    from_half: Optional[str] = None  # {}: a half


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

_COMBINE = {"sum": "{a} + {b}", "prod": "{a} * {b}", "max": "max({a}, {b})", "min": "min({a}, {b})"}


def c_source(program: DeviceProgram, lang: CLanguage, printer: type[KernelPrinter] | None = None) -> str:
    """The source of ``program``'s kernels in ``lang``: the header and helpers, then one kernel
    function each."""
    make = printer or KernelPrinter
    parts = [lang.header + FLOOR_HELPERS.format(q=lang.function_qualifiers)]
    parts += [make(k, lang).generate() for k in program.kernels]
    return "\n".join(parts)


class KernelPrinter(SourceWriter):
    """One kernel as a function of ``lang``."""

    INDENT = "  "
    EMPTY_NAME = "v"

    def __init__(self, kernel: DeviceKernel, lang: CLanguage):
        super().__init__()
        self.k = kernel
        self.lang = lang
        self.names: dict[Buffer, str] = {}
        self.vars: dict[E.Var, str] = {HW[t]: f"({self.hw(t)})" for t in HW}
        self.ranges: dict[E.Var, Range] = {HW[t]: Range.from_extent(kernel.extent(t)) for t in HW}
        self.top = 0  # where kernel-scope declarations go

    def hw(self, tag: str) -> str:
        return f"(int){self.lang.hw[tag]}"

    def error(self, message: str) -> BuildError:
        return BuildError(f"{self.lang.name}: {message}")

    def type_name(self, dtype: str) -> str:
        t = self.lang.types.get(dtype)
        if t is None:
            raise self.error(f"kernel {self.k.name} uses {dtype}, which this language has no type for")
        return t

    def generate(self) -> str:
        k, lang = self.k, self.lang
        args = []
        for b in k.params:
            self.names[b] = self.fresh(b.name)
            args.append(lang.param.format(type=self.type_name(b.dtype), name=self.names[b]))
        for v in k.sizes:  # size variables: scalars after the buffers, in func.size_vars order
            self.vars[v] = self.fresh(v.name)
            args.append(f"{self.type_name(v.dtype)} {self.vars[v]}")
        x, y, z = k.block
        bounds = lang.launch_bounds.format(threads=k.num_threads, x=x, y=y, z=z) if k.num_threads > 1 else ""
        self.emit(
            0,
            f"// launch: grid ({', '.join(map(str, k.grid))}), "
            f"block ({', '.join(map(str, k.block))})"
            + (f", {k.dyn_shared_bytes} bytes of dynamic shared memory" if k.dyn_shared else ""),
        )
        self.emit(0, lang.kernel.format(bounds=bounds, name=k.name, params=", ".join(args)))
        for b in k.shared:
            self.names[b] = self.fresh(b.name)
            self.emit(
                1,
                lang.shared_array.format(
                    type=self.type_name(b.dtype), name=self.names[b], size=b.alloc_size()
                ),
            )
        if k.dyn_shared:
            if lang.dyn_shared is None or lang.dyn_shared_view is None:
                raise self.error(f"kernel {k.name} uses dynamic shared memory, which this language lacks")
            self.emit(1, lang.dyn_shared)
            for b, off in k.dyn_offsets().items():
                self.names[b] = self.fresh(b.name)
                t = self.type_name(b.dtype)
                self.emit(1, lang.dyn_shared_view.format(type=t, name=self.names[b], offset=off))
        self.top = len(self.lines)
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
        elif isinstance(s, Allocate) and s.buffer.scope in FRAGMENT_SCOPES:
            self.fragment(s, d)
        elif isinstance(s, Wmma):
            self.wmma(s, d)
        elif isinstance(s, Allocate):
            b = s.buffer
            if b.is_symbolic:
                raise self.error(
                    f"{b.scope} buffer {b.name} has the symbolic shape {list(b.shape)}; a per-thread "
                    f"array needs a static size"
                )
            self.names[b] = self.fresh(b.name)
            self.emit(d, "{")
            decl = self.lang.local_array.format(
                type=self.type_name(b.dtype), name=self.names[b], size=b.alloc_size(), scope=b.scope
            )
            self.emit(d + 1, decl)
            self.stmt(s.body, d + 1)
            self.emit(d, "}")
        elif isinstance(s, Barrier):
            self.emit(d, self.lang.barrier)
        elif isinstance(s, AllReduce):
            self.all_reduce(s, d)
        elif isinstance(s, Evaluate):
            if not E.is_const(s.value):
                self.emit(d, f"{self.expr(s.value)};")
        else:
            raise self.error(f"cannot print statement {type(s).__name__}")

    def loop(self, s: For, d: int) -> None:
        if s.kind == ForKind.VECTORIZED and self.vector_copy(s, d):
            return
        var = self.fresh(s.loop_var.name)
        self.vars[s.loop_var] = var
        self.ranges[s.loop_var] = Range(s.min, s.extent)
        lo, ext = self.expr(s.min), self.expr(s.extent)
        if s.kind in (ForKind.UNROLLED, ForKind.VECTORIZED):
            self.emit(d, self.lang.unroll)
        end = ext if E.is_const(s.min, 0) else f"{lo} + {ext}"
        self.emit(d, f"for (int {var} = {lo}; {var} < {end}; ++{var}) {{")
        self.stmt(s.body, d + 1)
        self.emit(d, "}")
        del self.vars[s.loop_var], self.ranges[s.loop_var]

    def vector_copy(self, s: For, d: int) -> bool:
        """``dst[base + v] = src[base' + v]`` for v < 2 or 4, float32, both bases provably
        multiples of the width: one 2- or 4-wide access each."""
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
            flat = flat_index(buf, idx)
            base = simplify(substitute(flat, {v: E.IntImm(0)}), ranges)
            step = simplify(E.Sub(substitute(flat, {v: E.IntImm(1)}), base), ranges)
            if not E.is_const(step, 1) or not can_prove(
                E.EQ(E.FloorMod(base, E.IntImm(n.value)), E.IntImm(0)), ranges
            ):
                return False
            bases.append(base)
        dst = f"{self.names[body.buffer]} + {self.expr(bases[0])}"
        src = f"{self.names[body.value.buffer]} + {self.expr(bases[1])}"
        copy = self.lang.vector_copy.format(n=n.value, vt=f"float{n.value}", dst=dst, src=src)
        self.emit(d, f"{copy}  // vectorized {s.loop_var.name}")
        return True

    # tensor cores: a language with them overrides these --------------------------------------
    def fragment(self, s: Allocate, d: int) -> None:
        raise self.error(
            f"kernel {self.k.name} uses tensor cores ({s.buffer.scope} buffer {s.buffer.name}), "
            f"which this language lacks"
        )

    def wmma(self, s: Wmma, d: int) -> None:
        raise self.error(f"kernel {self.k.name} uses tensor cores (wmma {s.op}), which this language lacks")

    # cross-thread reduction ------------------------------------------------------------------
    def all_reduce(self, s: AllReduce, d: int) -> None:
        k, lang = self.k, self.lang
        acc = f"{self.names[s.acc]}[0]"
        axis = "xyz".index(s.tag[-1])
        n = k.block[axis]
        if n == 1:
            return
        t = self.type_name(s.acc.dtype)
        comb = _COMBINE[s.op]
        if lang.shuffle_xor is not None and s.tag == "threadIdx.x" and n <= 32 and n & (n - 1) == 0:
            total = k.num_threads
            mask = "0xffffffffu" if total >= 32 else f"{hex((1 << total) - 1)}u"
            self.emit(d, f"// all-reduce ({s.op}) over {s.tag}: warp shuffles")
            self.emit(d, f"for (int wb_off = {n // 2}; wb_off > 0; wb_off >>= 1) {{")
            other = lang.shuffle_xor.format(mask=mask, value=acc, offset="wb_off")
            self.emit(d + 1, f"{acc} = {comb.format(a=acc, b=other)};")
            self.emit(d, "}")
            return
        # shared-memory tree: the group of a thread is its siblings along the axis
        buf = self.fresh("wb_red_buf")
        stride = [1, k.block[0], k.block[0] * k.block[1]][axis]
        tid = (
            f"({self.hw('threadIdx.x')} + {self.hw('threadIdx.y')} * {k.block[0]} + "
            f"{self.hw('threadIdx.z')} * {k.block[0] * k.block[1]})"
        )
        me = f"({self.hw(s.tag)})"
        p = 1 << max(n - 1, 0).bit_length()
        self.emit(d, f"// all-reduce ({s.op}) over {s.tag}: a tree in shared memory")
        self.emit(d, "{")
        decl = lang.shared_scratch.format(type=t, name=buf, size=k.num_threads)
        if lang.nested_shared:
            self.emit(d + 1, decl)
        else:
            self.lines.insert(self.top, self.INDENT + decl)
            self.top += 1
        self.emit(d + 1, f"{buf}[{tid}] = {acc};")
        self.emit(d + 1, lang.barrier)
        self.emit(d + 1, f"for (int wb_s = {p // 2}; wb_s > 0; wb_s >>= 1) {{")
        mine, other = f"{buf}[{tid}]", f"{buf}[{tid} + wb_s * {stride}]"
        self.emit(d + 2, f"if ({me} < wb_s && {me} + wb_s < {n}) {mine} = {comb.format(a=mine, b=other)};")
        self.emit(d + 2, lang.barrier)
        self.emit(d + 1, "}")
        self.emit(d + 1, f"{acc} = {buf}[{tid} - {me} * {stride}];")
        self.emit(d + 1, lang.barrier)
        self.emit(d, "}")

    # expressions -----------------------------------------------------------------------------
    def access(self, buf: Buffer, indices) -> str:
        if buf not in self.names:
            raise self.error(
                f"buffer {buf.name} is neither a kernel parameter nor allocated in kernel {self.k.name}"
            )
        return f"{self.names[buf]}[{self.expr(simplify(flat_index(buf, indices), self.ranges))}]"

    def half(self, template: Optional[str], text: str) -> str:
        if template is None:
            raise self.error(f"kernel {self.k.name} computes on float16, which this language cannot")
        return template.format(text)

    def expr(self, e: E.Expr) -> str:
        t = type(e)
        if t is E.Var:
            v = cast(E.Var, e)
            if v not in self.vars:
                raise self.error(f"variable {v.name} is not bound in kernel {self.k.name}")
            return self.vars[v]
        if t is E.IntImm:
            i = cast(E.IntImm, e)
            if i.dtype == "bool":
                return "true" if i.value else "false"
            text = f"{i.value}{self.lang.int_suffix.get(i.dtype, '')}"
            return f"({text})" if i.value < 0 else text
        if t is E.FloatImm:
            return self.float_literal(cast(E.FloatImm, e).value, e.dtype)
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
                fl = self.math(e.dtype)["floor"]
                return f"{fl}({a} / {b})" if t is E.FloorDiv else f"({a} - {fl}({a} / {b}) * {b})"
            return f"({a} {'/' if t is E.FloorDiv else '%'} {b})"
        if t is E.Div:
            op = cast(E.BinaryOp, e)
            return f"({self.expr(op.a)} / {self.expr(op.b)})"
        if t in (E.Min, E.Max):
            op = cast(E.BinaryOp, e)
            fn = "min" if t is E.Min else "max"
            if e.dtype == "float16":
                lang = self.lang
                a, b = self.half(lang.from_half, self.expr(op.a)), self.half(lang.from_half, self.expr(op.b))
                return self.half(lang.to_half, f"{fn}({a}, {b})")
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
                return self.half(self.lang.to_half, f"(float)({inner})")
            if c.value.dtype == "float16":
                return f"(({self.type_name(c.dtype)}){self.half(self.lang.from_half, inner)})"
            return f"(({self.type_name(c.dtype)})({inner}))"
        if t is E.Call:
            return self.call(cast(E.Call, e))
        raise self.error(f"unsupported expression {t.__name__}")

    def math(self, dtype: str) -> Mapping[str, str]:
        return self.lang.math_f64 if dtype == "float64" else self.lang.math_f32

    def call(self, e: E.Call) -> str:
        args = [self.expr(a) for a in e.args]
        dtype = e.dtype
        if E.is_int(dtype) and e.op == "abs":
            return f"abs({args[0]})"
        if dtype == "float16":  # computed in float32, as CUDA's half math does
            args = [self.half(self.lang.from_half, a) for a in args]
        fns = self.math(dtype)
        if e.op == "sigmoid":
            one = "1.0" if dtype == "float64" else "1.0f"
            out = f"({one} / ({one} + {fns['exp']}(-({args[0]}))))"
        else:
            out = f"{fns[e.op]}({', '.join(args)})"
        return self.half(self.lang.to_half, out) if dtype == "float16" else out

    def float_literal(self, v: float, dtype: str) -> str:
        lang = self.lang
        if dtype == "float64":
            bits = lang.int_suffix["int64"]
            if math.isnan(v):
                return lang.double_from_bits.format(f"0x7ff8000000000000{bits}")
            if math.isinf(v):
                return ("" if v > 0 else "-") + lang.double_from_bits.format(f"0x7ff0000000000000{bits}")
            return repr(float(v))
        if math.isnan(v):
            text = lang.float_from_bits.format("0x7fc00000")
        elif math.isinf(v):
            text = ("" if v > 0 else "-") + lang.float_from_bits.format("0x7f800000")
        else:
            text = f"{float(v)!r}f"
            if "e" in text or "inf" in text:
                text = f"{float(v):.9e}f"
        text = f"({text})" if text.startswith("-") else text
        return self.half(lang.to_half, text) if dtype == "float16" else text
