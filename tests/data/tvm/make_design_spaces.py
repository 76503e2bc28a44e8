# ruff: noqa: E402  (a by-hand generator: torch is kept out before TVM loads)
"""Writes tests/data/tvm/design_spaces.json: TVM 0.27's design spaces (its default schedule rules,
no postprocessors) of the te_workload functions that workbench's workloads port, on one llvm and
one cuda target (not a test; run by hand with TVM's interpreter):

    TVM_PYTHON tests/data/tvm/make_design_spaces.py tests/data/tvm/design_spaces.json

Each sketch is stored as TVM's trace JSON (``[insts, decisions]``), the decisions those TVM drew.
tests/space/test_tvm_design_spaces.py converts them (``workbench.tune.database.tvm``) and checks
that workbench's space of the same function has a sketch of the same instructions for each.
"""

import json
import sys

sys.modules.setdefault("torch", None)  # tvm_ffi imports torch eagerly when it is installed
import tvm
from tvm import te
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.testing import te_workload

#: workbench name -> (te_workload function, arguments): workbench's default shapes
WORKLOADS = {
    "GMM": ("batch_matmul_nkkm", (1, 128, 128, 128)),
    "C1D": ("conv1d_nlc", (1, 256, 64, 128, 3, 2, 1)),
    "C2D": ("conv2d_nhwc", (1, 224, 224, 3, 64, 7, 2, 3)),
    "DEP": ("depthwise_conv2d_nhwc", (1, 112, 112, 32, 3, 1, 1)),
    "NRM": ("norm_bmn", (1, 256, 256)),
    "SFM": ("softmax_mn", (256, 256)),
    "CBR": ("conv2d_nhwc_bn_relu", (1, 224, 224, 3, 64, 7, 2, 3)),
    "C3D": ("conv3d_ndhwc", (1, 16, 224, 224, 3, 64, 7, 2, 3)),
    "DIL": ("conv2d_nhwc", (1, 224, 224, 3, 64, 7, 2, 3, 2)),
    "GRP": ("conv2d_nhwc", (1, 56, 56, 64, 128, 3, 2, 1, 1, 4)),
    "T2D": ("conv2d_transpose_nhwc", (1, 4, 4, 512, 256, 4, 2, 1)),
    "TBG": ("transpose_batch_matmul", (1, 128, 12, 64)),
}
#: TVM's target dict and the workbench target string of the same machine
TARGETS = {
    "llvm": ({"kind": "llvm", "mcpu": "znver3", "num-cores": 16}, "llvm -mcpu=znver3 -num-cores=16"),
    # sm_70: below sm_80, so no AddAsyncPipeline forks (workbench has no async pipeline)
    "cuda": (
        {
            "kind": "cuda",
            "arch": "sm_70",
            "max_threads_per_block": 1024,
            "thread_warp_size": 32,
            "max_shared_memory_per_block": 49152,
            "registers_per_block": 65536,
        },
        "cuda -arch=sm_70",
    ),
}


def plain(obj):
    """TVM's trace JSON object (FFI arrays, maps, IntImm) as Python lists, dicts and numbers."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (tvm.tirx.IntImm, tvm.tirx.FloatImm)):
        return obj.value
    if hasattr(obj, "items"):
        return {str(k): plain(v) for k, v in obj.items()}
    if hasattr(obj, "__len__"):
        return [plain(v) for v in obj]
    return str(obj)


def design_space(func, kind: str, target: dict) -> list:
    context = ms.TuneContext(
        mod=func,
        target=tvm.target.Target(target),
        space_generator=ms.space_generator.PostOrderApply(
            sch_rules=ms.ScheduleRule.create(kind), postprocs=[], mutator_probs={}
        ),
        task_name="design_space",
        num_threads=1,  # TuneContext asks psutil for the core count otherwise
    )
    return [plain(s.trace.as_json()) for s in context.generate_design_space()]


def main(out_path: str) -> None:
    cases = []
    for kind, (target, wb_target) in TARGETS.items():
        for name, (te_name, args) in WORKLOADS.items():
            func = te.create_prim_func(list(getattr(te_workload, te_name)(*args)))
            cases.append(
                {
                    "workload": name,
                    "kind": kind,
                    "target": wb_target,
                    "sketches": design_space(func, kind, target),
                }
            )
    with open(out_path, "w") as f:
        json.dump({"tvm": tvm.__version__, "cases": cases}, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
