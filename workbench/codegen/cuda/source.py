"""CUDA C: the C-family table of CUDA and its tensor cores (``extern "C" __global__`` kernels).

:mod:`..gpu.cfamily` prints the device form (:mod:`..gpu.device`) in any C-family GPU language;
this module says how CUDA spells it (:data:`CUDA`: ``blockIdx.x``, ``__syncthreads()``,
``__shared__``, ``__shfl_xor_sync``, ``float4`` copies, ``half`` of ``cuda_fp16.h``, ``expf`` ...)
and prints what only CUDA has: the ``nvcuda::wmma`` tensor-core fragments and operations.
"""

from __future__ import annotations

from typing import cast

from ...errors import BuildError
from ...ir import expr as E
from ...ir.arith import simplify
from ...ir.buffer import Buffer
from ...ir.dtype import DTYPE_INFO
from ...ir.functor import pre_order, substitute
from ...ir.stmt import Allocate
from ..gpu.cfamily import CLanguage, KernelPrinter, c_source
from ..gpu.device import HW, DeviceProgram, Wmma, perfect_nest
from ..printing import flat_index

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

CUDA = CLanguage(
    name="cuda",
    types={n: d.c for n, d in DTYPE_INFO.items()},
    header="#include <cuda_fp16.h>\n\n",
    function_qualifiers="__device__ __forceinline__ ",
    kernel='extern "C" __global__ void {bounds}{name}({params}) {{',
    launch_bounds="__launch_bounds__({threads}) ",
    param="{type}* __restrict__ {name}",
    shared_array="__shared__ __align__(16) {type} {name}[{size}];",
    shared_scratch="__shared__ {type} {name}[{size}];",
    local_array="__align__(16) {type} {name}[{size}];  // {scope}",
    hw={tag: tag for tag in HW},
    barrier="__syncthreads();",
    unroll="#pragma unroll",
    vector_copy="*({vt}*)({dst}) = *(const {vt}*)({src});",
    int_suffix={"int64": "LL", "uint64": "ULL", "uint32": "u"},
    float_from_bits="__int_as_float({})",
    double_from_bits="__longlong_as_double({})",
    math_f32=_F32_MATH,
    math_f64={**{op: op for op in E.INTRINSICS}, "abs": "fabs"},
    dyn_shared="extern __shared__ __align__(16) unsigned char wb_dyn_shared[];",
    dyn_shared_view="{type}* {name} = ({type}*)(wb_dyn_shared + {offset});",
    shuffle_xor="__shfl_xor_sync({mask}, {value}, {offset}, 32)",
    to_half="__float2half({})",
    from_half="__half2float({})",
)

WMMA_FRAGMENT = {"wmma.matrix_a": "matrix_a", "wmma.matrix_b": "matrix_b", "wmma.accumulator": "accumulator"}


def cuda_source(program: DeviceProgram) -> str:
    source = c_source(program, CUDA, CUDAKernelPrinter)
    if any(isinstance(n, Wmma) for k in program.kernels for n in pre_order(k.body)):
        source = "#include <mma.h>\n" + source
    return source


class CUDAKernelPrinter(KernelPrinter):
    """The C-family printer, with CUDA's tensor cores."""

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
        ctype = "half" if b.dtype == "float16" else self.type_name(b.dtype)
        layouts = {
            n.layout
            for n in pre_order(s.body)
            if isinstance(n, Wmma)
            and n.op.startswith("load")
            and n.loop.body is not None
            and perfect_nest(n.loop)[1].buffer is b
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
        loops, store = perfect_nest(s.loop)
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
            flat = flat_index(buf, indices)
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
