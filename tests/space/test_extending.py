"""The user extensions of ``docs/extending.md`` — the power-of-two tiling rule and the
double-or-halve mutator — run as written there: each is under 40 lines, plugs into
PostOrderApply with no engine change, and the search loop (mutate, replay, postprocess)
explores its decisions. Then the traps of code ported from TVM MetaSchedule courses (issue
14): a rule returning ``[]``, kind names in TVM's spelling, decisions of non-sampling
instructions, writing into ``trace.decisions``, a mistyped mutator name; and the doc's complete
course-mutator script, run as it stands."""

import random
import re
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench import workloads
from workbench.schedule.instruction import get_kind
from workbench.space import (
    AutoInline,
    MutateUnroll,
    Mutator,
    ParallelizeVectorizeUnroll,
    PostOrderApply,
    ScheduleRule,
    generate_design_space,
    replay,
    sample,
)
from workbench.testing import check_numeric
from workbench.tune.database.tvm import KIND_MAP

DOC = Path(__file__).parents[2] / "docs" / "extending.md"
#: the first line of a doc block that is a whole script (run by its own test)
SCRIPT = "# a complete script"


def doc_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def doc_classes() -> dict:
    """Execute the class definitions of the doc's Python blocks; returns name -> class and
    the number of lines of each class."""
    namespace: dict = {}
    sizes = {}
    for block in doc_blocks():
        if "class " not in block or block.startswith(SCRIPT):
            continue
        exec(compile(block, str(DOC), "exec"), namespace)
        for name, body in re.findall(r"^class (\w+).*?:\n((?:    .*\n|\n)*)", block, re.M):
            sizes[name] = 1 + len(body.rstrip("\n").splitlines())
    return namespace, sizes


@pytest.fixture(scope="module")
def user():
    namespace, sizes = doc_classes()
    return namespace, sizes


def make_space(user):
    ns, _ = user
    return PostOrderApply(
        rules=[AutoInline(), ns["PowerOfTwoTiling"](), ParallelizeVectorizeUnroll()],
        mutator_probs={ns["DoubleOrHalveTile"](): 0.8, MutateUnroll(): 0.2},
    )


def test_each_is_under_40_lines(user):
    _, sizes = user
    assert set(sizes) == {"PowerOfTwoTiling", "DoubleOrHalveTile"}
    assert all(n < 40 for n in sizes.values()), sizes


def test_rule_plugs_into_post_order_apply(user):
    ns, _ = user
    shape = workloads.small("GMM")
    func = workloads.get("GMM", **shape)
    (sch,) = generate_design_space(func, target="llvm", space=make_space(user), seed=0)
    sizes = [i for i in sch.trace if i.kind.name == "sample_categorical"][:2]
    assert [i.args["candidates"] for i in sizes] == [[2, 4, 8, 16]] * 2  # i and j of 16
    names = [l.loop_var.name for l in sch.func.loops()]
    assert names == ["b", "i_0", "j_0", "k", "i_1", "j_1"]
    check_numeric(sch, "GMM", target="llvm", **shape)
    assert isinstance(ScheduleRule.named("power_of_two_tiling"), ns["PowerOfTwoTiling"])


@pytest.mark.parametrize("name", ["GMM", "C1D", "NRM"])
def test_samples_of_the_user_space_are_valid(user, name):
    shape = workloads.small(name)
    func = workloads.get(name, **shape)
    gen = make_space(user)
    (sketch,) = generate_design_space(func, space=gen, seed=1)
    for seed in range(3):
        cand, why = sample(func, sketch, gen.postprocs, seed=seed)
        assert why is None
        check_numeric(cand, name, target="llvm", **shape)


