"""TVM's tuning in bench/vs_tvm.py; run by the Python of a virtualenv with TVM 0.27.

    python bench/_tvm_tune.py --work-dir DIR [--workloads GMM,NRM] [--trials 64]
                              [--trials-per-iter 16] [--threads 2] [--seed 1] [--mcpu CPU]
                              [--budgets 16,32]

For each workload, TVM's own definition of it (``tvm.s_tir.meta_schedule.testing.te_workload``
at the MetaSchedule paper's shape, the table in ``bench/_tvm_replay.py``) becomes a PrimFunc
(``te.create_prim_func``) that ``tvm.s_tir.meta_schedule.tune_tir`` tunes: evolutionary search
with the XGBoost cost model, ``LocalBuilder`` and ``LocalRunner`` (MetaSchedule's default
evaluator: 3 runs of at least 100 ms, no cache flush), a fresh JSON database in ``DIR/<WL>/``.

Then, for each budget k of ``--budgets`` below the trials measured and for all of them, the
record with the lowest mean run time among the first k lines of
``DIR/<WL>/database_tuning_record.json`` (MetaSchedule's JSON database appends the records in
the order they were measured) has its trace applied to a fresh ``s_tir.Schedule`` of the
workload, is compiled with ``tvm.compile`` for the tuning target and exported as
``DIR/<WL>@record<i>.so`` (one file per distinct record); the best of all the records is
``DIR/<WL>.so``, the kernel ``tune_tir``'s own ``compile_tir`` would pick. ``DIR/results.json``
says, per workload, the trials measured and failed, the tuning seconds, the tuner's own best at
each budget and which record each kernel is. Progress lines start with ``[tune]``. Imports
neither workbench nor torch.

TVM is never a dependency of workbench: this file runs in a virtualenv of its own, e.g.

    python3.11 -m venv .venv-tvm
    .venv-tvm/bin/pip install "apache-tvm==0.27.0.post1" "apache-tvm-ffi==0.1.14.post1" \\
        xgboost psutil cloudpickle tornado

(keep the apache-tvm-ffi pin: later versions crash in TVM 0.27's JSON serialization, which
MetaSchedule's database and mutators use; a C compiler is needed to export the kernels).
"""

import argparse
import json
import os
import shutil
import sys
import time
from contextlib import contextmanager

# tvm_ffi imports torch eagerly when it is installed; nothing here needs it, and with torch loaded
# every builder process takes much longer to start
sys.modules.setdefault("torch", None)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _tvm_replay import WORKLOADS  # noqa: E402  (TVM's te workloads at the paper's shapes)

FAILED_SECS = 1e9  # MetaSchedule stores a failed candidate with a huge run time (1e10 s)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work-dir", required=True, help="databases, kernels and results.json go here")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--trials-per-iter", type=int, default=16)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--mcpu", default="", help="LLVM CPU (default: the host's, as LLVM names it)")
    p.add_argument("--budgets", default="16,32", help="trial counts whose best record is exported too")
    p.add_argument("--build-timeout", type=float, default=60.0)
    p.add_argument("--run-timeout", type=float, default=30.0)
    return p.parse_args(argv)


def build_without_tensor_intrin(mod, target, _params):
    """``meta_schedule.builder.default_build`` without its ``import tvm.s_tir.tensor_intrin``.

    That import parses a few hundred GPU/ARM intrinsics written in TVMScript in every fresh
    builder process, 20-60 s each on a slow machine, enough to run into the builder's timeout;
    float32 CPU schedules use no tensor intrinsic, so the built code is the same.
    """
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    return tvm_build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod), target=target)


