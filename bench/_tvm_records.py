"""TVM's child in bench/same_schedule.py; run by the TVM virtualenv's Python.

    python bench/_tvm_records.py JOBS.json DATA [--repeat 5] [--min-repeat-ms 20] [--threads 2]

For each job (one of TVM's te workloads and a trace as MetaSchedule's database stores it):
apply the trace to the workload's ``te_workload`` function, ``tvm.compile`` it for this host's
CPU, run it once on the parent's inputs (``DATA/manifest.json``, outputs filled with NaN), save
the outputs as ``DATA/<WL>.tvm<k>.out<j>.npy`` and time a plain Python loop of calls
(``timing.time_calls``). Prints one JSON line. Imports neither workbench nor torch.
"""

import argparse
import json
import os
import sys

sys.modules.setdefault("torch", None)  # tvm_ffi imports torch eagerly when it is installed
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _tvm_replay import WORKLOADS  # noqa: E402  (TVM's te workloads at the paper's shapes)
from timing import time_calls  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("jobs")
    p.add_argument("data")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--min-repeat-ms", type=float, default=20.0)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--mcpu", default="", help="LLVM CPU (default: the host's)")
    args = p.parse_args(argv)

    import tvm
    from tvm import s_tir, te
    from tvm.s_tir.meta_schedule.testing import te_workload

    with open(args.jobs) as f:
        jobs = json.load(f)
    with open(os.path.join(args.data, "manifest.json")) as f:
        manifest = json.load(f)
    target = tvm.target.Target(
        {
            "kind": "llvm",
            "num-cores": args.threads,
            "mcpu": args.mcpu or tvm.target.codegen.llvm_get_system_cpu(),
        }
    )
    dev = tvm.cpu()
    funcs, results = {}, []
    for k, job in enumerate(jobs):
        name = job["workload"]
        if name not in funcs:
            te_name, te_args = WORKLOADS[name]
            funcs[name] = te.create_prim_func(list(getattr(te_workload, te_name)(*te_args)))
        entry = manifest[name]
        arrays = [np.load(os.path.join(args.data, p)) for p in entry["params"]]
        for o in entry["outputs"]:
            arrays[o].fill(np.nan)
        try:
            sch = s_tir.Schedule(funcs[name])
            s_tir.schedule.Trace.apply_json_to_schedule(job["trace"], sch)
            fn = tvm.compile(sch.mod, target=target)["main"]
            tensors = [tvm.runtime.tensor(a, dev) for a in arrays]
            fn(*tensors)
        except Exception as exc:  # report it, go on with the next record
            results.append({"error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        for j, o in enumerate(entry["outputs"]):
            np.save(os.path.join(args.data, f"{name}.tvm{k}.out{j}.npy"), tensors[o].numpy())
        results.append({"samples": time_calls(lambda: fn(*tensors), args.repeat, args.min_repeat_ms)})
    print(json.dumps({"tvm": tvm.__version__, "results": results}))


if __name__ == "__main__":
    main()
