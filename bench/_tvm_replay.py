"""TVM's side of bench/tvm_export.py (and of the export test); run by the TVM virtualenv's Python.

    python bench/_tvm_replay.py JOBS.json

``JOBS.json`` is a list of ``{"workload", "tvm_trace", "text"}``: one of TVM's te workloads
(GMM C1D C2D DEP NRM SFM, ``meta_schedule.testing.te_workload`` config 0), a trace as TVM's
database stores it (``[insts, decisions]``, or null) and workbench's export of a trace as TVM
Python. For each job: run ``text`` on a fresh ``tvm.s_tir.Schedule`` of the workload (``sch`` in
scope) and, when ``tvm_trace`` is given, apply that trace to another one and compare the two
modules with ``tvm_ffi.structural_equal``. Prints one JSON line: per job ``{"ok", "equal",
"error"}``. Imports neither workbench nor torch.
"""

import json
import sys

sys.modules.setdefault("torch", None)  # tvm_ffi imports torch eagerly when it is installed

#: TVM's te workloads at the MetaSchedule paper's shapes (workbench's paper shapes, in TVM's
#: layouts): the ``meta_schedule.testing.te_workload`` function and its arguments
WORKLOADS = {
    "GMM": ("batch_matmul_nkkm", (1, 128, 128, 128)),
    "C1D": ("conv1d_nlc", (1, 256, 64, 128, 3, 2, 1)),
    "C2D": ("conv2d_nhwc", (1, 224, 224, 3, 64, 7, 2, 3)),
    "DEP": ("depthwise_conv2d_nhwc", (1, 112, 112, 32, 3, 1, 1)),
    "NRM": ("norm_bmn", (1, 256, 256)),
    "SFM": ("softmax_mn", (256, 256)),
}


def main(path):
    import tvm
    import tvm_ffi
    from tvm import s_tir, te
    from tvm.s_tir.meta_schedule.testing import te_workload

    with open(path) as f:
        jobs = json.load(f)
    funcs = {}
    results = []
    for job in jobs:
        name = job["workload"]
        if name not in funcs:
            te_name, args = WORKLOADS[name]
            funcs[name] = te.create_prim_func(list(getattr(te_workload, te_name)(*args)))
        out = {"ok": False, "equal": None, "error": ""}
        try:
            sch = s_tir.Schedule(funcs[name])
            exec(compile(job["text"], "<exported trace>", "exec"), {"sch": sch})
            out["ok"] = True
            if job.get("tvm_trace") is not None:
                ref = s_tir.Schedule(funcs[name])
                s_tir.schedule.Trace.apply_json_to_schedule(job["tvm_trace"], ref)
                out["equal"] = bool(tvm_ffi.structural_equal(sch.mod, ref.mod))
        except Exception as exc:  # report every failure, go on with the next job
            out["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}"
        results.append(out)
    print(json.dumps({"tvm": tvm.__version__, "results": results}))


if __name__ == "__main__":
    main(sys.argv[1])
