"""x86 CPU intrinsics: fp32 matrix-multiply micro-kernels for AVX-512 and for AVX2 + FMA.

``{isa}_f32_gemm_{m}x{n}x{k}`` (``isa``: ``avx512`` or ``avx2``) computes ``C[m, n] += A[m, k] *
B[k, n]`` (the description is the plain triple loop, ``k`` innermost). The implementation is the
register-blocked kernel of every BLAS: the ``m x n`` tile of C lives in a local accumulator for
the whole ``k`` loop, each step broadcasts ``A[i, kk]`` and multiplies it with the row
``B[kk, 0:n]``. The ``i`` loops are unrolled and the ``n`` loops vectorized, so the LLVM backend
emits ``n / lanes`` multiply-adds per row per step (``vfmadd`` on ``zmm`` registers with AVX-512,
16 lanes; on ``ymm`` with AVX2 + FMA, 8 lanes) and keeps the accumulators in registers.

The two families are the same code; they differ in their tiles, chosen so that the
accumulators (``m`` rows of ``n / lanes`` vectors), one row of B and the broadcast value of A
fit the register file: 32 ``zmm`` registers for AVX-512, 16 ``ymm`` for AVX2 (e.g. 6 x 16, the
shape of BLIS's Haswell kernel). :func:`gemm_intrinsics` gives the family a target can use,
from its features and :meth:`~workbench.target.Target.vector_lanes`.
"""

from __future__ import annotations

from typing import Any, Optional

from ...ir import dsl
from ...ir.buffer import Buffer
from ...ir.expr import Var
from ...ir.func import PrimFunc
from ...ir.stmt import TRUE, Block, BlockRealize, BufferStore, ForKind, Stmt, make_for, seq
from ...target import Target
from ...ir.index import index, replace
from ..tensor_intrin import TensorIntrin

#: instruction set -> (target features it needs, SIMD bits, vector registers)
ISAS: dict[str, tuple[tuple[str, ...], int, int]] = {
    "avx512": (("avx512f",), 512, 32),
    "avx2": (("avx2", "fma"), 256, 16),
}
_K_STEPS = (1, 4, 16, 64)


def _fits(m: int, n: int, isa: str) -> bool:
    """The accumulators, a row of B and A's broadcast value fit the vector registers."""
    _, bits, registers = ISAS[isa]
    per_row = -(-n * 32 // bits)
    return m * per_row + per_row + 1 <= registers


#: isa -> (m, n, k) tiles registered as built-ins: m rows of accumulators, one or two vectors
#: wide (n), k steps per call
GEMM_TILES: dict[str, tuple[tuple[int, int, int], ...]] = {
    "avx512": tuple((m, n, k) for m in (1, 4, 8) for n in (16, 32) for k in _K_STEPS),
    "avx2": tuple((m, n, k) for m in (1, 4, 6, 8) for n in (8, 16) for k in _K_STEPS if _fits(m, n, "avx2")),
}


def gemm_name(m: int, n: int, k: int, isa: str = "avx512") -> str:
    return f"{isa}_f32_gemm_{m}x{n}x{k}"


def gemm_tile(name: str) -> tuple[int, int, int]:
    """``(m, n, k)`` of a GEMM micro-kernel's name (``"avx2_f32_gemm_6x16x64"``: 6, 16, 64)."""
    m, n, k = map(int, name.rsplit("_", 1)[1].split("x"))
    return m, n, k


def gemm_isa(target: Any) -> Optional[str]:
    """The micro-kernel family for ``target`` (a ``Target`` or its text): ``"avx512"`` on
    AVX-512 CPUs, ``"avx2"`` on AVX2 + FMA ones, None elsewhere (other architectures, SSE)."""
    target = Target.of(target)
    if target.kind != "llvm" or not target.is_x86:
        return None
    for isa, (features, bits, _) in ISAS.items():
        if target.vector_width_bits >= bits and all(map(target.has_feature, features)):
            return isa
    return None


def gemm_intrinsics(target: Any) -> list[str]:
    """Names of the fp32 GEMM micro-kernels suited to ``target``, the largest register tile
    first (then the longest ``k``): ``avx512_f32_gemm_8x32x64``, ... on AVX-512 CPUs,
    ``avx2_f32_gemm_6x16x64``, ... on AVX2 + FMA ones, none elsewhere."""
    isa = gemm_isa(target)
    if isa is None:
        return []
    tiles = sorted(GEMM_TILES[isa], key=lambda t: (t[0] * t[1], t[2], t[1]), reverse=True)
    return [gemm_name(m, n, k, isa) for m, n, k in tiles]


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

    def rows(body) -> Stmt:
        """``for i (unrolled): for j (vectorized): body(i, j)``."""
        i, j = Var("i"), Var("j")
        return make_for(i, m, make_for(j, n, body(i, j), ForKind.VECTORIZED), ForKind.UNROLLED)

    kk = Var("k")
    load = rows(lambda i, j: BufferStore(acc, C[i, j], (i, j)))
    step = make_for(kk, k, rows(lambda i, j: BufferStore(acc, acc[i, j] + A[i, kk] * B[kk, j], (i, j))))
    store = rows(lambda i, j: BufferStore(C, acc[i, j], (i, j)))
    root = Block("root", (), (), (), seq(load, step, store), alloc_buffers=(acc,))
    return PrimFunc("gemm_impl", (A, B, C), BlockRealize((), TRUE, root))


for _isa, _tiles in GEMM_TILES.items():
    for _m, _n, _k in _tiles:
        TensorIntrin.register(
            gemm_name(_m, _n, _k, _isa), gemm_desc(_m, _n, _k), gemm_impl(_m, _n, _k), override=True
        )
