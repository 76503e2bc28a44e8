"""TVM's child in bench/vs_tvm.py's timing rounds; run by the TVM virtualenv's Python.

    python bench/_tvm_side.py --kernels KERNELS.json --data DIR --workloads GMM,NRM
                              [--timer loop|evaluator] [--repeat 10] [--min-repeat-ms 40]

``KERNELS.json`` maps each workload to ``{label: path of an exported .so}`` (the kernels
``bench/_tvm_tune.py`` exported: the final one and the best at smaller budgets). For each
workload, in the order ``--workloads`` gives, and each of its kernels: load it, run it once on
the parent's inputs (``DATA/manifest.json``) with the outputs filled with NaN, save the outputs
as ``DATA/<WL>.tvm.<label>.out<k>.npy``, then time it on those tvm tensors:

* ``--timer loop``: a plain Python loop of calls of its PackedFunc, ``timing.time_calls`` (the
  loop that times workbench and numpy too, in the bench's first harness);
* ``--timer evaluator``: TVM's own ``time_evaluator`` (a C++ loop, ``min_repeat_ms`` per
  repeat: the bench's second harness).

Threads: ``TVM_NUM_THREADS``, set by the parent. Prints one JSON line, per workload and label
the seconds per call of each repeat. Imports neither workbench nor torch.
"""

import argparse
import json
import os
import sys

sys.modules.setdefault("torch", None)  # tvm_ffi imports torch eagerly when it is installed
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from timing import time_calls  # noqa: E402  (bench/timing.py)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels", required=True, help="JSON: workload -> {label: .so path}")
    p.add_argument("--data", required=True, help="folder with manifest.json and the .npy inputs")
    p.add_argument("--workloads", required=True)
    p.add_argument("--timer", choices=("loop", "evaluator"), default="loop")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--min-repeat-ms", type=float, default=40.0)
    args = p.parse_args(argv)

    import tvm

    versions = {
        "tvm": tvm.__version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS"),
    }
    try:
        import tvm_ffi

        versions["tvm_ffi"] = tvm_ffi.__version__
    except ImportError:
        pass
    with open(os.path.join(args.data, "manifest.json")) as f:
        manifest = json.load(f)
    with open(args.kernels) as f:
        kernels = json.load(f)
    dev = tvm.cpu()
    out = {"versions": versions, "workloads": {}}
    for name in args.workloads.split(","):
        entry = manifest[name]
        out["workloads"][name] = {}
        for label, so in kernels[name].items():
            arrays = [np.load(os.path.join(args.data, p)) for p in entry["params"]]
            for k in entry["outputs"]:
                arrays[k].fill(np.nan)
            tensors = [tvm.runtime.tensor(a, dev) for a in arrays]
            mod = tvm.runtime.load_module(so)
            fn = mod["main"]
            fn(*tensors)
            for j, k in enumerate(entry["outputs"]):
                np.save(os.path.join(args.data, f"{name}.tvm.{label}.out{j}.npy"), tensors[k].numpy())
            if args.timer == "loop":
                samples = time_calls(lambda: fn(*tensors), args.repeat, args.min_repeat_ms)
            else:
                # TVM 0.27's FFI takes min_repeat_ms as an int only
                ev = mod.time_evaluator(
                    "main", dev, number=1, repeat=args.repeat, min_repeat_ms=max(1, round(args.min_repeat_ms))
                )
                samples = [float(x) for x in ev(*tensors).results]
            out["workloads"][name][label] = {"samples": samples}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
