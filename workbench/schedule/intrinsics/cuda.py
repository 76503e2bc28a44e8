"""NVIDIA tensor-core intrinsics: wmma 16x16x16, fp16 inputs, fp32 accumulation (TVM's names).

A warp computes ``C[16, 16] += A[16, 16] * B[16, 16]`` on *fragments*, opaque per-warp tiles in
the storage scopes ``wmma.matrix_a``, ``wmma.matrix_b`` and ``wmma.accumulator``. Five
intrinsics move tiles in and out of fragments and compute on them:

==========================================  ============================================
``wmma_load_16x16x16_f16_a_{shared,shared_dyn}``  ``A_frag[16, 16] = A_shared[16, 16]``  (fp16)
``wmma_load_16x16x16_f16_b_{shared,shared_dyn}``  ``B_frag[16, 16] = B_shared[16, 16]``  (fp16)
``wmma_load_16x16x16_f16_b_trans_{...}``    the same, B stored ``[j, k]`` (column-major)
``wmma_sync_16x16x16_f16f16f32``            ``C_frag[i, j] += A_frag[i, k] * B_frag[k, j]`` (fp32)
``wmma_sync_16x16x16_f16f16f32_trans``      ``C_frag[i, j] += A_frag[i, k] * B_frag[j, k]``
``wmma_fill_16x16x16_f32``                  ``C_frag[16, 16] = 0``
``wmma_store_16x16x16_f32_{shared,shared_dyn,global}``  ``C[16, 16] = C_frag[16, 16]``
==========================================  ============================================

The description is the plain loop nest; the implementation is the same loop nest (its exact
semantics, which the emulator and the CPU backends run) with the root annotation
``{"wmma": op, "wmma.layout": layout}`` (op: ``load_matrix_a``, ``load_matrix_b``,
``mma_sync``, ``fill``, ``store``; layout of the B tile: ``row_major`` or ``col_major``).
``tensorize`` puts that annotation on the tensorized block, and the CUDA backend prints the
block as the ``nvcuda::wmma`` call of that name on the fragments its regions name.
"""

from __future__ import annotations

from typing import Callable, Union

from ...ir.buffer import Buffer
from ...ir.expr import BufferLoad, Cast, FloatImm, Var
from ...ir.func import PrimFunc
from ...ir.region import infer_access_regions
from ...ir.stmt import REDUCE, SPATIAL, TRUE, Block, BlockRealize, BufferStore, For, IterVar, Range, make_for
from ..tensor_intrin import TensorIntrin

#: block annotation naming the wmma operation a tensorized block performs
WMMA_OP = "wmma"
#: block annotation of loads and mma_sync: the layout of the matrix_b tile, ``"row_major"``
#: (``B[k, j]``) or ``"col_major"`` (``B[j, k]``, the ``_trans`` intrinsics: a dense layer's
#: weight, or the (j, k) layout ``reindex`` gives B in ``C[i, j] += A[i, k] * B[k, j]``)
WMMA_LAYOUT = "wmma.layout"
M = N = K = 16

LOAD_A = "wmma_load_16x16x16_f16_a_{}"
LOAD_B = "wmma_load_16x16x16_f16_b_{}"
SYNC = "wmma_sync_16x16x16_f16f16f32"
SYNC_TRANS = "wmma_sync_16x16x16_f16f16f32_trans"
LOAD_B_TRANS = "wmma_load_16x16x16_f16_b_trans_{}"
FILL = "wmma_fill_16x16x16_f32"
STORE = "wmma_store_16x16x16_f32_{}"
#: the source scopes of loads / destination scopes of stores, as they appear in the names
SCOPE_SUFFIX = {"shared": "shared", "shared.dyn": "shared_dyn", "global": "global"}


