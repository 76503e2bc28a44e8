"""Schedule rules, each on the workloads where it applies, with pinned decisions where it
samples: what it does, what it refuses, and that the result computes the same."""

import pytest

from workbench import workloads
from workbench.schedule import Schedule
from workbench.space import (
    AddRFactor,
    AutoInline,
    MultiLevelTiling,
    MultiLevelTilingWithIntrin,
    ParallelizeVectorizeUnroll,
    PostOrderApply,
    RandomComputeLocation,
    ReuseType,
    ScheduleRule,
    generate_design_space,
    sample,
)
from workbench.space.analysis import (
    AUTO_TENSORIZE,
    INLINE_RULE,
    PARALLEL,
    TILING_STRUCTURE,
    UNROLL_EXPLICIT,
    VECTORIZE,
    needs_multi_level_tiling,
    read_write_pattern,
)
from workbench.testing import check_numeric, check_trace_roundtrip, runs_here


def small(name):
    return workloads.get(name, **workloads.small(name))


def run(name, *rules, target="llvm -num-cores=2", seed=0):
    gen = PostOrderApply(rules=list(rules))
    return generate_design_space(small(name), target=target, seed=seed, space=gen)


def blocks(sch):
    return [b.name for b in sch.func.blocks()]


def check(sch, name):
    check_numeric(sch, name, **workloads.small(name))
    check_trace_roundtrip(sch)


def test_auto_inline_folds_elementwise_stages():
    (sch,) = run("CBR", AutoInline())
    assert blocks(sch) == ["root", "PaddedInput", "Conv2dOutput", "compute"]
    check(sch, "CBR")


@pytest.mark.parametrize(
    "name, kept",
    [
        ("C2D", "PadInput"),  # padding has a branch (Select)
        ("SFM", "T_softmax_exp"),  # exp is disallowed on CPU
        ("TBG", "query_T"),  # a transpose: read indices not ordered
    ],
)
def test_auto_inline_keeps(name, kept):
    (sch,) = run(name, AutoInline())
    assert kept in blocks(sch)


def test_auto_inline_into_producer_and_disabled():
    (sch,) = run("CBR", AutoInline(into_producer=True, into_consumer=False))
    # relu, then bn_add, bn_mul fold into their producer; bias_add's producer is a reduction
    assert blocks(sch) == ["root", "PaddedInput", "Conv2dOutput", "bias_add"]
    check(sch, "CBR")
    marked = Schedule(small("CBR"))
    marked.annotate("bn_mul", INLINE_RULE, "disable")
    (sch,) = generate_design_space(marked.func, space=PostOrderApply(rules=[AutoInline()]))
    assert blocks(sch) == ["root", "PaddedInput", "Conv2dOutput", "bn_mul", "compute"]


def test_read_write_pattern():
    func = small("TBG")
    q = func.block("query_T")
    assert read_write_pattern(q.reads[0], q.writes[0]) == (True, True, True, False)
    bias = small("CBR").block("bias_add")
    assert read_write_pattern(bias.reads[1], bias.writes[0]) == (True, False, True, True)


def test_multi_level_tiling_structure_and_forks():
    spaces = run("GMM", MultiLevelTiling(reuse_write=ReuseType("may", (1, 2), "global")))
    assert len(spaces) == 3
    plain, *cached = spaces
    assert blocks(plain) == ["root", "Z"] and all("Z_global" in blocks(s) for s in cached)
    assert plain.func.block("Z").annotations[TILING_STRUCTURE] == "SSRSRS"
    tiles = [i.decision for i in plain.trace if i.kind.name == "sample_perfect_tile"]
    assert [len(t) for t in tiles] == [4, 4, 4, 2]  # b, i, j: S S S S; k: R R
    loops = [l.loop_var.name for l in plain.func.loops()]
    assert loops == [
        "b_0",
        "i_0",
        "j_0",
        "b_1",
        "i_1",
        "j_1",
        "k_0",
        "b_2",
        "i_2",
        "j_2",
        "k_1",
        "b_3",
        "i_3",
        "j_3",
    ]
    for sch in spaces:
        check(sch, "GMM")


def test_multi_level_tiling_must_reuse_and_gpu_binding():
    spaces = run("GMM", MultiLevelTiling(reuse_write={"req": "must", "levels": [2], "scope": "global"}))
    assert len(spaces) == 1 and "Z_global" in blocks(spaces[0])
    gpu = PostOrderApply(
        rules=[MultiLevelTiling("SSSRRSRS", tile_binds=["blockIdx.x", "vthread.x", "threadIdx.x"])],
        postprocs=[],
        mutator_probs={},
    )
    (sch,) = generate_design_space(small("GMM"), target="cuda", space=gpu)
    tags = [l.thread_tag for l in sch.func.loops() if l.thread_tag]
    assert tags == ["blockIdx.x", "vthread.x", "threadIdx.x"]
    assert "meta_schedule.thread_extent_high_inclusive" in sch.func.block("Z").annotations


