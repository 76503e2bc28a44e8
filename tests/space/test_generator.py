"""Space generators: PostOrderApply over every workload, forking, ScheduleFn, SpaceUnion, the
public ``generate_design_space`` and the traces of a design space."""

import json

import pytest

import workbench as wb
from workbench import workloads
from workbench.ir.verify import verify
from workbench.schedule import Schedule, Trace
from workbench.space import (
    AutoInline,
    MultiLevelTiling,
    PostOrderApply,
    ScheduleFn,
    ScheduleRule,
    SpaceGenerator,
    SpaceUnion,
    as_space,
    generate_design_space,
    post_order_blocks,
)
from workbench.testing import check_trace_roundtrip


def small(name):
    return workloads.get(name, **workloads.small(name))


@pytest.mark.parametrize("name", workloads.names()[:12])
def test_every_workload_has_a_design_space(name):
    spaces = generate_design_space(small(name), target="llvm", seed=0)
    assert spaces and all(isinstance(s, Schedule) for s in spaces)
    for sch in spaces:
        verify(sch.func)
        assert any(i.kind.is_sampling for i in sch.trace)  # every space has decisions


def test_traces_round_trip_through_json_and_python():
    for sch in generate_design_space(small("CBR"), target="llvm", seed=1):
        check_trace_roundtrip(sch)


def test_seed_draws_decisions_and_is_reproducible():
    func = small("GMM")
    decisions = lambda seed: [
        [i.decision for i in s.trace if i.kind.is_sampling] for s in generate_design_space(func, seed=seed)
    ]
    assert decisions(3) == decisions(3)
    assert any(decisions(s) != decisions(3) for s in range(4, 8))


def test_post_order_lists_children_before_parents():
    assert post_order_blocks(small("CBR")) == [
        "PaddedInput",
        "Conv2dOutput",
        "bias_add",
        "bn_mul",
        "bn_add",
        "compute",
        "root",
    ]


class Twice(ScheduleRule):
    """Forks every non-root block: the untouched copy and one with its first loop unrolled."""

    def apply(self, sch, block):
        loops = sch.get_loops(block)
        if not loops:
            return [sch]
        other = wb.space.fork(sch)
        other.unroll(loops[0])
        return [sch, other]


def test_forks_multiply_and_skip_removed_blocks():
    func = small("CBR")  # 6 blocks; AutoInline removes bias_add, bn_mul, bn_add
    gen = PostOrderApply(rules=[AutoInline(), Twice()])
    spaces = generate_design_space(func, space=gen)
    assert len(spaces) == 2**3  # PaddedInput, Conv2dOutput, compute
    assert len({str(s.func) for s in spaces}) == 8


def test_rules_by_name_and_filter():
    gen = PostOrderApply(rules=["multi_level_tiling"], block_filter=lambda block: block.name != "Z")
    assert generate_design_space(small("GMM"), space=gen)[0].trace.as_python().count("split") == 0
    assert isinstance(gen.rules[0], MultiLevelTiling)


def test_schedule_fn_is_a_template():
    def template(sch):
        i = sch.get_loops("Z")[1]
        sch.split(i, factors=sch.sample_perfect_tile(i, n=2, max_innermost_factor=4))

    spaces = generate_design_space(small("GMM"), space=ScheduleFn(template), seed=2)
    assert len(spaces) == 1 and spaces[0].trace[-2].kind.name == "sample_perfect_tile"
    forked = ScheduleFn(lambda sch: [sch, wb.space.fork(sch)])
    assert len(generate_design_space(small("GMM"), space=forked)) == 2
    with pytest.raises(TypeError, match="must return None"):
        generate_design_space(small("GMM"), space=ScheduleFn(lambda sch: 3))


def test_union_concatenates_spaces():
    union = SpaceUnion([PostOrderApply(), ScheduleFn(lambda sch: None)])
    spaces = generate_design_space(small("GMM"), space=union)
    assert len(spaces) == 3 + 1 and len(spaces[-1].trace) == 0
    assert isinstance(as_space([PostOrderApply(), lambda s: None]), SpaceUnion)
    assert isinstance(SpaceGenerator.named("post_order_apply"), PostOrderApply)
    with pytest.raises(ValueError):
        SpaceUnion([])


def test_generator_carries_target_defaults():
    gen = PostOrderApply()
    gen.initialize_with_target("llvm -num-cores=3")
    names = [type(r).__name__ for r in gen.rules]
    assert names == [
        "AutoInline",
        "AddRFactor",
        "MultiLevelTiling",
        "ParallelizeVectorizeUnroll",
        "RandomComputeLocation",
    ]
    assert gen.rules[3].max_parallel_extent == 48
    assert [type(p).__name__ for p in gen.postprocs] == [
        "DisallowDynamicLoop",
        "RewriteParallelVectorizeUnroll",
        "RewriteReductionBlock",
        "RewriteTensorize",
    ]
    assert abs(sum(gen.mutator_probs.values()) - 1.0) < 1e-9


def test_public_api():
    assert wb.generate_design_space is generate_design_space
    trace_json = json.dumps(wb.generate_design_space(small("GMM"))[0].trace.as_json())
    assert Trace.from_json(trace_json)
