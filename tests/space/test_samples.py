"""Random points of every workload's design space, with the default postprocessors: each one
builds with the llvm backend and matches numpy, or a postprocessor rejected it with a reason.
``bench/space.py`` runs 200 per workload and prints the rejection rates; the suite checks 38 per
workload (2,400 builds at about 0.6 s each on a 2-core Zen 1 would take longer than the rest of
the suite)."""

import pytest

from workbench import workloads
from workbench.space import PostOrderApply, sample
from workbench.testing import check_numeric

SAMPLES = 6  # per workload in CI: compiling unrolled candidates takes up to ~1 s each
MORE_SAMPLES = 32  # the slow test's, other seeds


def check_samples(name: str, n: int, seed: int = 0) -> dict:
    shape = workloads.small(name)
    func = workloads.get(name, **shape)
    space = PostOrderApply()
    space.initialize_with_target("llvm")
    sketches = space.generate_design_space(func, seed=seed)
    rejected: dict = {}
    for k in range(n):
        cand, reason = sample(func, sketches[k % len(sketches)], space.postprocs, seed=seed + k)
        if cand is None:
            assert reason
            rejected[reason] = rejected.get(reason, 0) + 1
            continue
        check_numeric(cand, name, target="llvm", **shape)
    return rejected


@pytest.mark.parametrize("name", workloads.names()[:12])
def test_samples_build_and_match_numpy(name):
    check_samples(name, SAMPLES)


@pytest.mark.slow
@pytest.mark.parametrize("name", workloads.names()[:12])
def test_more_samples(name):
    rejected = check_samples(name, MORE_SAMPLES, seed=1000)
    assert sum(rejected.values()) < MORE_SAMPLES  # a space that rejects everything is a bug
