"""Postprocessors: each fixes a candidate into a runnable program or rejects it with a reason."""

import numpy as np

from workbench import build, workloads
from workbench.ir import dsl
from workbench.ir.stmt import ForKind
from workbench.schedule import Schedule
from workbench.space import (
    DisallowDynamicLoop,
    Postproc,
    Rejected,
    RewriteParallelVectorizeUnroll,
    RewriteReductionBlock,
    VerifyGPUCode,
    generate_design_space,
    replay,
    run_postprocs,
    without_postproc,
)
from workbench.space.analysis import AUTO_UNROLL_MAX_STEP, PARALLEL
from workbench.testing import check_numeric, check_trace_roundtrip, triangular_func


def small(name):
    return workloads.get(name, **workloads.small(name))


def gmm_sketch(unroll: int = 0):
    """The GMM sketch without a write cache, tiles pinned, unroll step index ``unroll``."""
    sch = generate_design_space(small("GMM"), target="llvm -num-cores=2", seed=0)[0]
    trace = sch.trace.copy()
    picks = [[1, 1, 1, 1], [1, 2, 2, 4], [2, 1, 1, 8], [8, 2], unroll]
    for inst, value in zip([i for i in trace if i.kind.is_sampling], picks):
        trace.pin(inst, value)
    return trace


def kinds(sch):
    return {l.loop_var.name: l.kind for l in sch.func.loops()}


def test_rewrite_parallel_vectorize_unroll():
    sch, why = replay(small("GMM"), gmm_sketch(unroll=1), [RewriteParallelVectorizeUnroll()])
    assert why is None
    k = kinds(sch)
    # the spatial loops of levels 1 and 2 (product 4 <= 32) make one parallel loop
    assert k["b_0_i_0_j_0_b_1_i_1_j_1_fused"] == ForKind.PARALLEL
    assert k["j_3_fused"] == ForKind.VECTORIZED  # the contiguous innermost loop (8)
    # unrolled from the inside while extent x statements (init + update) <= 16
    assert k["i_3"] == k["k_1"] == ForKind.UNROLLED and k["i_2"] == ForKind.SERIAL
    top = next(sch.func.loops())
    assert top.annotations[AUTO_UNROLL_MAX_STEP] == 16
    assert PARALLEL not in sch.func.root.annotations
    check_numeric(sch, "GMM", target="llvm", **workloads.small("GMM"))
    check_trace_roundtrip(sch)


def test_rewrite_reduction_block_decomposes_at_first_reduce_loop():
    sch, why = replay(small("GMM"), gmm_sketch(), [RewriteReductionBlock()])
    assert why is None and sch.func.block("Z_update").init is None
    init_loops = [l.loop_var.name for l in sch.index.loops_above(sch.func.block("Z_init"))]
    assert init_loops[:6] == ["b_0", "i_0", "j_0", "b_1", "i_1", "j_1"]  # outside k_0
    check_numeric(sch, "GMM", **workloads.small("GMM"))


def test_disallow_dynamic_loop_rejects():
    sch = Schedule(triangular_func())
    assert "dynamic extent" in run_postprocs(sch, [DisallowDynamicLoop()])
    assert run_postprocs(Schedule(small("GMM")), [DisallowDynamicLoop()]) is None


def test_verify_gpu_code_limits_threads_and_shared_memory():
    def bound(n_threads):
        sch = Schedule(small("GMM"))
        b, i, j, k = sch.get_loops("Z")
        sch.bind(i, "blockIdx.x")
        jo, ji = sch.split(j, factors=[None, n_threads])
        sch.bind(ji, "threadIdx.x")
        return sch

    post = VerifyGPUCode()
    post.initialize_with_target("cuda -max-threads-per-block=8")
    assert run_postprocs(bound(8), [post]) is None
    assert "16 threads per block exceed" in run_postprocs(bound(16), [post])
    shared = bound(8)
    shared.cache_read("Z", 1, "shared")
    post.initialize_with_target("cuda -max-shared-memory-per-block=512")
    assert "bytes of shared memory exceed" in run_postprocs(shared, [post])


