"""GPU recipes: hand-written CUDA schedules of the paper's workloads: what the tests check on
nvcc and on the emulator, what ``bench/gpu.py`` times on a GPU, and a model to read before
writing one.

Each function takes the workload's shape keywords (``wb.workloads.get(name, **shape)``) and
returns a ``Schedule``; :data:`HAND_SCHEDULES` maps a label to ``(workload, schedule fn)``.

* ``gmm_shared``: 2-D tiles per block, a 4x4 register tile per thread (``local``), the k-tile of
  both operands staged in shared memory by all threads (``float4`` copies, barriers around);
* ``c2d_shared``: a 4x4 output tile per block, (pixel, output channel) per thread, the padded
  input tile staged in shared memory (the padding computed while fetching);
* ``sfm_cross_thread``: one row per block, the max and the sum reduced across 64 threads
  (shared-memory trees), the intermediates in shared memory;
* ``nrm_cross_thread``: one batch per block, the sum of squares reduced across 128 threads by
  warp shuffles and a shared tree;
* ``gmm_wmma``: tensor cores: fp16 tiles staged in shared memory, loaded into wmma fragments,
  multiplied by ``mma_sync`` into an fp32 accumulator fragment per warp.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import workloads
from ..schedule import BlockRV, ExprRV, LoopRV, Schedule
from ..schedule.intrinsics.cuda import FILL, SYNC, load_intrin, store_intrin


def _cooperative_fetch(
    sch: Schedule, block: BlockRV, at: LoopRV, threads: tuple[int, ...], vector: int = 1
) -> None:
    """Fuse the loops of ``block`` below loop ``at`` and spread them over the threads
    (``threads``: extents of threadIdx.y, threadIdx.x), ``vector`` elements per access."""
    loops = sch.get_loops(block)
    start = next(n for n, loop in enumerate(loops) if sch.get(loop) is sch.get(at)) + 1
    fused = sch.fuse(*loops[start:]) if len(loops) - start > 1 else loops[start]
    factors: list[ExprRV | int | None] = [None, *threads, *([vector] if vector > 1 else [])]
    parts = sch.split(fused, factors)
    tags = ("threadIdx.y", "threadIdx.x")[-len(threads) :]
    for loop, tag in zip(parts[1 : 1 + len(threads)], tags):
        sch.bind(loop, tag)
    if vector > 1:
        sch.vectorize(parts[-1])


def gmm_shared(n: int = 256, m: int = 256, k: int = 256, b: int = 1, tile: int = 4) -> Schedule:
    """C = A @ B: blocks of (8 tile)x(16 tile) outputs, 8x16 threads of tile x tile outputs,
    k-tiles of 16."""
    sch = Schedule(workloads.get("GMM", b=b, n=n, m=m, k=k))
    z = sch.get_block("Z")
    bb, i, j, kk = sch.get_loops(z)
    i0, i1, i2 = sch.split(i, [None, 8, tile])
    j0, j1, j2 = sch.split(j, [None, 16, tile])
    k0, k1 = sch.split(kk, [None, 16])
    sch.reorder(bb, i0, j0, i1, j1, k0, k1, i2, j2)
    sch.bind(sch.fuse(bb, i0), "blockIdx.x")
    sch.bind(j0, "blockIdx.y")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    acc = sch.cache_write(z, 0, "local")
    sch.reverse_compute_at(acc, j1)
    for index in (0, 1):
        fetch = sch.cache_read(z, index, "shared")
        sch.compute_at(fetch, k0)
        _cooperative_fetch(sch, fetch, k0, (8, 16), vector=4)
    sch.decompose_reduction(z, k0)
    sch.unroll(k1)
    return sch


def c2d_shared(**shape: Any) -> Schedule:
    """conv2d NHWC: a 4x4 output tile per block, (pixel, channel) per thread; the input tile
    (with its halo, padded) fetched into shared memory once per block."""
    sch = Schedule(workloads.get("C2D", **shape))
    pad, conv = sch.get_block("PadInput"), sch.get_block("conv2d_nhwc")
    n, h, w, co, rh, rw, rc = sch.get_loops(conv)
    h0, h1 = sch.split(h, [None, 4])
    w0, w1 = sch.split(w, [None, 4])
    sch.reorder(n, h0, w0, h1, w1, co, rh, rw, rc)
    sch.bind(sch.fuse(n, h0), "blockIdx.y")
    block = w0
    sch.bind(w0, "blockIdx.x")
    sch.bind(sch.fuse(h1, w1), "threadIdx.y")
    sch.bind(co, "threadIdx.x")
    channels = sch.get(co).extent.value
    acc = sch.cache_write(conv, 0, "local")
    sch.reverse_compute_at(acc, co)
    sch.set_scope(pad, 0, "shared")
    sch.compute_at(pad, block)
    # the tile's rows on threadIdx.y, its channels on threadIdx.x, its columns in turn (affine
    # indices: the shared buffer compacts to the tile)
    rows, cols, chans = sch.get_loops(pad)[-3:]
    sch.bind(rows, "threadIdx.y")
    sch.bind(sch.split(chans, [None, channels])[1], "threadIdx.x")
    return sch


def sfm_cross_thread(m: int = 256, n: int = 256, threads: int = 64) -> Schedule:
    """softmax: a row per block; max and sum reduced across ``threads`` threads."""
    sch = Schedule(workloads.get("SFM", m=m, n=n))
    norm = sch.get_block("T_softmax_norm")
    row, col = sch.get_loops(norm)
    sch.bind(row, "blockIdx.x")
    sch.bind(sch.split(col, [None, threads])[1], "threadIdx.x")
    for name in ("T_softmax_expsum", "T_softmax_exp", "T_softmax_maxelem"):
        stage = sch.get_block(name)
        sch.set_scope(stage, 0, "shared")
        sch.compute_at(stage, row)
        inner = sch.get_loops(stage)[-1]
        sch.bind(sch.split(inner, [None, threads])[1], "threadIdx.x")
    return sch


def nrm_cross_thread(b: int = 256, m: int = 256, n: int = 256, threads: int = 128) -> Schedule:
    """norm: one batch per block, its m*n squares summed across ``threads`` threads."""
    sch = Schedule(workloads.get("NRM", b=b, m=m, n=n))
    c = sch.get_block("C")
    bb, i, j = sch.get_loops(c)
    sch.bind(bb, "blockIdx.x")
    sch.bind(sch.split(sch.fuse(i, j), [None, threads])[1], "threadIdx.x")
    d = sch.get_block("D")
    (bd,) = sch.get_loops(d)
    d0, d1 = sch.split(bd, [None, 32])
    sch.bind(d0, "blockIdx.x")
    sch.bind(d1, "threadIdx.x")
    return sch


def gmm_wmma(n: int = 128, m: int = 128, k: int = 128) -> Schedule:
    """C (fp32) = A @ B (fp16) on tensor cores: a 32x32 tile per block, one 16x16 accumulator
    fragment per warp (4 warps on threadIdx.y), k-tiles of 16 staged in shared memory."""
    sch = Schedule(workloads.get("GMM-FP16", n=n, m=m, k=k))
    c = sch.get_block("C")
    i, j, kk = sch.get_loops(c)
    i0, i1, i2 = sch.split(i, [None, 2, 16])
    j0, j1, j2 = sch.split(j, [None, 2, 16])
    k0, k1 = sch.split(kk, [None, 16])
    sch.reorder(i0, j0, i1, j1, k0, i2, j2, k1)
    sch.bind(i0, "blockIdx.x")
    sch.bind(j0, "blockIdx.y")
    warp = sch.fuse(i1, j1)
    sch.bind(warp, "threadIdx.y")
    acc = sch.cache_write(c, 0, "wmma.accumulator")
    sch.reverse_compute_at(acc, warp)
    for index in (0, 1):
        fetch = sch.cache_read(c, index, "shared")
        sch.compute_at(fetch, k0)
        _cooperative_fetch(sch, fetch, k0, (4, 32))
    for index, operand in ((0, "a"), (1, "b")):
        frag = sch.cache_read(c, index, f"wmma.matrix_{operand}")
        r, s = sch.get_loops(frag)[-2:]
        r0, r1 = sch.split(r, [None, 16])
        s0, s1 = sch.split(s, [None, 16])
        sch.reorder(r0, s0, r1, s1)
        sch.tensorize(r1, load_intrin(operand, "shared"))
    init = sch.decompose_reduction(c, k0)
    sch.tensorize(sch.get_loops(init)[-2], FILL)
    sch.tensorize(sch.get_loops(c)[-3], SYNC)
    sch.tensorize(sch.get_loops(acc)[-2], store_intrin("global"))
    return sch


#: label -> (workload name, schedule function)
HAND_SCHEDULES: dict[str, tuple[str, Callable[..., Schedule]]] = {
    "GMM shared-memory tiles": ("GMM", gmm_shared),
    "C2D shared-memory input tile": ("C2D", c2d_shared),
    "SFM cross-thread reduction": ("SFM", sfm_cross_thread),
    "NRM cross-thread reduction": ("NRM", nrm_cross_thread),
    "GMM-FP16 tensor cores (wmma)": ("GMM-FP16", gmm_wmma),
}
