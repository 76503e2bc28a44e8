"""TVM's child in bench/models.py: a zoo model through Relax's PyTorch importer and MetaSchedule.

    python bench/_tvm_models.py --data DIR --models resnet18,... --trials N --per-task M
                                [--threads T] [--quick] [--mcpu CPU] [--keep KEEP]

Run by the Python of a virtualenv with TVM and torch (``torch==2.13.0``, the CPU wheel); it
imports no workbench package: the zoo (``workbench/graph/zoo.py``, plain ``torch.nn``) is loaded
as a file. For each model: the same module and weights as the parent (``zoo.get(name)``, seed
0), ``torch.export``, ``tvm.relax.frontend.torch.from_exported_program`` (weights bound as
constants), the steps of ``relax.get_pipeline("static_shape_tuning", total_trials=N,
max_trials_per_task=M)`` (MetaSchedule over every fused task, TVM's task scheduler; the
builder: MetaSchedule's default without its ``tensor_intrin`` import, see
``build_without_tensor_intrin``), compiled for ``llvm -mcpu=<host> -num-cores=T``, run on the
parent's input (``DIR/<model>.x.npy``), its output compared with the parent's PyTorch output
(``DIR/<model>.ref.npy``), and the VM's ``main`` timed with ``time_evaluator``. With ``--keep
KEEP`` the tuned library is saved as ``KEEP/<model>.so`` (and how it was tuned beside it, and
MetaSchedule's work folder with its logs and database as ``KEEP/<model>.work``), and a later
run with the same target and budget times that library again instead of tuning anew. Prints one
JSON line per model; a model that fails prints its error instead (the stage and the exception), so
the parent can say why.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import sys
import shutil
import tempfile
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.join(HERE, "..", "workbench", "graph", "zoo.py")


def load_zoo():
    spec = importlib.util.spec_from_file_location("wb_zoo", ZOO)
    zoo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zoo)
    return zoo


def build_without_tensor_intrin(mod, target, _params):
    """MetaSchedule's default build minus ``import tvm.s_tir.tensor_intrin``: that import parses
    ~250 TVMScript functions in every fresh builder process (the pool restarts each round),
    20-60 s, past the builder's timeout (every candidate a "build error"); float32 llvm
    schedules use no tensor intrinsic, so the result is the same."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def hide_torch_from_workers() -> None:
    """tvm_ffi imports torch eagerly when it is installed: in each builder and runner worker
    process that is seconds more per start (this process needs torch, its workers do not).
    A ``torch`` package that raises ImportError, first on the workers' path, hides it."""
    shim = tempfile.mkdtemp(prefix="no-torch-")
    os.makedirs(os.path.join(shim, "torch"))
    with open(os.path.join(shim, "torch", "__init__.py"), "w") as f:
        f.write('raise ImportError("torch is hidden from TVM\'s workers by bench/_tvm_models.py")\n')
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [shim, os.environ.get("PYTHONPATH")]))
    os.environ["TVM_FFI_DISABLE_TORCH_C_DLPACK"] = "1"


def tune(mod, target, work: str, args):
    """``relax.get_pipeline("static_shape_tuning")``'s steps, with our builder: the passes
    before tuning, ``tune_relax`` (every fused task, TVM's gradient task scheduler,
    ``max_trials_global`` / ``max_trials_per_task``), then the database applied."""
    import tvm
    from tvm.relax import transform
    from tvm.relax.pipeline import zero_pipeline
    from tvm.s_tir import meta_schedule as ms

    with target:
        mod = tvm.transform.Sequential(
            [transform.DecomposeOpsForInference(), transform.CanonicalizeBindings(), zero_pipeline()]
        )(mod)
        ms.relax_integration.tune_relax(
            mod,
            params={},
            target=target,
            work_dir=work,
            max_trials_global=args.trials,
            max_trials_per_task=args.per_task,
            num_trials_per_iter=min(64, max(args.per_task, 1)),
            builder=ms.builder.LocalBuilder(f_build=build_without_tensor_intrin, timeout_sec=120),
            seed=0,
        )
        mod = transform.MetaScheduleApplyDatabase(work)(mod)
    return mod


def kept_paths(name: str, args) -> tuple[str, str]:
    return os.path.join(args.keep, f"{name}.so"), os.path.join(args.keep, f"{name}.json")