class Refuse(Postproc):
    def apply(self, sch):
        return False


class Explain(Postproc):
    def apply(self, sch):
        raise Rejected("too slow anyway")


def test_run_postprocs_reasons_and_marker():
    sch = Schedule(small("GMM"))
    assert run_postprocs(sch, [Refuse()]) == "Refuse rejected the candidate"
    assert run_postprocs(Schedule(small("GMM")), [Explain()]) == "Explain: too slow anyway"
    done, _ = replay(small("GMM"), gmm_sketch(), Postproc.create("llvm"))
    names = [i.kind.name for i in done.trace]
    assert "enter_postproc" in names
    assert len(without_postproc(done.trace)) == names.index("enter_postproc")
    assert isinstance(Postproc.named("verify_gpu_code"), VerifyGPUCode)


def _double(n, m):
    A = dsl.placeholder((n, m), name="A")
    B = dsl.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    return dsl.create_func([A, B], name="double")


def _annotated_root(func, parallel=32, vectorize=64, unroll=16):
    sch = Schedule(func)
    root = sch.get_block("root")
    sch.annotate(root, PARALLEL, parallel)
    sch.annotate(root, "meta_schedule.vectorize", vectorize)
    sch.annotate(root, "meta_schedule.unroll_explicit", unroll)
    return sch


def test_rewrite_parallel_vectorize_unroll_fuse_splits_a_nest_that_is_all_parallel_and_vector():
    # TVM's RewriteFuseSplitParallelVectorize: every loop may be both parallel and vectorized,
    # so the nest is fused and split by the vector limit; a spatial block is not unrolled
    # (8 x 256: the row of 256 is over the vector limit alone; fused and split it is 32 x 64)
    sch = _annotated_root(_double(8, 256))
    assert run_postprocs(sch, [RewriteParallelVectorizeUnroll()]) is None
    (outer, inner) = list(sch.func.loops())
    assert (outer.kind, outer.extent.value) == (ForKind.PARALLEL, 32)
    assert (inner.kind, inner.extent.value) == (ForKind.VECTORIZED, 64)
    assert AUTO_UNROLL_MAX_STEP not in outer.annotations
    a = np.random.default_rng(0).standard_normal((8, 256)).astype("float32")
    b = np.zeros_like(a)
    build(sch, target="llvm")(a, b)
    np.testing.assert_allclose(b, a * 2)
    check_trace_roundtrip(sch)


def test_rewrite_parallel_vectorize_unroll_visits_blocks_in_program_order():
    # GMM with its write cache under tile level 2: the matmul comes first (TVM's order), so its
    # loops get the parallel fusion and the unroll annotation; the cache block, computed inside
    # those loops, is spatial and gets no annotation of its own
    sketch = generate_design_space(small("GMM"), target="llvm -num-cores=2", seed=0)[2]
    trace = sketch.trace.copy()
    picks = [[1, 1, 1, 1], [1, 2, 2, 4], [2, 1, 1, 8], [8, 2], 1]
    for inst, value in zip([i for i in trace if i.kind.is_sampling], picks):
        trace.pin(inst, value)
    assert "cache_write" in str(trace)
    sch, why = replay(small("GMM"), trace, [RewriteParallelVectorizeUnroll()])
    assert why is None
    post = str(sch.trace).split("enter_postproc()")[1]
    first_loops = next(line for line in post.splitlines() if "get_loops" in line)
    assert first_loops.count(",") + 1 == 14  # the matmul's 14 loops (the cache has 6 under 4)
    assert post.count(AUTO_UNROLL_MAX_STEP) == 1
    check_numeric(sch, "GMM", target="llvm", **workloads.small("GMM"))
    check_trace_roundtrip(sch)