def _funcs(
    name: str,
    params: tuple[Buffer, ...],
    kinds: str,
    store: Callable[[list[Var]], BufferStore],
    op: str,
    layout: str = "row_major",
) -> tuple[PrimFunc, PrimFunc]:
    """(description, implementation) over ``params``: loops of 16 (one per letter of ``kinds``,
    S or R) around one block doing ``store``; the implementation is the plain loop nest."""
    loop_vars = [Var(f"i{d}") for d in range(len(kinds))]
    ivs = tuple(
        IterVar(Var(f"v{d}"), Range.from_extent(16), SPATIAL if k == "S" else REDUCE)
        for d, k in enumerate(kinds)
    )
    inner = store([iv.var for iv in ivs])
    reads, writes = infer_access_regions(inner)
    block = Block(name, ivs, reads, writes, inner)
    body: Union[BlockRealize, For] = BlockRealize(tuple(loop_vars), TRUE, block)
    for v in reversed(loop_vars):
        body = make_for(v, 16, body)
    desc_root = Block("root", (), (), (), body)
    desc = PrimFunc(f"{name}_desc", params, BlockRealize((), TRUE, desc_root))
    impl_body: Union[BufferStore, For] = store(loop_vars)
    for v in reversed(loop_vars):
        impl_body = make_for(v, 16, impl_body)
    impl_root = Block("root", (), (), (), impl_body, annotations={WMMA_OP: op, WMMA_LAYOUT: layout})
    impl = PrimFunc(f"{name}_impl", params, BlockRealize((), TRUE, impl_root))
    return desc, impl


def _copy(src: Buffer, dst: Buffer) -> Callable[[list[Var]], BufferStore]:
    return lambda v: BufferStore(dst, BufferLoad(src, tuple(v)), tuple(v))


def _register() -> None:
    for scope, suffix in SCOPE_SUFFIX.items():
        if scope != "global":
            for name, frag_scope, op, layout in (
                (LOAD_A, "wmma.matrix_a", "load_matrix_a", "row_major"),
                (LOAD_B, "wmma.matrix_b", "load_matrix_b", "row_major"),
                (LOAD_B_TRANS, "wmma.matrix_b", "load_matrix_b", "col_major"),
            ):
                src = Buffer("src", (16, 16), "float16", scope)
                dst = Buffer("frag", (16, 16), "float16", frag_scope)
                TensorIntrin.register(
                    name.format(suffix),
                    *_funcs(name.format(suffix), (src, dst), "SS", _copy(src, dst), op, layout),
                    override=True,
                )
        acc = Buffer("acc", (16, 16), "float32", "wmma.accumulator")
        out = Buffer("dst", (16, 16), "float32", scope)
        TensorIntrin.register(
            STORE.format(suffix),
            *_funcs(STORE.format(suffix), (acc, out), "SS", _copy(acc, out), "store"),
            override=True,
        )
    a = Buffer("A", (16, 16), "float16", "wmma.matrix_a")
    b = Buffer("B", (16, 16), "float16", "wmma.matrix_b")
    c = Buffer("C", (16, 16), "float32", "wmma.accumulator")

    def mma(trans: bool):
        def store(v):
            i, j, k = v
            b_ij = BufferLoad(b, (j, k) if trans else (k, j))
            prod = Cast("float32", BufferLoad(a, (i, k))) * Cast("float32", b_ij)
            return BufferStore(c, BufferLoad(c, (i, j)) + prod, (i, j))

        return store

    TensorIntrin.register(SYNC, *_funcs(SYNC, (a, b, c), "SSR", mma(False), "mma_sync"), override=True)
    TensorIntrin.register(
        SYNC_TRANS, *_funcs(SYNC_TRANS, (a, b, c), "SSR", mma(True), "mma_sync", "col_major"), override=True
    )
    TensorIntrin.register(
        FILL,
        *_funcs(FILL, (c,), "SS", lambda v: BufferStore(c, FloatImm(0.0, "float32"), tuple(v)), "fill"),
        override=True,
    )


def load_intrin(operand: str, scope: str, trans: bool = False) -> str:
    """The load intrinsic of operand ``"a"`` or ``"b"`` from ``scope`` (``shared``,
    ``shared.dyn``); ``trans``: B stored as ``[j, k]``."""
    name = LOAD_A if operand == "a" else (LOAD_B_TRANS if trans else LOAD_B)
    return name.format(SCOPE_SUFFIX[scope])


def store_intrin(scope: str) -> str:
    """The store intrinsic from the accumulator to ``scope`` (``shared``, ``shared.dyn``,
    ``global``)."""
    return STORE.format(SCOPE_SUFFIX[scope])


_register()
