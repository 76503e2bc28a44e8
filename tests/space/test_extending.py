"""The user extensions of ``docs/extending.md`` — the power-of-two tiling rule and the
double-or-halve mutator — run as written there: each is under 40 lines, plugs into
PostOrderApply with no engine change, and the search loop (mutate, replay, postprocess)
explores its decisions."""
import random
import re
from pathlib import Path

import pytest

from workbench import workloads
from workbench.space import (AutoInline, MutateUnroll, ParallelizeVectorizeUnroll,
                             PostOrderApply, ScheduleRule, generate_design_space, replay, sample)
from workbench.testing import check_numeric

DOC = Path(__file__).parents[2] / "docs" / "extending.md"


def doc_classes() -> dict:
    """Execute the class definitions of the doc's Python blocks; returns name -> class and
    the number of lines of each class."""
    namespace: dict = {}
    sizes = {}
    for block in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S):
        if "class " not in block:
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
    return PostOrderApply(rules=[AutoInline(), ns["PowerOfTwoTiling"](),
                                 ParallelizeVectorizeUnroll()],
                          mutator_probs={ns["DoubleOrHalveTile"](): 0.8, MutateUnroll(): 0.2})


def test_each_is_under_40_lines(user):
    _, sizes = user
    assert set(sizes) == {"PowerOfTwoTiling", "DoubleOrHalveTile"}
    assert all(n < 40 for n in sizes.values()), sizes


def test_rule_plugs_into_post_order_apply(user):
    ns, _ = user
    shape = workloads.small("GMM")
    func = workloads.get("GMM", **shape)
    sch, = generate_design_space(func, target="llvm", space=make_space(user), seed=0)
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
    sketch, = generate_design_space(func, space=gen, seed=1)
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
