"""Sampled inlining (workbench only, TVM has neither): ``AutoInline(sample_unsure=True)`` draws
"keep or inline" for the stages where inlining is a trade-off, records it as a
``sample_categorical`` consumed by ``compute_inline_if``, and ``MutateAutoInline`` flips it.
Both outcomes build on llvm and match numpy; the traces round-trip."""

import random

import pytest

import workbench as wb
from workbench import workloads
from workbench.ir import dsl
from workbench.schedule import Schedule
from workbench.space import AutoInline, MutateAutoInline, PostOrderApply, default_rules
from workbench.space.mutators.mutate_auto_inline import inline_decisions
from workbench.space.postprocs import default_postprocs, run_postprocs
from workbench.testing import check_numeric, check_trace_roundtrip


def cbr():
    return workloads.get("CBR", **workloads.small("CBR"))


def sampled_space(func, seed=0):
    rules = [AutoInline(sample_unsure=True), *default_rules("llvm")[1:]]
    gen = PostOrderApply(rules=rules, mutator_probs={MutateAutoInline(): 1.0})
    gen.initialize_with_target("llvm -num-cores=2")
    return gen, gen.generate_design_space(func, seed=seed)


def replayed(func, trace):
    sch = Schedule(func)
    trace.apply_to_schedule(sch)
    return sch


def test_the_unsure_stage_gets_a_categorical_decision_and_the_sure_ones_are_inlined():
    _, spaces = sampled_space(cbr())
    text = str(spaces[0].trace)
    # bias_add reads the convolution's output: a trade-off; bn_mul and bn_add are plain gains
    assert "sch.compute_inline(block=b4)" in text and "sch.compute_inline(block=b3)" in text
    (inst,) = inline_decisions(spaces[0].trace)
    assert inst.args["candidates"] == [0, 1] and inst.args["probs"] == [0.5, 0.5]
    assert (
        f"sch.compute_inline_if(block=b2, inline={text.split(' = sch.sample_categorical')[0].split()[-1]})"
        in text
    )
    assert 'b2 = sch.get_block(name="bias_add")' in text


def test_the_default_space_keeps_tvms_deterministic_rule():
    gen = PostOrderApply()
    gen.initialize_with_target("llvm -num-cores=2")
    for sch in gen.generate_design_space(cbr(), seed=0):
        assert "compute_inline_if" not in str(sch.trace)


@pytest.mark.parametrize("decision", [0, 1])
def test_both_outcomes_build_match_numpy_and_round_trip(decision):
    func = cbr()
    _, spaces = sampled_space(func)
    trace = spaces[-1].trace  # the sketch with cache_write: the epilogue fused at the tile
    (inst,) = inline_decisions(trace)
    sch = replayed(func, trace.with_decision(inst, decision, remove_postproc=True))
    assert ("bias_add" in [b.name for b in sch.func.blocks()]) == (decision == 0)
    assert run_postprocs(sch, default_postprocs("llvm")) is None
    check_numeric(sch, "CBR", target="llvm", **workloads.small("CBR"))
    check_trace_roundtrip(sch)


def test_the_mutator_flips_the_decision():
    func = cbr()
    gen, spaces = sampled_space(func)
    (mutator,) = gen.mutator_probs
    for sch in spaces:
        (before,) = inline_decisions(sch.trace)
        mutated = mutator.apply(sch.trace, random.Random(0))
        (after,) = inline_decisions(mutated)
        assert after.decision == 1 - before.decision
        assert "enter_postproc" not in [i.kind.name for i in mutated]
        again = mutator.apply(mutated, random.Random(0))
        assert inline_decisions(again)[0].decision == before.decision
        replayed(func, mutated)  # the flipped trace replays


def test_the_mutator_finds_nothing_without_sampled_inlining_or_when_pinned():
    func = cbr()
    gen = PostOrderApply()
    gen.initialize_with_target("llvm -num-cores=2")
    mutator = MutateAutoInline()
    mutator.initialize_with_func(func)
    assert mutator.apply(gen.generate_design_space(func, seed=0)[0].trace, random.Random(0)) is None
    _, spaces = sampled_space(func)
    sch = replayed(func, spaces[0].trace)
    (inst,) = inline_decisions(sch.trace)
    pinned = sch.trace.copy()
    pinned.pin(inst)
    assert mutator.apply(pinned, random.Random(0)) is None


def _chain(reduction_consumer=False, two_consumers=False):
    A = dsl.placeholder((8, 8), "float32", name="A")
    B = dsl.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    if reduction_consumer:
        k = dsl.reduce_axis(8, name="k")
        C = dsl.compute((8, 8), lambda i, j: dsl.sum(B[i, k] * A[k, j], axis=k), name="C")
        return dsl.create_func([A, C], name="f")
    C = dsl.compute((8, 8), lambda i, j: B[i, j] + 1.0, name="C")
    if two_consumers:
        D = dsl.compute((8, 8), lambda i, j: B[i, j] * C[i, j], name="D")
        return dsl.create_func([A, D], name="f")
    return dsl.create_func([A, C], name="f")


@pytest.mark.parametrize(
    "kw, unsure", [({}, False), ({"reduction_consumer": True}, True), ({"two_consumers": True}, True)]
)
def test_which_stages_are_unsure(kw, unsure):
    sch = Schedule(_chain(**kw))
    assert AutoInline.unsure(sch, sch.get(sch.get_block("B"))) is unsure
    rule = AutoInline(sample_unsure=True)
    rule.apply(sch, sch.get_block("B"))
    kinds = [i.kind.name for i in sch.trace]
    assert ("compute_inline_if" in kinds) is unsure and ("compute_inline" in kinds) is not unsure


def test_compute_inline_if_refuses_a_value_other_than_0_or_1_and_an_output_block():
    sch = Schedule(_chain())
    before = sch.func
    flag = sch.sample_categorical(candidates=[2], probs=[1.0])
    with pytest.raises(wb.ScheduleError, match="compute_inline_if.*must be 0 \\(keep\\) or 1"):
        sch.compute_inline_if(sch.get_block("B"), flag)
    assert sch.func is before
    one = sch.sample_categorical(candidates=[1], probs=[1.0])
    with pytest.raises(wb.ScheduleError, match="compute_inline_if"):
        sch.compute_inline_if(sch.get_block("C"), one)  # C writes the function's output
    assert wb.structural_equal(sch.func, before)
    keep = sch.sample_categorical(candidates=[0], probs=[1.0])
    sch.compute_inline_if(sch.get_block("C"), keep)  # kept: nothing to check
    assert wb.structural_equal(sch.func, before)


def test_inline_prob_must_be_a_probability_strictly_inside():
    with pytest.raises(ValueError, match="inline_prob"):
        AutoInline(sample_unsure=True, inline_prob=1.0)
