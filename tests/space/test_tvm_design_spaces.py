"""The design spaces against TVM 0.27's: for each workload ported from TVM's te_workload, on an
llvm and a cuda target, every sketch TVM's default rules generate (tests/data/tvm/
design_spaces.json, written by make_design_spaces.py with TVM's interpreter) is a sketch of the
workbench's space: the same instructions in the same order (queries included), and TVM's
decisions replayed on the workbench's sketch give the program TVM's trace gives.

Then the three places where the spaces used to differ, checked on their own:

- CPU write reuse (conv + bias + BN + ReLU): the single elementwise consumer is computed at the
  tile (``get_consumers`` + ``reverse_compute_at``), no ``cache_write`` copy is added;
- CUDA unroll candidates ``[0, 16, 32, 64, 128, 256, 512, 1024]``;
- CUDA reductions: ``AutoBind`` fuses before binding, and softmax's max goes into the row
  loop its two consumers share (one kernel per row for max, sum and normalization).
"""

import json
from pathlib import Path

import pytest

from workbench import workloads
from workbench.ir.structural import structural_equal
from workbench.schedule import Schedule
from workbench.space import (
    ParallelizeVectorizeUnroll,
    PostOrderApply,
    default_postprocs,
    default_rules,
    replay,
)
from workbench.testing import check_numeric, check_trace_roundtrip
from workbench.tune.database import tvm as tvmdb

DATA = json.loads((Path(__file__).parent.parent / "data" / "tvm" / "design_spaces.json").read_text())
CASES = {f"{c['workload']}-{c['kind']}": c for c in DATA["cases"]}


def design_space(name: str, target: str, **shape) -> list[Schedule]:
    space = PostOrderApply()
    space.initialize_with_target(target)
    return space.generate_design_space(workloads.get(name, **shape), seed=0)


def finished(sch: Schedule, target: str) -> Schedule:
    """The sketch with its sampled decisions, postprocessed."""
    posts = default_postprocs(target.split()[0])
    for p in posts:
        p.initialize_with_target(target)
    out, why = replay(sch.trace.base_func, sch.trace, posts)
    assert why is None, why
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_tvm_sketches_are_workbench_sketches(case):
    c = CASES[case]
    func = workloads.get(c["workload"])
    ours = [s.trace for s in design_space(c["workload"], c["target"])]
    assert len(ours) == len(c["sketches"])
    matched = set()
    for k, data in enumerate(c["sketches"]):
        theirs = tvmdb.convert_trace(data)
        m = tvmdb.match_sketch(theirs, ours)
        assert m.index is not None, (
            f"TVM's sketch {k}: no workbench sketch has its instructions; the closest ({m.closest}) "
            f"differs at instruction {m.position}: TVM {m.theirs!r}, workbench {m.ours!r}"
        )
        matched.add(m.index)
        mine = Schedule(func)
        tvmdb.with_decisions(ours[m.index], theirs).apply_to_schedule(mine)
        ref = Schedule(func)
        theirs.apply_to_schedule(ref)
        assert structural_equal(mine.func, ref.func)
    assert len(matched) == len(ours)  # one to one


def rendered(sch: Schedule) -> str:
    return str(sch.trace)


def test_cpu_write_reuse_places_the_elementwise_consumer():
    sketches = design_space("CBR", "llvm -num-cores=16")
    assert len(sketches) == 3
    texts = [rendered(s) for s in sketches]
    assert not any("cache_write" in t for t in texts)  # no copy stage in front of the epilogue
    assert all("get_consumers(block=b1)" in t for t in texts)
    placed = [s for s in sketches if "reverse_compute_at" in rendered(s)]
    assert len(placed) == 2  # at tile level 1 and 2; the third leaves it at the root
    for sch in placed:
        # the ReLU block (bias, BN inlined into it) runs inside the conv's spatial tile loops
        epilogue = sch.get(sch.get_block("compute"))
        conv_loops = sch.index.loops_above(sch.get(sch.get_block("Conv2dOutput")))
        assert sch.index.loops_above(epilogue)[0] is conv_loops[0]
        assert sorted(b.name for b in sch.func.blocks()) == [
            "Conv2dOutput",
            "PaddedInput",
            "compute",
            "root",
        ]


def test_cpu_write_reuse_placed_epilogue_computes_cbr():
    shape = workloads.small("CBR")
    for sch in design_space("CBR", "llvm -num-cores=2", **shape):
        done = finished(sch, "llvm -num-cores=2")
        check_numeric(done, "CBR", target="llvm", **shape)
        check_trace_roundtrip(done)


