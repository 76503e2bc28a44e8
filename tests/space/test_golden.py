"""The GMM sketches with pinned decisions (as TVM tests its sketches): the trace in the paper's
shape — sample_perfect_tile -> split -> reorder in SSRSRS order, the write-cache forks, the
root annotations — and the program after the postprocessors.

Regenerate with ``pytest tests/space --update-golden`` (or ``WB_UPDATE_GOLDEN=1``)."""

import os
from pathlib import Path

from workbench import workloads
from workbench.space import PostOrderApply, replay
from workbench.testing import check_numeric

GOLDEN = Path(__file__).parent / "golden"

#: one decision per sampling instruction of each GMM sketch, in trace order:
#: tiles of b, i, j (4 levels each: S S S S of SSRSRS), of k (2 levels: R R), the unroll index
DECISIONS = [[1, 1, 1, 1], [2, 2, 1, 4], [1, 2, 1, 8], [4, 4], 2]


def golden(request, name: str, text: str) -> None:
    path = GOLDEN / name
    if request.config.getoption("--update-golden") or os.environ.get("WB_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing {path}; run pytest with --update-golden to create it"
    assert text == path.read_text(), f"{name} differs from the golden file"


def pinned(trace):
    out = trace.copy()
    for inst, value in zip([i for i in out.insts if i.kind.is_sampling], DECISIONS):
        out.pin(inst, value)
    return out


def test_gmm_sketches_golden(request):
    shape = workloads.small("GMM")
    func = workloads.get("GMM", **shape)
    space = PostOrderApply()
    space.initialize_with_target("llvm -num-cores=2")
    sketches = space.generate_design_space(func, seed=0)
    assert len(sketches) == 3  # no write cache; cache under tile level 1; under level 2
    for k, sketch in enumerate(sketches):
        trace = pinned(sketch.trace).simplified()
        sch, reason = replay(func, trace, space.postprocs)
        assert reason is None
        golden(request, f"gmm_sketch_{k}.txt", f"{trace}\n\n# after postprocessing:\n{sch.func}\n")
        check_numeric(sch, "GMM", target="llvm", **shape)
