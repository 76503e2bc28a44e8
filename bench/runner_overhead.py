"""Does the tuner's runner measure the kernel, or itself? One kernel, three timers, side by side.

Run: ``python bench/runner_overhead.py [--workloads NRM,SFM] [--db DB] [--trials 16]
[--rounds 3] [--tvm-python PY]`` (default ``$WB_TVM_PYTHON``). For each workload (paper shape) the
best record of ``DB`` (tuned here for ``--trials`` when it has none) is timed, round after
round, by

* the runner, as a tuning record says it: ``LocalRunner.measure`` (a worker process, the task's
  pickled inputs; the record's latency is the median of its repeats, each the fastest of its
  ~1 ms windows: ``MeasureConfig.windows``);
* ``kernel.time`` on the same kernel in this process;
* TVM's runner: the same trace exported as TVM Python (``workbench export-tvm``), built by TVM
  and timed with the module's ``time_evaluator`` as MetaSchedule's local runner does
  (``bench/_tvm_runner.py``, in TVM's virtualenv; skipped without one).

Prints microseconds per call (median over rounds of each timer's median) and the ratios. The
machine is shared: compare only the columns of one run.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import workbench as wb
from workbench.codegen.arrays import aligned
from workbench.target import Target, host_cores
from workbench.tune import LocalRunner, MeasureInput, Task
from workbench.tune.database import tvm as tvmdb
from workbench.tune.database.base import Database

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from timing import cpu_model  # noqa: E402  (bench/timing.py)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default="NRM,SFM")
    p.add_argument("--db", default=None, help="database to take the best records from (default: a new one)")
    p.add_argument("--trials", type=int, default=16, help="tune this much where the database has nothing")
    p.add_argument("--rounds", type=int, default=3)
    tvm_py = os.environ.get("WB_TVM_PYTHON") or os.environ.get("WORKBENCH_TVM_PYTHON")
    tvm_py = tvm_py or os.path.join(os.path.dirname(HERE), ".venv-tvm", "bin", "python")
    p.add_argument("--tvm-python", default=tvm_py)
    return p.parse_args(argv)


def tvm_round(py, spec_path) -> dict:
    cmd = [py, os.path.join(HERE, "_tvm_runner.py"), spec_path]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        tail = proc.stderr.strip().splitlines()
        return {"error": tail[-1] if tail else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])["results"]


def main(argv=None):
    args = parse_args(argv)
    names = args.workloads.split(",")
    work = tempfile.mkdtemp(prefix="wb-runner-overhead-")
    db_path = args.db or os.path.join(work, "tuning.sqlite")
    threads = host_cores()
    target = Target.of("llvm")
    print(f"# {cpu_model()}, {threads} CPUs, 1-min load {os.getloadavg()[0]:.2f}; target {target}")
    jobs, cases = [], {}
    for name in names:
        func = wb.workloads.get(name)
        db = Database.open(db_path)
        if db.best(func, target) is None:
            print(f"# tuning {name} for {args.trials} trials", flush=True)
            wb.tune(func, target=target, trials=args.trials, database=db, verbose=False, baseline=False)
        rec = db.best(func, target)
        sch = rec.schedule()
        kernel = wb.build(sch, target)
        arrays = [aligned(a) for a in wb.workloads.random_args(name)]
        paths = []
        for k, a in enumerate(arrays):
            paths.append(os.path.join(work, f"{name}.{k}.npy"))
            np.save(paths[-1], a)
        try:
            jobs.append({"workload": name, "text": tvmdb.to_tvm_python(rec), "data": paths})
        except ValueError as exc:
            print(f"# {name}: not exported to TVM ({exc})")
        task = Task(func, target, reference=wb.workloads.reference(name))
        cases[name] = (sch, kernel, arrays, task, rec.latency)
    spec = {
        "target": {"kind": "llvm", "mcpu": target.mcpu, "num-cores": threads},
        "number": 3,  # MetaSchedule's EvaluatorConfig defaults, repeat raised to give a median
        "repeat": 5,
        "min_repeat_ms": 100,
        "jobs": jobs,
    }
    spec_path = os.path.join(work, "tvm_jobs.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    have_tvm = os.path.exists(args.tvm_python)
    samples = {name: {"runner": [], "kernel.time": [], "TVM runner": []} for name in names}
    with LocalRunner(workers=1) as runner:
        for r in range(args.rounds):
            for name in names:
                sch, kernel, arrays, task, _ = cases[name]
                res = runner.measure([MeasureInput(task, sch.func)])[0]
                if res.status == "ok":
                    samples[name]["runner"].append(res.latency)
                samples[name]["kernel.time"].append(float(kernel.time(*arrays)))
            if have_tvm:
                for name, out in tvm_round(args.tvm_python, spec_path).items():
                    if isinstance(out, dict) and "seconds" in out:
                        samples[name]["TVM runner"].append(float(np.median(out["seconds"])))
                    elif r == 0:
                        print(f"# TVM {name}: {out}")
            print(f"# round {r + 1}/{args.rounds} done, 1-min load {os.getloadavg()[0]:.2f}", flush=True)

    def us(xs):
        return float(np.median(xs)) * 1e6 if xs else float("nan")

    print(
        f"{'workload':<9} {'tuning rec':>10} {'runner':>9} {'kernel.time':>11} {'TVM runner':>10} "
        f"{'runner/k.time':>13} {'runner/TVM':>10}   (us per call)"
    )
    for name in names:
        s = samples[name]
        run, kt, tv = us(s["runner"]), us(s["kernel.time"]), us(s["TVM runner"])
        print(
            f"{name:<9} {cases[name][4] * 1e6:>10.2f} {run:>9.2f} {kt:>11.2f} {tv:>10.2f} "
            f"{run / kt:>13.3f} {run / tv:>10.3f}"
        )
    print("# tuning rec: the database's figure (tuned earlier, maybe under other load); the rest: this run")


if __name__ == "__main__":
    main()