def test_cpu_write_reuse_still_caches_a_consumer_that_is_no_epilogue():
    # GMM's output has no consumer: the may-reuse forks are no cache, cache at level 1, level 2
    texts = [rendered(s) for s in design_space("GMM", "llvm -num-cores=16")]
    assert sum("cache_write" in t for t in texts) == 2
    assert all("get_consumers(block=b0)" in t for t in texts)


def test_cuda_unroll_candidates_are_tvms():
    (rule,) = [r for r in default_rules("cuda") if isinstance(r, ParallelizeVectorizeUnroll)]
    assert rule.unroll_max_steps == [0, 16, 32, 64, 128, 256, 512, 1024]
    (cpu,) = [r for r in default_rules("llvm") if isinstance(r, ParallelizeVectorizeUnroll)]
    assert cpu.unroll_max_steps == [0, 16, 64, 512]
    (sketch,) = design_space("GMM", "cuda")
    (unroll,) = [
        i for i in sketch.trace.insts if i.kind.name == "sample_categorical" and 1024 in i.args["candidates"]
    ]
    assert unroll.args["candidates"] == [0, 16, 32, 64, 128, 256, 512, 1024]


def test_cuda_auto_bind_fuses_before_binding():
    # NRM's untouched sketch: each block's spatial loop is fused (one loop, as TVM), then split
    sketches = design_space("NRM", "cuda")
    plain = next(s for s in sketches if "threadIdx.x" in rendered(s) and "set_scope" not in rendered(s))
    insts = [i.kind.name for i in plain.trace.insts]
    for k, name in enumerate(insts):
        if name == "split":
            assert insts[k - 1] == "fuse"


def test_cuda_softmax_max_shares_the_row_loop_of_its_consumers():
    sketches = design_space("SFM", "cuda")
    fused = [s for s in sketches if rendered(s).count("set_scope") == 2]
    assert len(fused) == 1
    (sch,) = fused
    idx = sch.index
    rows = {
        name: idx.loops_above(sch.get(sch.get_block(name)))[0]
        for name in ("T_softmax_maxelem", "T_softmax_expsum", "T_softmax_norm")
    }
    assert rows["T_softmax_maxelem"] is rows["T_softmax_expsum"] is rows["T_softmax_norm"]
    assert rows["T_softmax_norm"].thread_tag == "blockIdx.x"
    # the max reuses the sum's thread count instead of the one it sampled
    text = rendered(sch)
    assert text.count('thread_axis="threadIdx.x"') == 3


def test_cuda_softmax_fused_rows_compute_softmax_on_the_emulator():
    shape = dict(m=8, n=256)
    (sch,) = [s for s in design_space("SFM", "cuda", **shape) if rendered(s).count("set_scope") == 2]
    done = finished(sch, "cuda")
    check_numeric(done, "SFM", target="cuda-emulate", rtol=1e-3, atol=1e-3, **shape)
    check_trace_roundtrip(done)


@pytest.mark.parametrize("name", ["C1D", "C2D", "DEP", "GMM", "NRM", "SFM"])
def test_tvm_tuned_records_are_points_of_the_space(name):
    # records of TVM tunes (tests/data/tvm/<name>): each is a sketch of workbench's space with
    # TVM's decisions, and workbench's postprocessors finish it into TVM's program (TVM's
    # RewriteParallelVectorizeUnroll order and unroll placement)
    directory = Path(__file__).parent.parent / "data" / "tvm" / name
    _, module = json.loads((directory / tvmdb.WORKLOAD_FILE).read_text().splitlines()[0])
    wl, func = tvmdb.match_workload(tvmdb.module_signature(module), tvmdb.default_candidates())
    assert wl == name
    spaces = {}
    lines = [json.loads(line) for line in (directory / tvmdb.RECORD_FILE).read_text().splitlines()]
    for _, (trace, _secs, target, _args) in lines:
        wb_target = tvmdb.convert_target(target)
        if wb_target not in spaces:
            space = PostOrderApply()
            space.initialize_with_target(wb_target)
            spaces[wb_target] = (space, [s.trace for s in space.generate_design_space(func, seed=0)])
        space, sketches = spaces[wb_target]
        cov = tvmdb.coverage(tvmdb.convert_trace(trace), func, sketches, space.postprocs)
        assert cov.match.index is not None, cov.match
        assert cov.program == "same", cov.why
