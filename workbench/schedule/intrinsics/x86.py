"""x86 CPU intrinsics: fp32 matrix-multiply micro-kernels for AVX-512.

``avx512_f32_gemm_{m}x{n}x{k}`` computes ``C[m, n] += A[m, k] * B[k, n]`` (the description is the
plain triple loop, ``k`` innermost). The implementation is the register-blocked kernel of every
BLAS: the ``m x n`` tile of C lives in a local accumulator for the whole ``k`` loop, each step
broadcasts ``A[i, kk]`` and multiplies it with the row ``B[kk, 0:n]``. The ``i`` loops are
unrolled and the ``n`` loops vectorized, so with ``n = 16`` the LLVM backend emits one
``<16 x float>`` multiply-add per row per step (fused into ``vfmadd`` on AVX-512) and keeps the
``m`` accumulator rows in registers.
"""
from __future__ import annotations

from ...ir import dsl
from ...ir.buffer import Buffer
from ...ir.expr import Var
from ...ir.func import PrimFunc
from ...ir.stmt import TRUE, Block, BlockRealize, BufferStore, ForKind, make_for, seq
from ..state import index, replace
from ..tensor_intrin import TensorIntrin

#: (m, n, k) tiles registered as built-ins: m rows of accumulators (up to 8 of the 32 zmm
#: registers), one 16-lane vector wide, k steps per call
GEMM_TILES = tuple((m, n, k) for m in (1, 4, 8) for n in (16, 32) for k in (1, 4, 16, 64))


def gemm_name(m: int, n: int, k: int) -> str:
    return f"avx512_f32_gemm_{m}x{n}x{k}"


def gemm_desc(m: int, n: int, k: int, dtype: str = "float32") -> PrimFunc:
    """``C[i, j] += A[i, kk] * B[kk, j]`` over an m x n x k tile, as the DSL writes it."""
    A = dsl.placeholder((m, k), dtype, name="A")
    B = dsl.placeholder((k, n), dtype, name="B")
    r = dsl.reduce_axis(k, name="k")
    C = dsl.compute((m, n), lambda i, j: dsl.sum(A[i, r] * B[r, j], axis=r), name="C")
    func = dsl.create_func([A, B, C], name="gemm_desc")
    block = index(func).block("C")
    return replace(func, block, block.with_(init=None))  # the init stays with the caller


def gemm_impl(m: int, n: int, k: int, dtype: str = "float32") -> PrimFunc:
    """The register-blocked kernel (see the module docstring)."""
    A, B, C = Buffer("A", (m, k), dtype), Buffer("B", (k, n), dtype), Buffer("C", (m, n), dtype)
    acc = Buffer("acc", (m, n), dtype, scope="local")

    def rows(body) -> object:
        """``for i (unrolled): for j (vectorized): body(i, j)``."""
        i, j = Var("i"), Var("j")
        return make_for(i, m, make_for(j, n, body(i, j), ForKind.VECTORIZED), ForKind.UNROLLED)

    kk = Var("k")
    load = rows(lambda i, j: BufferStore(acc, C[i, j], (i, j)))
    step = make_for(kk, k, rows(lambda i, j: BufferStore(acc, acc[i, j] + A[i, kk] * B[kk, j],
                                                          (i, j))))
    store = rows(lambda i, j: BufferStore(C, acc[i, j], (i, j)))
    root = Block("root", (), (), (), seq(load, step, store), alloc_buffers=(acc,))
    return PrimFunc("gemm_impl", (A, B, C), BlockRealize((), TRUE, root))


for _m, _n, _k in GEMM_TILES:
    TensorIntrin.register(gemm_name(_m, _n, _k), gemm_desc(_m, _n, _k), gemm_impl(_m, _n, _k),
                          override=True)