def kept_build(name: str, target: str, args) -> dict | None:
    """The build ``--keep`` saved for this model, if it was tuned for the same target and budget."""
    if not args.keep:
        return None
    lib, meta = kept_paths(name, args)
    if not (os.path.exists(lib) and os.path.exists(meta)):
        return None
    with open(meta) as f:
        kept = json.load(f)
    same = (kept.get("target"), kept.get("trials"), kept.get("per_task"), kept.get("quick")) == (
        target,
        args.trials,
        args.per_task,
        args.quick,
    )
    return dict(kept, lib=lib) if same else None


def keep_build(name: str, ex, row: dict, args) -> None:
    """Save the tuned model's library and how it was tuned, for ``kept_build`` in a later run."""
    os.makedirs(args.keep, exist_ok=True)
    lib, meta = kept_paths(name, args)
    ex.export_library(lib)
    with open(meta, "w") as f:
        json.dump(
            dict(
                target=row["target"],
                trials=args.trials,
                per_task=args.per_task,
                quick=args.quick,
                tune_s=row["tune_s"],
            ),
            f,
        )


def run_model(name: str, args, zoo) -> dict:
    import torch
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    row: dict = {"model": name}
    stage = "zoo"
    try:
        size = zoo.TINY[name] if args.quick else {}
        module, _ = zoo.get(name, **size)
        x = np.load(os.path.join(args.data, f"{name}.x.npy"))
        ref = np.load(os.path.join(args.data, f"{name}.ref.npy"))
        stage = "torch.export"
        t0 = time.monotonic()
        with torch.no_grad():
            ep = torch.export.export(module, (torch.from_numpy(x),))
        stage = "from_exported_program"
        mod = from_exported_program(ep, unwrap_unit_return_tuple=True)
        row["import_s"] = time.monotonic() - t0
        mcpu = args.mcpu or tvm.target.codegen.llvm_get_system_cpu()
        target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": args.threads})
        row["target"] = str(target)
        kept = kept_build(name, row["target"], args)
        if kept is not None:  # an earlier run's tuned model, same target and budget: time it again
            stage = "load the kept build"
            ex = tvm.runtime.load_module(kept["lib"])
            row.update(tune_s=kept["tune_s"], reused=kept["lib"])
        else:
            stage = "MetaSchedule tuning"
            # with --keep, MetaSchedule's work folder (its logs and database) is kept beside the
            # build: a tuned model far slower than expected can then be looked into
            keep_work = os.path.join(args.keep, f"{name}.work") if args.keep else None
            if keep_work:
                shutil.rmtree(keep_work, ignore_errors=True)
                os.makedirs(keep_work)
            with contextlib.nullcontext(keep_work) if keep_work else tempfile.TemporaryDirectory() as work:
                t0 = time.monotonic()
                tuned = tune(mod, target, work, args)
                row["tune_s"] = time.monotonic() - t0
                stage = "tvm.compile"
                ex = tvm.compile(tuned, target=target)
            if args.keep:
                stage = "export_library"
                keep_build(name, ex, row, args)
        stage = "run"
        dev = tvm.cpu()
        vm = relax.VirtualMachine(ex, dev)
        inp = tvm.runtime.tensor(x, dev)
        out = vm["main"](inp)
        while not hasattr(out, "numpy"):  # a tuple of one output
            out = out[0]
        got = out.numpy()
        row["max_abs_err"] = float(np.max(np.abs(got - ref)))
        row["matches"] = bool(np.allclose(got, ref, rtol=1e-3, atol=1e-3))
        stage = "time"
        ftimer = vm.time_evaluator(
            "main", dev, number=1, repeat=args.repeat, min_repeat_ms=int(args.min_repeat_ms)
        )
        res = ftimer(inp)
        row["latency_s"] = float(np.median(np.asarray(res.results)))
    except Exception as exc:  # reported to the parent, which prints why TVM has no figure
        row["error"] = f"{stage}: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
        row["traceback"] = traceback.format_exc()[-2000:]
    return row


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--trials", type=int, required=True, help="MetaSchedule's max_trials_global")
    p.add_argument("--per-task", type=int, required=True, help="MetaSchedule's max_trials_per_task")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--quick", action="store_true")
    p.add_argument("--mcpu", default="")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--min-repeat-ms", type=float, default=100.0)
    p.add_argument(
        "--keep",
        default="",
        help="folder for each tuned model's library: saved after tuning, and timed again instead "
        "of re-tuning when a later run asks for the same target and budget",
    )
    args = p.parse_args(argv)
    import tvm

    zoo = load_zoo()
    hide_torch_from_workers()
    print(json.dumps({"versions": {"tvm": tvm.__version__, "torch": sys.modules["torch"].__version__}}))
    for name in args.models.split(","):
        print(json.dumps(run_model(name, args, zoo)), flush=True)


if __name__ == "__main__":
    main()