def test_multi_level_tiling_skips_blocks_without_reuse():
    func = small("CBR")
    assert not needs_multi_level_tiling(Schedule(func).index, func.block("bias_add"))
    (sch,) = run("NRM", MultiLevelTiling())  # C[b] = sum A[b, i, j]^2 reads every spatial iter
    assert TILING_STRUCTURE not in sch.func.block("C").annotations
    with pytest.raises(ValueError, match="string of 'S' and 'R'"):
        MultiLevelTiling("SXR")


def test_parallelize_vectorize_unroll_annotates_root():
    (sch,) = run("GMM", ParallelizeVectorizeUnroll(max_jobs_per_core=4))
    ann = sch.func.root.annotations
    assert ann[PARALLEL] == 8 and ann[VECTORIZE] == 64 and ann[UNROLL_EXPLICIT] in (0, 16, 64, 512)
    (elementwise,) = run("CBR", AutoInline(), ParallelizeVectorizeUnroll())
    assert UNROLL_EXPLICIT in elementwise.func.root.annotations
    from workbench.testing import elementwise_func

    spatial = generate_design_space(
        elementwise_func(), space=PostOrderApply(rules=[ParallelizeVectorizeUnroll()])
    )[0]
    assert UNROLL_EXPLICIT not in spatial.func.root.annotations  # no reduction: no unrolling


def test_random_compute_location_samples_and_moves():
    seen = set()
    for seed in range(6):
        (sch,) = run("C2D", RandomComputeLocation(), seed=seed)
        (inst,) = [i for i in sch.trace if i.kind.name == "sample_compute_location"]
        seen.add(inst.decision)
        check(sch, "C2D")
    assert len(seen) >= 2 and seen & {-2, -1} and any(d >= 0 for d in seen)


def test_add_rfactor_forks_little_parallel_reductions():
    spaces = run("NRM", AddRFactor(max_jobs_per_core=16))
    assert len(spaces) == 3  # rfactor on the outer part, on the inner part, original
    assert ["C_rf" in blocks(s) for s in spaces] == [True, True, False]
    for sch in spaces:
        check(sch, "NRM")
    assert len(run("GMM", AddRFactor())) == 1  # enough spatial parallelism: untouched


def test_multi_level_tiling_with_intrin_tensorizes_matching_blocks():
    shape = workloads.small("GMM")
    gen = PostOrderApply(
        rules=[MultiLevelTilingWithIntrin("avx512_f32_gemm_4x16x4"), ParallelizeVectorizeUnroll()]
    )
    (sketch,) = generate_design_space(small("GMM"), target="llvm -num-cores=2", space=gen)
    assert sketch.func.block("Z_o").annotations[AUTO_TENSORIZE] == "avx512_f32_gemm_4x16x4"
    for seed in range(3):
        cand, why = sample(small("GMM"), sketch, gen.postprocs, seed=seed)
        assert why is None
        assert any(
            b.alloc_buffers and b.alloc_buffers[0].scope == "local" for b in cand.func.blocks()
        )  # the micro-kernel's register accumulator
        check_numeric(cand, "GMM", target="llvm", **shape)
    # C1D's output channels (4) are not a multiple of the kernel's 16 lanes: left alone
    (sch,) = run("C1D", MultiLevelTilingWithIntrin("avx512_f32_gemm_4x16x4"))
    assert "conv1d_nlc_o" not in blocks(sch)


@pytest.mark.parametrize(
    "target,prefix",
    [
        ("llvm -mcpu=znver3 -num-cores=2", "avx2_f32_gemm_"),
        ("llvm -mcpu=skylake-avx512 -num-cores=2", "avx512_f32_gemm_"),
        ("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1", None),  # no GEMM kernels: untouched
    ],
)
def test_multi_level_tiling_with_intrin_picks_the_targets_kernel(target, prefix):
    """Without a name, the rule tensorizes with the first of the target's micro-kernels that
    fits (GMM 16^3: 8x16x16 on AVX-512, 6x16 does not divide 16 so 4x16x16 on AVX2)."""
    gen = PostOrderApply(rules=[MultiLevelTilingWithIntrin(), ParallelizeVectorizeUnroll()])
    (sketch,) = generate_design_space(small("GMM"), target=target, space=gen)
    if prefix is None:
        assert "Z_o" not in blocks(sketch)
        return
    chosen = sketch.func.block("Z_o").annotations[AUTO_TENSORIZE]
    assert chosen == prefix + ("8x16x16" if "avx512" in prefix else "4x16x16")
    cand, why = sample(small("GMM"), sketch, gen.postprocs, seed=0)
    assert why is None
    if runs_here(target):
        check_numeric(cand, "GMM", target=target, **workloads.small("GMM"))
    check_trace_roundtrip(cand)


def test_named_and_create():
    assert isinstance(ScheduleRule.named("AutoInline"), AutoInline)
    assert isinstance(ScheduleRule.named("add_rfactor", max_jobs_per_core=2), AddRFactor)
    assert len(ScheduleRule.create("llvm")) == 5
    with pytest.raises(KeyError, match="no ScheduleRule named"):
        ScheduleRule.named("no_such_rule")
