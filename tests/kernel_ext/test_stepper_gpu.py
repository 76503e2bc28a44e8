"""The stepper on a GPU schedule: thread bindings and storage scopes show in every step."""

import workbench as wb
from kernel_ext.widgets.stepper import LoopNestStepper


def test_stepper_shows_thread_bindings_and_scopes():
    func = wb.workloads.get("GMM", b=1, n=32, m=32, k=32)
    sch = wb.generate_design_space(func, target="cuda", seed=0)[0]
    stepper = LoopNestStepper(sch)
    last = stepper.loop_nest_html(stepper.n_steps - 1)
    for piece in (
        'thread="blockIdx.x"',
        'thread="vthread.x"',
        'thread="threadIdx.x"',
        'scope="shared"',
        'scope="local"',
    ):
        assert piece in stepper.text()
        assert piece.split('"')[1] in last
    binds = [k for k in range(1, stepper.n_steps) if "bind changed" in stepper.describe(k)]
    assert len(binds) == 3