def test_search_loop_explores_with_the_user_mutator(user):
    """What the evolutionary search does with the space's mutators: pick one by probability,
    mutate the best trace, replay it with the postprocessors, measure (here: check)."""
    shape = workloads.small("GMM")
    func = workloads.get("GMM", **shape)
    gen = make_space(user)
    trace = generate_design_space(func, space=gen, seed=2)[0].trace.copy()
    first = next(k for k, i in enumerate(trace) if i.kind.name == "sample_categorical")
    trace.pin(first)  # the user fixes the tile of i; the search may change the rest
    rng = random.Random(0)
    mutators, probs = list(gen.mutator_probs), list(gen.mutator_probs.values())
    seen = set()
    for _ in range(12):
        new = rng.choices(mutators, weights=probs)[0].apply(trace, rng)
        if new is None:
            continue
        assert new[first].decision == trace[first].decision and new[first].pinned
        cand, why = replay(func, new, gen.postprocs)
        assert why is None
        check_numeric(cand, "GMM", target="llvm", **shape)
        seen.add(tuple(i.decision for i in new if i.kind.is_sampling))
        trace = new
    assert len(seen) >= 3


# --- code ported from TVM MetaSchedule courses (issue 14) ------------------------------------


def matmul(n=16):
    A = wb.placeholder((n, n), "float32", name="A")
    B = wb.placeholder((n, n), "float32", name="B")
    k = wb.reduce_axis(n, name="k")
    C = wb.compute((n, n), lambda i, j: wb.sum(A[i, k] * B[k, j], axis=k), name="C")
    return wb.create_func([A, B, C], name="matmul")


class MyCustomTiling(ScheduleRule):
    """The course's rule as written there: one fork per power-of-two split of each loop of
    the block, and so ``[]`` for a block without loops (the root)."""

    def apply(self, sch, block):
        candidates = []
        for loop in sch.get_loops(block):
            extent = sch.get(loop).extent.value
            for f in [2**i for i in range(1, 10) if 2**i <= extent]:
                new_sch = sch.copy()
                new_sch.split(loop, factors=[None, f])
                candidates.append(new_sch)
        return candidates


class OnlyTheRoot(ScheduleRule):
    def apply(self, sch, block):
        return [sch] if not sch.get_loops(block) else []


def test_a_rule_returning_no_schedule_is_an_error_naming_rule_and_block():
    with pytest.raises(
        ValueError,
        match=re.escape(
            "schedule rule MyCustomTiling returned no schedule for block 'root' (the root "
            "block: rules see it too); return [sch] to leave a block unchanged"
        ),
    ):
        generate_design_space(matmul(), space=PostOrderApply(rules=[MyCustomTiling()]))
    with pytest.raises(
        ValueError,
        match=re.escape(
            "schedule rule OnlyTheRoot returned no schedule for block 'C'; return [sch] to "
            "leave a block unchanged"
        ),
    ):
        generate_design_space(matmul(), space=PostOrderApply(rules=[OnlyTheRoot()]))


def test_the_course_rule_passing_the_root_through_forks_the_space():
    class Fixed(MyCustomTiling):
        def apply(self, sch, block):
            return super().apply(sch, block) or [sch]

    spaces = generate_design_space(matmul(), space=PostOrderApply(rules=[Fixed()]))
    assert len(spaces) == 3 * 4  # i, j, k of 16: splits by 2, 4, 8, 16
    assert all(sum(i.kind.name == "split" for i in s.trace) == 1 for s in spaces)


def test_kind_names_accept_tvm_spelling():
    split, tile = get_kind("split"), get_kind("sample_perfect_tile")
    assert split.name == "split" and split.tvm_name == "Split"
    assert split.matches("Split") and split.matches("split")
    assert not split.matches("Fuse") and not split.matches("SPLIT")
    assert tile.tvm_name == "SamplePerfectTile" and tile.matches("SamplePerfectTile")
    assert get_kind("rfactor").tvm_name == "RFactor"
    assert get_kind("get_block").matches("GetBlock") and get_kind("get_block").matches("GetSBlock")
    for tvm_kind, (wb_kind, *_rest) in KIND_MAP.items():  # the importer's table agrees
        assert get_kind(wb_kind).matches(tvm_kind), (tvm_kind, wb_kind)
    sch = wb.Schedule(matmul(), seed=0)
    i, _j, _k = sch.get_loops("C")
    sch.split(i, factors=sch.sample_perfect_tile(i, n=2))
    found = [inst for inst in sch.trace.insts if inst.kind.matches("SamplePerfectTile")]
    assert found == list(wb.space.free_sampling(sch.trace, "SamplePerfectTile"))
    assert len(found) == 1


