"""TVM's child in bench/vs_tvm.py's timing rounds; run by the TVM virtualenv's Python.

    python bench/_tvm_side.py --libs DIR --data DIR --workloads GMM,NRM [--repeat 10]
                              [--min-repeat-ms 40]

For each workload: load the kernel MetaSchedule tuned (``DIR/<WL>.so``, exported by the TVM
anchor's bench.py), run it once on the parent's inputs (``DATA/manifest.json``) with the output
filled with NaN, save the output as ``DATA/<WL>.tvm.out<k>.npy``, then time a plain Python loop
of calls of its PackedFunc on those tvm tensors with ``timing.time_calls`` (the loop that times
workbench and numpy too). Threads: ``TVM_NUM_THREADS``, set by the parent. Prints one JSON line.
Imports neither workbench nor torch.
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
    p.add_argument("--libs", required=True, help="folder of the exported <WL>.so kernels")
    p.add_argument("--data", required=True, help="folder with manifest.json and the .npy inputs")
    p.add_argument("--workloads", required=True)
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
    dev = tvm.cpu()
    out = {"versions": versions, "workloads": {}}
    for name in args.workloads.split(","):
        entry = manifest[name]
        arrays = [np.load(os.path.join(args.data, p)) for p in entry["params"]]
        for k in entry["outputs"]:
            arrays[k].fill(np.nan)
        tensors = [tvm.runtime.tensor(a, dev) for a in arrays]
        fn = tvm.runtime.load_module(os.path.join(args.libs, name + ".so"))["main"]
        fn(*tensors)
        for j, k in enumerate(entry["outputs"]):
            np.save(os.path.join(args.data, f"{name}.tvm.out{j}.npy"), tensors[k].numpy())
        samples = time_calls(lambda: fn(*tensors), args.repeat, args.min_repeat_ms)
        out["workloads"][name] = {"samples": samples}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