@contextmanager
def output_to(path):
    """MetaSchedule's logs (Python and C++, file descriptors 1 and 2) into ``path``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "a") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def read_records(db_dir):
    """``(trace JSON, mean seconds or None)`` per line of the database, in measurement order."""
    out = []
    with open(os.path.join(db_dir, "database_tuning_record.json")) as f:
        for line in f:
            if not line.strip():
                continue
            _, (trace, run_secs, *_rest) = json.loads(line)
            secs = [float(x) for x in run_secs or []]
            mean = sum(secs) / len(secs) if secs else None
            out.append((trace, mean if mean is not None and mean < FAILED_SECS else None))
    return out


def best_index(records, k):
    """The index of the fastest successful record among the first ``k``, or None."""
    ok = [(secs, i) for i, (_, secs) in enumerate(records[:k]) if secs is not None]
    return min(ok)[1] if ok else None


def tune_one(tvm, ms, name, target, args, res):
    from tvm import s_tir, te
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.testing import te_workload

    te_name, te_args = WORKLOADS[name]
    func = te.create_prim_func(list(getattr(te_workload, te_name)(*te_args)))
    db_dir = os.path.join(args.work_dir, name)
    shutil.rmtree(db_dir, ignore_errors=True)
    os.makedirs(db_dir)
    res.update({"te_workload": f"{te_name}{te_args}", "database": db_dir, "trials_budget": args.trials})
    measured = []  # one entry per candidate, in measurement order: a cross-check of the database

    @derived_object
    class Recorder(ms.measure_callback.PyMeasureCallback):
        def apply(self, task_scheduler, task_id, candidates, builder_results, runner_results):
            for b, r in zip(builder_results, runner_results):
                ok = b.error_msg is None and r.error_msg is None and r.run_secs
                measured.append(None if not ok else sum(float(x) for x in r.run_secs) / len(r.run_secs))

    t0 = time.monotonic()
    with output_to(os.path.join(args.work_dir, f"{name}.console.log")):
        builder = ms.builder.LocalBuilder(
            max_workers=args.threads, timeout_sec=args.build_timeout, f_build=build_without_tensor_intrin
        )
        runner = ms.runner.LocalRunner(
            timeout_sec=args.run_timeout,
            evaluator_config=ms.runner.EvaluatorConfig(
                number=3, repeat=1, min_repeat_ms=100, enable_cpu_cache_flush=False
            ),
        )
        try:
            ms.tune_tir(
                mod=func,
                target=target,
                work_dir=db_dir,
                max_trials_global=args.trials,
                num_trials_per_iter=args.trials_per_iter,
                builder=builder,
                runner=runner,
                measure_callbacks=list(ms.MeasureCallback.create("default")) + [Recorder()],
                num_tuning_cores=args.threads,
                seed=None if args.seed < 0 else args.seed,
            )
        finally:
            res["tune_wall_s"] = time.monotonic() - t0
            res["trials_measured"] = len(measured)
            res["trials_failed"] = sum(x is None for x in measured)

    records = read_records(db_dir)
    res["database_records"] = len(records)
    n = len(records)
    budgets = sorted({k for k in args.budgets if k < n} | {n})
    res["kernels"], res["tuner_best_at"] = {}, {}
    for k in budgets:
        i = best_index(records, k)
        res["tuner_best_at"][str(k)] = {"best_ms": None if i is None else records[i][1] * 1e3, "trials": k}
        if i is not None:
            label = "final" if k == n else str(k)
            res["kernels"][label] = {"record": i, "tuner_ms": records[i][1] * 1e3, "trials": k}
    if "final" not in res["kernels"]:
        raise RuntimeError("no candidate was measured successfully")
    final = res["kernels"]["final"]["record"]
    # one kernel per distinct record: a smaller budget's best is often the final one already
    for i in sorted({kern["record"] for kern in res["kernels"].values()}):
        path = os.path.join(args.work_dir, f"{name}.so" if i == final else f"{name}@record{i}.so")
        sch = s_tir.Schedule(func)
        s_tir.schedule.Trace.apply_json_to_schedule(records[i][0], sch)
        tvm.compile(sch.mod, target=target).export_library(path)
        for kern in res["kernels"].values():
            if kern["record"] == i:
                kern["so"] = path


def main(argv=None):
    args = parse_args(argv)
    args.budgets = [int(k) for k in args.budgets.split(",") if k.strip()]
    names = [n.strip().upper() for n in args.workloads.split(",") if n.strip()]
    os.environ["TVM_NUM_THREADS"] = str(args.threads)  # the builder and runner workers inherit it
    os.makedirs(args.work_dir, exist_ok=True)
    t0 = time.monotonic()
    import tvm
    import tvm.s_tir.tensor_intrin  # noqa: F401  (TuneContext imports it anyway: pay for it once, here)
    from tvm.s_tir import meta_schedule as ms

    mcpu = args.mcpu or tvm.target.codegen.llvm_get_system_cpu()
    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": args.threads})
    out = {"tvm": tvm.__version__, "target": str(target), "import_s": time.monotonic() - t0, "workloads": {}}
    try:
        import tvm_ffi

        out["tvm_ffi"] = tvm_ffi.__version__
    except ImportError:
        pass
    print(f"[tune] {tvm.__version__}, target {target}", flush=True)
    path = os.path.join(args.work_dir, "results.json")
    for name in names:
        res = out["workloads"][name] = {}
        try:
            tune_one(tvm, ms, name, target, args, res)
        except Exception as exc:  # go on with the other workloads; the parent reports it
            res["error"] = f"{type(exc).__name__}: {exc}"[-2000:]
        final = res.get("kernels", {}).get("final", {})
        print(
            f"[tune] {name} {res.get('trials_measured')} trials ({res.get('trials_failed')} failed): "
            f"{res.get('tune_wall_s', 0):.0f} s, best {final.get('tuner_ms', float('nan')):.4f} ms"
            + (f"  ERROR {res['error'][-300:]}" if "error" in res else ""),
            flush=True,
        )
        with open(path, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
