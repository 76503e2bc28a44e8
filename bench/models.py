"""Whole models beside PyTorch and TVM: latency untuned, tuned, eager, compiled, in one run.

Run: ``python bench/models.py [--quick] [--models resnet18,mobilenet_v2,bert_layer]
[--trials-per-task 64] [--max-trials 1000] [--tvm-python PATH | --no-tvm] [--no-compile]``.

For each zoo model at batch 1 (``--quick``: the tiny test variants), on all cores
(``os.cpu_count()`` threads for PyTorch, workbench's OpenMP kernels and TVM alike):

* PyTorch eager, and ``torch.compile`` (inductor) where it works: why it did not is printed;
* workbench untuned: each task from its default schedule (``wb.build_model`` without a
  database), checked against PyTorch (rtol/atol 1e-3);
* the graph executor's overhead on that build: ``model.time`` against the sum of its kernels
  each timed alone (``Kernel.time``'s loop on the same arrays), and the dispatch loop alone
  (every kernel entry replaced by a no-op: what ``Model.run`` costs besides the kernels);
* workbench tuned: ``wb.tune_model`` with a budget of ``min(trials-per-task x tasks,
  max-trials)`` measured candidates over all tasks (workbench's gradient task scheduler
  shares it; it has no per-task cap), its wall time, the build from that database, checked
  again;
* TVM: Relax's PyTorch importer (``from_exported_program``) and MetaSchedule with the same
  total budget (``max_trials_global``; ``max_trials_per_task`` = trials-per-task), run by
  ``bench/_tvm_models.py`` in a virtualenv with TVM and torch (``--tvm-python`` or
  ``WB_TVM_PYTHON``; TVM is never a dependency of workbench), after all workbench timings so
  the two never share the cores. ``--tvm-keep DIR`` keeps TVM's tuned models in DIR; a later
  run with the same budget times them again instead of re-tuning (the latencies are still
  measured in this run; the tuning wall time is the earlier run's, marked "kept"). ``--wb-keep
  DIR`` does the same for workbench's tuning databases: tune once (e.g. on a busy machine, both
  tuners in turn), then time everything side by side in a quiet run.

Printed: the CPU model, the load average (the machine may be shared: every figure is from this
one run), each latency, the ratios to PyTorch eager and to TVM, the tuning wall times, and
``--json PATH`` writes every figure. Needs the optional extra ``torch``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
import traceback

import numpy as np
import torch

import workbench as wb
from workbench.graph import zoo
from timing import cpu_model, time_calls  # bench/timing.py (scripts run from bench/)

HERE = os.path.dirname(os.path.abspath(__file__))
THREAD_VARS = ("OMP_NUM_THREADS", "TVM_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def median_s(fn, repeat: int = 5) -> float:
    return float(np.median(time_calls(fn, repeat=repeat, min_repeat_ms=50.0, warmup=1)))


def max_err(out, ref) -> tuple[float, bool]:
    return float(np.max(np.abs(out - ref))), bool(np.allclose(out, ref, rtol=1e-3, atol=1e-3))


def torch_compiled(module, example, ref) -> dict:
    """``torch.compile`` (inductor, CPU): its latency, or why it did not work."""
    t0 = time.monotonic()
    try:
        compiled = torch.compile(module)
        with torch.no_grad():
            out = compiled(*example).numpy()
            err, ok = max_err(out, ref)
            if not ok:
                return {"error": f"output differs from eager (max abs error {err:.3g})"}
            compile_s = time.monotonic() - t0
            return {"latency": median_s(lambda: compiled(*example)), "compile_s": compile_s, "err": err}
    except Exception as exc:  # reported in the table: why torch.compile has no figure
        line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return {"error": f"{type(exc).__name__}: {line[:200]}"}


def executor_overhead(model: wb.graph.Model, x: np.ndarray) -> dict:
    """``model.time`` against the sum of its kernels timed alone, and the dispatch loop alone."""
    # plain repeats (windows=1), the statistic of median_s below and of the other frameworks' figures
    whole = float(model.time(x, repeat=5, min_repeat_ms=100.0, windows=1))
    alone = [median_s(lambda s=s: s.entry(*s.args), repeat=5) for s in model.steps]

    def noop(*args):
        return 0

    steps = [(noop, s.args) for s in model.steps]

    def dispatch():  # Model.run's loop with every entry a no-op
        for entry, args in steps:
            entry(*args)

    return {
        "model": whole,
        "kernels": float(sum(alone)),
        "dispatch": median_s(dispatch),
        "steps": len(model.steps),
    }


def bench_workbench(name: str, args, data: str) -> dict:
    size = zoo.TINY[name] if args.quick else {}
    module, example = zoo.get(name, **size)
    x = example[0].numpy()
    with torch.no_grad():
        ref = module(*example).numpy()
        row: dict = {"name": name, "eager": median_s(lambda: module(*example))}
    np.save(os.path.join(data, f"{name}.x.npy"), x)
    np.save(os.path.join(data, f"{name}.ref.npy"), ref)
    row["compile"] = torch_compiled(module, example, ref) if args.compile else {"error": "--no-compile"}

    t0 = time.monotonic()
    graph = wb.from_torch(module, example)
    row["import_s"] = time.monotonic() - t0
    tasks = graph.task_list()
    row.update(groups=len(graph.groups), tasks=len(tasks))
    t0 = time.monotonic()
    untuned = wb.build_model(graph, "llvm")
    row["build_s"] = time.monotonic() - t0
    row["err_untuned"], ok = max_err(untuned(x)[0], ref)
    if not ok:
        raise SystemExit(
            f"{name} untuned: output differs from PyTorch (max abs error {row['err_untuned']:.3g})"
        )
    row["overhead"] = executor_overhead(untuned, x)
    row["untuned"] = row["overhead"]["model"]

    row["trials"] = min(args.trials_per_task * len(tasks), args.max_trials)
    if row["trials"]:
        with tempfile.TemporaryDirectory() as d:
            db_path, kept = keep_paths(args.wb_keep or d, name, row["trials"])
            t0 = time.monotonic()
            db = wb.tune_model(graph, "llvm", trials=row["trials"], database=db_path, workers=args.workers)
            row["tune_s"] = time.monotonic() - t0
            if args.wb_keep:  # the first run's tuning time; a resumed run only opened the database
                if os.path.exists(kept):
                    with open(kept) as f:
                        row.update(tune_s=json.load(f)["tune_s"], kept=True)
                else:
                    with open(kept, "w") as f:
                        json.dump({"trials": row["trials"], "tune_s": row["tune_s"]}, f)
            tuned = wb.build_model(graph, "llvm", db)
        row["hits"] = sum(tuned.tuned)
        row["err_tuned"], ok = max_err(tuned(x)[0], ref)
        if not ok:
            raise SystemExit(
                f"{name} tuned: output differs from PyTorch (max abs error {row['err_tuned']:.3g})"
            )
        row["tuned"] = float(tuned.time(x, repeat=5, min_repeat_ms=100.0, windows=1))  # as median_s
    return row


def keep_paths(folder: str, name: str, trials: int) -> tuple[str, str]:
    """Where ``--wb-keep`` keeps a model's database and its tuning time, per budget: a later run
    with the same budget resumes the database (``tune_model`` counts its records, so it measures
    nothing new) and reports the first run's tuning time."""
    os.makedirs(folder, exist_ok=True)
    stem = os.path.join(folder, f"{name}.{trials}")
    return stem + ".sqlite", stem + ".json"