def test_decisions_belong_to_sampling_instructions_and_are_read_only():
    sch = wb.Schedule(matmul(), seed=0)
    i, _j, _k = sch.get_loops("C")
    sch.split(i, factors=sch.sample_perfect_tile(i, n=2, max_innermost_factor=8))
    trace = sch.trace
    tile, split = (next(x for x in trace if x.kind.name == name) for name in ("sample_perfect_tile", "split"))
    assert trace.decisions[tile] == tile.decision
    with pytest.raises(
        KeyError,
        match=r"split samples nothing, so it has no decision.*"
        r"its inputs come from sample_perfect_tile \(v\d+, v\d+\)",
    ):
        trace.decisions[split]
    copy = trace.copy()
    with pytest.raises(TypeError, match=r"read-only.*with_decision"):
        copy.decisions[tile] = [2, 8]
    new = trace.with_decision(tile, [2, 8])
    assert new.decisions[new[trace.insts.index(tile)]] == [2, 8]
    assert trace.decisions[tile] == tile.decision  # the original is unchanged


def test_with_decision_remove_postproc_drops_the_postprocessing_part():
    func = workloads.get("GMM", **workloads.small("GMM"))
    gen = PostOrderApply()
    sketch = generate_design_space(func, target="llvm", space=gen, seed=0)[0]
    cand, why = sample(func, sketch, gen.postprocs, seed=0)
    assert why is None
    kinds = [i.kind.name for i in cand.trace]
    assert "enter_postproc" in kinds
    tile = next(i for i in cand.trace if i.kind.matches("SamplePerfectTile"))
    kept = cand.trace.with_decision(tile, tile.decision)
    assert len(kept) == len(cand.trace)
    cut = cand.trace.with_decision(tile, tile.decision, remove_postproc=True)
    assert [i.kind.name for i in cut] == kinds[: kinds.index("enter_postproc")]


def test_a_mutator_that_does_not_exist_is_answered_with_the_mutators_that_do():
    assert Mutator.named("mutate_auto_inline").__class__.__name__ == "MutateAutoInline"
    with pytest.raises(
        AttributeError,
        match="no mutator MutateTileSise; workbench's mutators: MutateAutoInline, MutateComputeLocation",
    ):
        wb.space.MutateTileSise  # noqa: B018  (the attribute access is what raises)
    assert not hasattr(wb.space.mutators, "something_else")


def test_the_course_mutator_script_runs(capsys):
    """The doc's complete script, as it stands: it mutates one tiling, replays the mutant
    with the postprocessors and checks the kernel against numpy (its own asserts)."""
    (script,) = [b for b in doc_blocks() if b.startswith(SCRIPT)]
    namespace: dict = {"__name__": "__doc_script__"}
    exec(compile(script, str(DOC), "exec"), namespace)
    ((old, new),) = namespace["changed"]  # one tiling changed: a factor of 2 moved
    assert sorted(n / o for o, n in zip(old, new) if o != n) == [0.5, 2.0]
    assert str(namespace["changed"]) in capsys.readouterr().out
    assert "remove_postproc=True" in script and 'matches("SamplePerfectTile")' in script


def test_the_course_mutator_only_makes_valid_tilings():
    """Pinned seeds: every mutant of 20 keeps perfect tilings within max_innermost_factor,
    replays through the postprocessors, and computes the matmul."""
    (script,) = [b for b in doc_blocks() if b.startswith(SCRIPT)]
    namespace: dict = {"__name__": "__doc_script__"}
    exec(compile(script.split("\n\nA = wb.placeholder")[0], str(DOC), "exec"), namespace)
    mutator = namespace["MyTileMutator"]()
    func = matmul(32)
    gen = PostOrderApply(mutator_probs={mutator: 1.0})
    trace = generate_design_space(func, target="llvm", space=gen, seed=1)[0].trace
    rng = random.Random(0)
    a, b = (np.random.default_rng(s).random((32, 32), dtype=np.float32) for s in (0, 1))
    for step in range(20):
        new = mutator.apply(trace, rng)
        assert new is not None
        cand, why = replay(func, new, gen.postprocs)
        assert why is None, why
        if step % 5 == 0:
            c = np.zeros((32, 32), "float32")
            wb.build(cand, target="llvm")(a, b, c)
            np.testing.assert_allclose(c, a @ b, rtol=1e-4)
        trace = new
