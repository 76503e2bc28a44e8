"""Schedules that once made LLVM's optimizer run for minutes build in seconds.

``sfm_loop_idiom.json``: one of TVM's SFM records (softmax with the exp row recomputed inside
the normalisation loop) on which LLVM 22's loop-idiom recognition did not finish for 100-340 s;
the backend now turns that pass off (``llvm/jit.py``). The build runs in a child process with
a deadline, so a regression fails this test instead of hanging the suite.
"""

import os
import subprocess
import sys
import textwrap

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "slow_compile", "sfm_loop_idiom.json")

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import workbench as wb
    from workbench.tune.database import tvm
    job = json.load(open(sys.argv[1]))
    sch = tvm.replay(tvm.convert_trace(job["trace"]), wb.workloads.get(job["workload"]))
    kernel = wb.build(sch, "llvm")
    args = wb.workloads.random_args("SFM", seed=0)
    kernel(*args)
    np.testing.assert_allclose(args[-1], wb.workloads.reference("SFM")(*args[:-1]),
                               rtol=1e-4, atol=1e-6)
    print("built")
""")


def test_softmax_record_that_stalled_loop_idiom_builds_quickly():
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, DATA], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as err:
        raise AssertionError(
            "building the SFM record took over 120 s: LLVM's loop-idiom "
            "pass (or another) stalls again; see workbench/codegen/llvm/jit.py"
        ) from err
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("built")