def find_tvm_python(explicit):
    """A Python that imports tvm and torch, or (None, why not)."""
    py = explicit or os.environ.get("WB_TVM_PYTHON")
    if not py:
        return None, "no TVM Python given (--tvm-python or WB_TVM_PYTHON)"
    if not os.path.exists(py):
        return None, f"{py} does not exist"
    probe = subprocess.run(
        [py, "-c", "import torch, tvm; from tvm.relax.frontend.torch import from_exported_program"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"{py} cannot import tvm, torch and Relax's PyTorch importer: {last}"
    return py, ""


def bench_tvm(py: str, rows: list[dict], args, data: str) -> dict:
    """Per model: the TVM child's JSON row (``latency_s``, ``tune_s``, ... or ``error``)."""
    env = dict(os.environ)
    for v in THREAD_VARS:
        env[v] = str(args.threads)
    out: dict = {}
    for r in rows:  # one child per model: a crash or a timeout costs that model only
        cmd = (
            [
                py,
                os.path.join(HERE, "_tvm_models.py"),
                "--data",
                data,
                "--models",
                r["name"],
                "--trials",
                str(max(r["trials"], 1)),
                "--per-task",
                str(max(args.trials_per_task, 1)),
                "--threads",
                str(args.threads),
            ]
            + (["--quick"] if args.quick else [])
            + (["--keep", args.tvm_keep] if args.tvm_keep else [])
        )
        log = os.path.join(data, f"{r['name']}.tvm.log")
        try:
            with open(log, "w") as f:
                p = subprocess.run(
                    cmd, env=env, stdout=subprocess.PIPE, stderr=f, text=True, timeout=args.tvm_timeout
                )
        except subprocess.TimeoutExpired:
            out[r["name"]] = {"error": f"timed out after {args.tvm_timeout} s"}
            continue
        lines = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
        res = next((ln for ln in lines if ln.get("model") == r["name"]), None)
        if res is None:
            with open(log) as f:
                tail = f.read()[-400:]
            res = {"error": f"the TVM child exited {p.returncode}: {tail}"}
        res["versions"] = next((ln["versions"] for ln in lines if "versions" in ln), {})
        out[r["name"]] = res
        got = (
            f"{res['latency_s'] * 1e3:.3f} ms after {res['tune_s']:.0f} s"
            if "latency_s" in res
            else res["error"]
        ) + (" (kept from an earlier run)" if "reused" in res else "")
        print(f"  {r['name']}: TVM {got}", flush=True)
    return out


def fmt_ms(s) -> str:
    return f"{s * 1e3:.3f}" if isinstance(s, float) else "-"


def ratio(a, b) -> str:
    return f"{a / b:.2f}" if isinstance(a, float) and isinstance(b, float) and b > 0 else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the tiny test variants")
    ap.add_argument("--models", default="resnet18,mobilenet_v2,bert_layer")
    ap.add_argument("--trials-per-task", type=int, default=64)
    ap.add_argument("--max-trials", type=int, default=1000, help="cap on the total budget per model")
    ap.add_argument("--workers", type=int, default=None, help="workbench's measuring workers")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile")
    ap.add_argument("--tvm-python", default=None)
    ap.add_argument("--no-tvm", action="store_true")
    ap.add_argument(
        "--tvm-keep",
        default=None,
        help="folder where TVM's tuned models are kept; a later run with the same budget times "
        "them again instead of re-tuning (TVM tunes once, both are timed side by side each run)",
    )
    ap.add_argument(
        "--wb-keep",
        default=None,
        help="folder where workbench's tuning databases are kept (per model and budget); a later "
        "run with the same budget re-times the tuned model instead of re-tuning",
    )
    ap.add_argument("--tvm-timeout", type=int, default=7200, help="seconds per model for the TVM child")
    ap.add_argument("--json", default=None, help="write every figure here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    load0 = os.getloadavg()[0]
    print(
        f"CPU: {cpu_model()}; {os.cpu_count()} cores, {args.threads} threads for every framework; "
        f"torch {torch.__version__}; load average {load0:.2f}\n"
        f"budget per model: min({args.trials_per_task} trials x tasks, {args.max_trials})",
        flush=True,
    )
    tvm_py, tvm_why = (None, "--no-tvm") if args.no_tvm else find_tvm_python(args.tvm_python)
    with tempfile.TemporaryDirectory() as data:
        rows = []
        for name in args.models.split(","):
            try:
                rows.append(bench_workbench(name, args, data))
            except Exception:
                traceback.print_exc()
                raise
            r = rows[-1]
            print(
                f"  {name}: eager {fmt_ms(r['eager'])} ms, torch.compile "
                f"{fmt_ms(r['compile'].get('latency'))} ms, untuned {fmt_ms(r['untuned'])} ms, tuned "
                f"{fmt_ms(r.get('tuned'))} ms after {r.get('tune_s', 0):.0f} s ({r['trials']} trials"
                f"{', kept from an earlier run' if r.get('kept') else ''})",
                flush=True,
            )
        tvm = bench_tvm(tvm_py, rows, args, data) if tvm_py else {}
    for r in rows:
        r["tvm"] = tvm.get(r["name"], {"error": tvm_why})

    print()
    head = (
        f"{'model':<13}{'tasks':>6}{'trials':>7}{'eager':>9}{'compile':>9}{'untuned':>10}{'tuned':>9}"
        f"{'TVM':>9}{'untuned/eager':>14}{'tuned/eager':>12}{'tuned/TVM':>10}{'tune s':>8}{'TVM s':>7}"
    )
    print("latency in ms at batch 1")
    print(head)
    for r in rows:
        t = r["tvm"]
        tvm_lat = t.get("latency_s")
        print(
            f"{r['name']:<13}{r['tasks']:>6}{r['trials']:>7}{fmt_ms(r['eager']):>9}"
            f"{fmt_ms(r['compile'].get('latency')):>9}{fmt_ms(r['untuned']):>10}{fmt_ms(r.get('tuned')):>9}"
            f"{fmt_ms(tvm_lat):>9}{ratio(r['untuned'], r['eager']):>14}"
            f"{ratio(r.get('tuned'), r['eager']):>12}"
            f"{ratio(r.get('tuned'), tvm_lat):>10}{r.get('tune_s', 0):>8.0f}"
            f"{t['tune_s'] if 'tune_s' in t else float('nan'):>7.0f}"
        )
    print("ratios: latency / the other's latency (below 1: workbench is faster)")
    for r in rows:
        notes = [
            f"tuned tasks {r.get('hits', 0)}/{r['tasks']}",
            f"max abs error untuned {r['err_untuned']:.2g}",
        ]
        if "err_tuned" in r:
            notes.append(f"tuned {r['err_tuned']:.2g}")
        if "error" in r["compile"]:
            notes.append(f"torch.compile: {r['compile']['error']}")
        else:
            notes.append(f"torch.compile compiled in {r['compile']['compile_s']:.0f} s")
        t = r["tvm"]
        if "error" in t:
            notes.append(f"TVM: {t['error']}")
        else:
            notes.append(f"TVM max abs error {t['max_abs_err']:.2g}{'' if t['matches'] else ' (DIFFERS)'}")
        print(f"  {r['name']}: " + "; ".join(notes))
    print("graph executor overhead (untuned build):")
    for r in rows:
        o = r["overhead"]
        print(
            f"  {r['name']}: model {o['model'] * 1e3:.3f} ms, its {o['steps']} kernels timed alone "
            f"{o['kernels'] * 1e3:.3f} ms ({(o['model'] - o['kernels']) / o['model'] * 100:+.1f} %), "
            f"the dispatch loop alone {o['dispatch'] * 1e6:.1f} us ({o['dispatch'] / o['model'] * 100:.3f} %)"
        )
    load1 = os.getloadavg()[0]
    print(
        f"load average {load0:.2f} at the start, {load1:.2f} at the end, on {os.cpu_count()} cores "
        "(above the cores, parallel kernels wait for descheduled threads: docs/design.md "
        "'Spinning threads, bounded')"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                dict(cpu=cpu_model(), cores=os.cpu_count(), load=[load0, load1], rows=rows), f, indent=1
            )


if __name__ == "__main__":
    main()
