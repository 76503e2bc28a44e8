"""TVM's side of bench/runner_overhead.py; run by the TVM virtualenv's Python.

    python bench/_tvm_runner.py JOBS.json

``JOBS.json``: ``{"target": {"kind": "llvm", "mcpu": ..., "num-cores": N}, "number", "repeat",
"min_repeat_ms", "jobs": [{"workload", "text", "data"}]}``: a workload of ``bench/_tvm_replay.py``'s table
(``te_workload`` at the paper's shape), workbench's export of a trace as TVM Python (run on a
fresh ``tvm.s_tir.Schedule`` of it, ``sch`` in scope) and the ``.npy`` files of its parameters.
Each job is built with ``tvm.compile`` and timed the way MetaSchedule's local runner times a
candidate: the module's ``time_evaluator`` (a native loop of ``number`` calls per repeat, grown
until a repeat lasts ``min_repeat_ms``), no cache flush. Prints one JSON line: per workload the
seconds of each repeat, or the error. Imports neither workbench nor torch.
"""

import json
import os
import sys

sys.modules.setdefault("torch", None)  # tvm_ffi imports torch eagerly when it is installed
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _tvm_replay import WORKLOADS  # noqa: E402  (bench/_tvm_replay.py)


def main(path):
    import tvm
    from tvm import s_tir, te
    from tvm.s_tir.meta_schedule.testing import te_workload

    with open(path) as f:
        spec = json.load(f)
    target = tvm.target.Target(spec["target"])
    dev = tvm.cpu()
    out = {"tvm": tvm.__version__, "results": {}}
    for job in spec["jobs"]:
        name = job["workload"]
        try:
            te_name, args = WORKLOADS[name]
            sch = s_tir.Schedule(te.create_prim_func(list(getattr(te_workload, te_name)(*args))))
            exec(compile(job["text"], "<exported trace>", "exec"), {"sch": sch})
            lib = tvm.compile(sch.mod, target=target)
            lib = lib.jit() if hasattr(lib, "jit") else lib  # 0.27: an Executable around the module
            tensors = [tvm.runtime.tensor(np.load(p), dev) for p in job["data"]]
            timer = lib.time_evaluator(
                lib.entry_name,
                dev,
                number=spec["number"],
                repeat=spec["repeat"],
                min_repeat_ms=spec["min_repeat_ms"],
            )
            out["results"][name] = {"seconds": list(timer(*tensors).results)}
        except Exception as exc:  # report it, go on with the next workload
            out["results"][name] = {"error": f"{type(exc).__name__}: {str(exc).strip()[-300:]}"}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
