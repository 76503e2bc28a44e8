"""workbench vs TVM MetaSchedule on this machine, side by side in one run.

    python bench/vs_tvm.py --tvm-python PY                  # the six workloads, 64 trials each
    python bench/vs_tvm.py --workloads GMM,NRM --trials 8 --rounds 2     # a smoke run
    python bench/vs_tvm.py --skip-tune-tvm RUN --skip-tune-wb RUN        # only re-time RUN's

TVM is never a dependency of workbench: its side runs in a virtualenv of its own, whose Python
is ``--tvm-python``, else ``$WB_TVM_PYTHON``, else ``.venv-tvm/bin/python`` in the repository's
root. Made with (Linux x86-64, Python 3.11, pip only; a C compiler exports the tuned kernels)

    python3.11 -m venv .venv-tvm
    .venv-tvm/bin/pip install "apache-tvm==0.27.0.post1" "apache-tvm-ffi==0.1.14.post1" \\
        xgboost psutil cloudpickle tornado

Keep the apache-tvm-ffi pin: later versions crash in TVM 0.27's JSON serialization.

1. **TVM** tunes: ``bench/_tvm_tune.py``, run by TVM's Python, runs
   ``tvm.s_tir.meta_schedule.tune_tir`` on TVM's te workloads (``te_workload`` at the
   MetaSchedule paper's shapes, which are workbench's) and exports, per workload, the best
   record's kernel (``RUN/tvm/<WL>.so``) and the best record among the first k lines of the
   JSON database for each budget k of 16 and 32 below ``--trials`` (its trace applied in TVM and
   compiled by ``tvm.compile``). The databases stay in ``RUN/tvm/<WL>/`` (``workbench
   import-tvm`` and ``bench/same_schedule.py`` read them).
2. **workbench** tunes the same workloads with the same budget, batch size and seed:
   ``wb.tune`` into ``RUN/wb.sqlite``. Its kernel at budget k: the pick (``Database.best``'s
   rule) among the records up to the k-th trial, in measurement order; at ``--trials``, the
   tuner's own final pick (``Database.best``, with its interleaved final re-measurement).
3. **First harness**: ``--rounds`` rounds of fresh child processes in the order TVM
   (``bench/_tvm_side.py``: the exported ``.so`` files through ``tvm.runtime``), workbench (the
   chosen records, rebuilt), numpy (in the same layouts), then the FMA peak (``bench/peak.py``)
   in this process. Each child times every kernel, the final ones and those of the smaller
   budgets, with a plain Python loop of calls (``timing.time_calls``: ``--repeat`` repeats of at
   least ``--min-repeat-ms``) on the same inputs, generated once here and passed as ``.npy``
   files, and saves its outputs, checked here against the float64 numpy reference (rtol 1e-4,
   atol 1e-4 max|ref|). A figure is the median of all repeats of all rounds. Every framework
   runs ``--threads`` threads (``TVM_NUM_THREADS``, OpenBLAS's, workbench's ``-num-cores``).
4. **Second harness**: the two final kernels of each workload again, ``--rounds2`` rounds in
   the other order (workbench first, then TVM; the workloads reversed), each timed by its own
   framework's timer: ``kernel.time`` for workbench, TVM's ``time_evaluator`` (a C++ loop: no
   Python call in the timed loop, where ``kernel.time`` calls the kernel's entry from Python,
   about 0.1-0.2 us per call).
5. **The table**: ms of each, workbench/TVM and workbench/numpy, GFLOP/s and % of the FMA peak
   measured in this run, workbench/TVM of the best kernels at 16, 32 and ``--trials`` trials
   timed in the first harness, and workbench/TVM in the second harness; the geometric mean of
   each ratio column; then a table per budget with the ms of both and each tuner's own best
   measurement. ``uptime``'s load averages before and after are printed (other work on the
   machine makes every figure noisier). Everything goes to ``RUN/results.json`` too. Every
   ratio is between figures of this run: nothing is compared with a figure recorded elsewhere.

RUN is ``bench/out/vs_tvm/<date-time>/`` unless ``--work-dir`` says otherwise.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from timing import NUMPY, time_calls  # noqa: E402  (bench/timing.py)

WORKLOADS = ("GMM", "C1D", "C2D", "DEP", "NRM", "SFM")  # TVM's te workloads, the paper's six
NO_GFLOPS = {"SFM"}  # exp, max and division: no agreed FLOP count
TVM_PYTHONS = (os.path.join(ROOT, ".venv-tvm", "bin", "python"),)  # after --tvm-python, $WB_TVM_PYTHON
THREAD_VARS = ("TVM_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
KINDS = ("tvm", "wb", "numpy")  # the order of the children in every round of the first harness
SMALL_BUDGETS = (16, 32)  # best@k besides the final kernels, for the k below --trials

INSTALL = """\
No Python with TVM found ({tried}).
bench/vs_tvm.py runs TVM MetaSchedule in a virtualenv of its own (TVM is never a dependency
of workbench). Make one (Linux x86-64, Python 3.11, pip only; a C compiler exports the tuned
kernels), e.g. in the repository's root, where the bench finds it by itself:

    python3.11 -m venv .venv-tvm
    .venv-tvm/bin/pip install "apache-tvm==0.27.0.post1" "apache-tvm-ffi==0.1.14.post1" \\
        xgboost psutil cloudpickle tornado

Keep the apache-tvm-ffi pin (later versions crash in TVM 0.27's JSON serialization). Elsewhere,
pass --tvm-python PATH/bin/python or set WB_TVM_PYTHON."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--workloads", default=",".join(WORKLOADS), help=f"comma-separated subset of {','.join(WORKLOADS)}"
    )
    p.add_argument("--trials", type=int, default=64, help="trial budget per workload, both tuners")
    p.add_argument("--per-iter", type=int, default=16, help="candidates per search round, both")
    p.add_argument(
        "--threads",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="threads of every framework (default: all cores)",
    )
    p.add_argument("--seed", type=int, default=1, help="search seed of both tuners")
    p.add_argument(
        "--mcpu",
        default="",
        help="LLVM CPU both compilers generate code for (default: the host's); e.g. "
        "znver3 on an AVX-512 host compares them at AVX2 width",
    )
    p.add_argument("--rounds", type=int, default=5, help="timing rounds (TVM, workbench, numpy)")
    p.add_argument(
        "--rounds2",
        type=int,
        default=3,
        help="rounds of the second harness (workbench then TVM, each with its own timer)",
    )
    p.add_argument("--repeat", type=int, default=10, help="timing repeats per child and workload")
    p.add_argument("--min-repeat-ms", type=float, default=40.0, help="least duration of a repeat")
    p.add_argument(
        "--tvm-python",
        help="Python of a virtualenv with TVM (default: $WB_TVM_PYTHON, then .venv-tvm in the "
        "repository's root)",
    )
    p.add_argument(
        "--skip-tune-tvm",
        metavar="DIR",
        help="reuse TVM's tuned kernels: DIR/<WL>.so (a RUN or its tvm/ folder)",
    )
    p.add_argument(
        "--skip-tune-wb",
        metavar="DB",
        help="reuse workbench's tuning database (a .sqlite, or a RUN holding wb.sqlite)",
    )
    p.add_argument("--work-dir", help="default: bench/out/vs_tvm/<date-time>")
    # a child of the timing rounds (internal)
    p.add_argument("--_child", choices=("wb", "numpy"), help=argparse.SUPPRESS)
    p.add_argument("--_data", help=argparse.SUPPRESS)
    p.add_argument("--_db", help=argparse.SUPPRESS)
    p.add_argument("--_target", help=argparse.SUPPRESS)
    p.add_argument("--_kernels", help=argparse.SUPPRESS)
    p.add_argument("--_timer", choices=("loop", "kernel.time"), default="loop", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.names = [n.strip().upper() for n in args.workloads.split(",") if n.strip()]
    unknown = [n for n in args.names if n not in WORKLOADS]
    if unknown:
        p.error(f"--workloads: unknown {unknown}; the bench has {', '.join(WORKLOADS)}")
    return args


# ------------------------------------------------------------------------------------------
# the children of the timing rounds (TVM's is bench/_tvm_side.py)
def load_data(data: str, name: str):
    """The parameters of ``name`` as the parent wrote them, outputs filled with NaN."""
    with open(os.path.join(data, "manifest.json")) as f:
        entry = json.load(f)[name]
    arrays = [np.load(os.path.join(data, p)) for p in entry["params"]]
    for k in entry["outputs"]:
        arrays[k].fill(np.nan)
    return arrays, entry


def save_outputs(data: str, name: str, kind: str, outputs) -> None:
    for j, out in enumerate(outputs):
        np.save(os.path.join(data, f"{name}.{kind}.out{j}.npy"), np.asarray(out))


def child_wb(args) -> dict:
    """workbench's child: each chosen record (``--_kernels``: workload -> {label: index in the
    database's records of the workload, re-measurements included}) rebuilt and timed."""
    import llvmlite
    import workbench as wb
    from workbench.tune import Database

    db = Database.open(args._db)
    with open(args._kernels) as f:
        chosen = json.load(f)
    out = {
        "versions": {
            "workbench": getattr(wb, "__version__", "?"),
            "numpy": np.__version__,
            "llvmlite": llvmlite.__version__,
        },
        "workloads": {},
    }
    for name in args.names:
        func = wb.workloads.get(name)
        recs = db.records(func, args._target, remeasured=True)
        out["workloads"][name] = {}
        for label, index in chosen[name].items():
            arrays, entry = load_data(args._data, name)
            arrays = [wb.aligned(a) for a in arrays]  # 64-byte aligned, as TVM's tensors are
            kernel = wb.build(recs[index].schedule(), args._target)
            kernel(*arrays)  # checks the arguments once; the timed loop calls the entry directly
            save_outputs(args._data, name, f"wb.{label}", [arrays[k] for k in entry["outputs"]])
            if args._timer == "loop":
                entry_fn = kernel.entry
                samples = time_calls(lambda: entry_fn(*arrays), args.repeat, args.min_repeat_ms)
            else:
                # plain repeats (windows=1), as TVM's time_evaluator on the other side
                timed = kernel.time(*arrays, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms, windows=1)
                samples = list(timed.samples)
            out["workloads"][name][label] = {"samples": samples}
    return out


def child_numpy(args) -> dict:
    out = {"versions": {"numpy": np.__version__}, "workloads": {}}
    for name in args.names:
        arrays, entry = load_data(args._data, name)
        inputs = [a for k, a in enumerate(arrays) if k not in entry["outputs"]]
        fn = NUMPY[name](entry["shape"])
        save_outputs(args._data, name, "numpy", [fn(*inputs)])
        samples = time_calls(lambda: fn(*inputs), args.repeat, args.min_repeat_ms)
        out["workloads"][name] = {"numpy": {"samples": samples}}
    return out


def run_child(cmd, env) -> dict:
    """A child's JSON (its last stdout line), or {"error": ...}."""
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 1800 s"}
    if p.returncode != 0 or not p.stdout.strip():
        return {"error": f"exit {p.returncode}: {(p.stderr or p.stdout)[-1500:]}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------
# the parent
def find_tvm_python(explicit):
    candidates = [explicit] if explicit else [os.environ.get("WB_TVM_PYTHON"), *TVM_PYTHONS]
    tried = []
    for py in filter(None, candidates):
        if not os.path.exists(py):
            tried.append(f"{py}: missing")
            continue
        probe = subprocess.run(
            [py, "-c", "import sys; sys.modules['torch'] = None; import tvm; print(tvm.__version__)"],
            capture_output=True,
            text=True,
        )
        if probe.returncode == 0:
            return py
        tried.append(f"{py}: cannot import tvm")
    sys.stderr.write(INSTALL.format(tried="; ".join(tried) or "none given") + "\n")
    sys.exit(2)


def host_info(threads: int, target: str) -> dict:
    import llvmlite
    import llvmlite.binding as llvm

    info = {
        "cpu_model": "?",
        "llvm_cpu": llvm.get_host_cpu_name(),
        "cores": len(os.sched_getaffinity(0)),
        "threads": threads,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "llvmlite": llvmlite.__version__,
        "llvm": ".".join(map(str, llvm.llvm_version_info)),
    }
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
        info["cpu_model"] = next(x.split(":", 1)[1].strip() for x in lines if x.startswith("model name"))
        flags = set(next(x.split(":", 1)[1].split() for x in lines if x.startswith("flags")))
        info["isa"] = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
        from workbench.target import Target

        t = Target(target)
        if "mcpu" in t.options:  # code for another CPU than the host's: report its width
            info["llvm_cpu"] = t.mcpu
            info["isa"] = {512: "AVX-512", 256: "AVX2"}.get(t.vector_width_bits, "SSE")
            info["isa"] += f" (code for -mcpu={t.mcpu} on a {llvm.get_host_cpu_name()} host)"
    except (OSError, StopIteration):
        info["isa"] = "?"
    import workbench as wb

    info["workbench"] = getattr(wb, "__version__", "?")
    return info


def budgets_of(trials: int) -> list[int]:
    """The budgets whose best kernels are timed: 16 and 32 below ``trials``, and ``trials``."""
    return [k for k in SMALL_BUDGETS if k < trials] + [trials]


def tune_tvm(py, args, tvm_dir, env) -> None:
    """``bench/_tvm_tune.py`` in TVM's Python: tuning, and the export of the kernels."""
    cmd = [
        py,
        os.path.join(HERE, "_tvm_tune.py"),
        "--work-dir",
        tvm_dir,
        "--workloads",
        ",".join(args.names),
        "--trials",
        str(args.trials),
        "--trials-per-iter",
        str(args.per_iter),
        "--threads",
        str(args.threads),
        "--seed",
        str(args.seed),
        "--budgets",
        ",".join(str(k) for k in budgets_of(args.trials)[:-1]),
    ]
    if args.mcpu:
        cmd += ["--mcpu", args.mcpu]
    log_path = os.path.join(tvm_dir, "tune.log")
    with open(log_path, "w") as log:
        log.write(" ".join(cmd) + "\n")
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tvm_dir
        )
        for line in proc.stdout:
            log.write(line)
            if line.startswith("[tune]"):
                print("  TVM " + line[len("[tune]") :].strip(), flush=True)
        if proc.wait():
            sys.exit(f"bench/_tvm_tune.py failed (exit {proc.returncode}); see {log_path}")


def tvm_tuner_stats(tvm_dir, names, budgets) -> dict:
    """Per workload: trials, tuning seconds, the tuner's own bests and the kernel of each
    budget (``_tvm_tune.py``'s results.json)."""
    path = os.path.join(tvm_dir, "results.json")
    wls = json.load(open(path))["workloads"] if os.path.exists(path) else {}
    out = {}
    for name in names:
        w = wls.get(name, {})
        kernels = {
            label: {**kern, "so": os.path.join(tvm_dir, os.path.basename(kern["so"]))}  # the run may move
            for label, kern in w.get("kernels", {}).items()
        }
        marks = w.get("tuner_best_at", {})
        if not kernels and os.path.exists(os.path.join(tvm_dir, name + ".so")):
            kernels = {"final": {"so": os.path.join(tvm_dir, name + ".so")}}  # an older run: no budgets
        final = kernels.get("final", {})
        chosen = {}
        for k in budgets:
            if k == budgets[-1]:
                chosen[str(k)] = final
            elif "database_records" in w and w["database_records"] <= k:
                chosen[str(k)] = final  # the search measured no more than k: its best is best@k
            else:
                chosen[str(k)] = kernels.get(str(k), {})
        out[name] = {
            "trials": w.get("database_records"),
            "failed": w.get("trials_failed"),
            "tune_s": w.get("tune_wall_s"),
            "best_ms": final.get("tuner_ms"),
            "best_at_ms": {k: v.get("best_ms") for k, v in marks.items()},
            "error": w.get("error"),
            "database": os.path.join(tvm_dir, name),
            "chosen": {
                k: {"record": v.get("record"), "so": v.get("so"), "tuner_ms": v.get("tuner_ms")}
                for k, v in chosen.items()
            },
        }
    return out


def tune_wb(args, db_path, target) -> dict:
    import workbench as wb
    from workbench.tune import TuneTask

    seconds = {}
    for name in args.names:
        t0 = time.monotonic()
        wb.tune(
            TuneTask.workload(name),
            target=target,
            trials=args.trials,
            database=db_path,
            seed=args.seed,
            num_trials_per_iter=args.per_iter,
            verbose=False,
            baseline=False,
        ).close()
        seconds[name] = time.monotonic() - t0
        print(f"  workbench {name} {args.trials} trials: {seconds[name]:.0f} s", flush=True)
    return seconds


def wb_tuner_stats(db_path, target, names, seconds, budgets) -> dict:
    """Per workload: trials, tuning seconds, the tuner's own bests, and the record of each
    budget: at the full budget the tuner's pick (``Database.best``), below it the pick among
    the records up to the k-th trial (re-measurements that came before it included)."""
    import workbench as wb
    from workbench.tune import Database
    from workbench.tune.database.base import pick

    out = {}
    with Database.open(db_path) as db:
        for name in names:
            func = wb.workloads.get(name)
            recs = db.records(func, target, remeasured=True)
            trial_at = [i for i, r in enumerate(recs) if r.trial]
            index = {id(r): i for i, r in enumerate(recs)}
            best = db.best(func, target)
            same = lambda r: (r.trace_hash, r.timestamp, tuple(r.latencies))  # noqa: E731
            final = next((i for i, r in enumerate(recs) if best is not None and same(r) == same(best)), None)
            chosen = {}
            for k in budgets:
                i = final
                if k < budgets[-1] and k < len(trial_at):
                    rec = pick(recs[: trial_at[k - 1] + 1])
                    i = None if rec is None else index[id(rec)]
                chosen[str(k)] = {
                    "record": i,
                    "tuner_ms": None if i is None else recs[i].latency * 1e3,
                    "trace_hash": None if i is None else recs[i].trace_hash,
                }
            lat = [recs[i].latency for i in trial_at]
            marks = sorted({*(k for k in (16, 32, 64, 128, 256, 512) if k < len(lat)), len(lat)})
            best_at = {str(k): min(lat[:k]) * 1e3 for k in marks if k and math.isfinite(min(lat[:k]))}
            out[name] = {
                "trials": len(lat),
                "failed": sum(not recs[i].ok for i in trial_at),
                "remeasurements": len(recs) - len(lat),
                "tune_s": seconds.get(name),
                "best_ms": None if best is None else best.latency * 1e3,
                "best_at_ms": best_at,
                "chosen": chosen,
            }
    return out


def write_inputs(names, data_dir, seed) -> dict:
    """Every workload's parameters as .npy files plus manifest.json; returns the references."""
    import workbench as wb

    manifest, refs = {}, {}
    for name in names:
        func = wb.workloads.get(name)
        outputs = wb.workloads.output_params(func)
        arrays = wb.workloads.random_args(name, seed=seed)
        params = []
        for k, a in enumerate(arrays):
            params.append(f"{name}.p{k}.npy")
            np.save(os.path.join(data_dir, params[-1]), a)
        manifest[name] = {"params": params, "outputs": outputs, "shape": wb.workloads.lookup(name).shape()}
        ref = wb.workloads.reference(name)(*[a for k, a in enumerate(arrays) if k not in outputs])
        refs[name] = list(ref) if isinstance(ref, (list, tuple)) else [ref]
    with open(os.path.join(data_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return refs


def check(data_dir, name, kind, refs) -> dict:
    """The output ``kind`` saved, against the float64 numpy reference (rtol 1e-4, atol 1e-4 max|ref|)."""
    worst, ok = 0.0, True
    for j, ref in enumerate(refs):
        path = os.path.join(data_dir, f"{name}.{kind}.out{j}.npy")
        if not os.path.exists(path):
            return {"ok": False, "error": "no output saved"}
        got = np.load(path).astype(np.float64).reshape(np.shape(ref))
        ref = np.asarray(ref, dtype=np.float64)
        scale = float(np.max(np.abs(ref))) or 1.0
        ok &= bool(np.allclose(got, ref, rtol=1e-4, atol=1e-4 * scale))
        worst = max(worst, float(np.nanmax(np.abs(got - ref))) / scale if got.size else 0.0)
    return {"ok": ok, "max_err_rel_to_max": worst}


def kernel_sets(names, budgets, wb_stats, tvm_stats) -> tuple[dict, dict]:
    """What each child times: workload -> {label: workbench record index / TVM .so}, one label per
    distinct kernel ("final", else the smallest budget it is the best of); and workload ->
    {budget: (workbench label, TVM label)}."""
    timed = {"wb": {}, "tvm": {}}
    alias = {}
    for name in names:
        alias[name] = {}
        for kind, stats, key in (("wb", wb_stats, "record"), ("tvm", tvm_stats, "so")):
            chosen = stats[name]["chosen"]
            labels = timed[kind].setdefault(name, {"final": chosen[str(budgets[-1])][key]})
            for k in budgets:
                what = chosen[str(k)][key]
                label = next((lab for lab, v in labels.items() if v == what), None)
                if label is None and what is not None:  # None: nothing succeeded in k trials
                    label = str(k)
                    labels[label] = what
                alias[name].setdefault(str(k), {})[kind] = label
    return timed, alias


def run_harness(order, cmds, names, n_rounds, env, title, peak=None, threads=1) -> tuple:
    """``n_rounds`` rounds of the children in ``order``; per kind, workload and label the
    samples of each round; the children's errors and versions; the FMA peak after each round."""
    rounds = {k: {n: {} for n in names} for k in order}
    errors, versions, peak_gflops = {}, {}, []
    for rd in range(n_rounds):
        print(
            f"  {title} round {rd + 1}/{n_rounds}: {', '.join(order)}" + (", FMA peak" if peak else ""),
            flush=True,
        )
        for kind in order:
            out = run_child(cmds[kind], env)
            if "error" in out:
                errors.setdefault(kind, out["error"])
                print(f"    {kind} child failed: {out['error'].strip().splitlines()[-1]}", flush=True)
                continue
            versions[kind] = out["versions"]
            for name, labels in out["workloads"].items():
                for label, r in labels.items():
                    rounds[kind][name].setdefault(label, []).append(r["samples"])
        if peak is not None:
            peak_gflops += peak.measure(threads, runs=3)
    return rounds, errors, versions, peak_gflops


def child_cmds(args, tvm_py, db_path, target, data_dir, names, kernels, timers) -> dict:
    """The children's command lines; ``kernels``: kind -> the JSON file of what it times."""
    common = [
        "--workloads",
        ",".join(names),
        "--repeat",
        str(args.repeat),
        "--min-repeat-ms",
        str(args.min_repeat_ms),
    ]
    me = [sys.executable, os.path.abspath(__file__)]
    return {
        "tvm": [
            tvm_py,
            os.path.join(HERE, "_tvm_side.py"),
            "--kernels",
            kernels["tvm"],
            "--data",
            data_dir,
            "--timer",
            timers["tvm"],
        ]
        + common,
        "wb": me
        + [
            "--_child",
            "wb",
            "--_data",
            data_dir,
            "--_db",
            db_path,
            "--_target",
            target,
            "--_kernels",
            kernels["wb"],
            "--_timer",
            timers["wb"],
        ]
        + common,
        "numpy": me + ["--_child", "numpy", "--_data", data_dir] + common,
    }


def time_rounds(args, tvm_py, db_path, target, data_dir, env, peak, timed) -> dict:
    """Both harnesses: the first times every kernel, the second the final ones again."""
    files = {}
    for kind in ("wb", "tvm"):
        for harness, sets in (
            ("first", timed[kind]),
            ("second", {n: {"second": v["final"]} for n, v in timed[kind].items()}),
        ):
            files[kind, harness] = os.path.join(data_dir, f"{kind}_kernels_{harness}.json")
            with open(files[kind, harness], "w") as f:
                json.dump(sets, f, indent=1)
    first = child_cmds(
        args,
        tvm_py,
        db_path,
        target,
        data_dir,
        args.names,
        {k: files[k, "first"] for k in ("wb", "tvm")},
        {"wb": "loop", "tvm": "loop"},
    )
    second = child_cmds(
        args,
        tvm_py,
        db_path,
        target,
        data_dir,
        args.names[::-1],
        {k: files[k, "second"] for k in ("wb", "tvm")},
        {"wb": "kernel.time", "tvm": "evaluator"},
    )
    r1, e1, v1, pk = run_harness(
        KINDS, first, args.names, args.rounds, env, "first harness", peak, args.threads
    )
    r2, e2, v2, _ = run_harness(("wb", "tvm"), second, args.names, args.rounds2, env, "second harness")
    errors = {
        **{f"{k} (first harness)": v for k, v in e1.items()},
        **{f"{k} (second harness)": v for k, v in e2.items()},
    }
    return {"first": r1, "second": r2, "errors": errors, "versions": {**v2, **v1}, "peak_gflops": pk}


def summary(per_round) -> dict | None:
    flat = [x for r in per_round for x in r]
    if not flat:
        return None
    return {
        "median_ms": statistics.median(flat) * 1e3,
        "min_ms": min(flat) * 1e3,
        "round_medians_ms": [statistics.median(r) * 1e3 for r in per_round],
        "samples": len(flat),
    }


def fmt(x, spec=".2f"):
    return "-" if x is None or not math.isfinite(x) else format(x, spec)


def fmt_ms(ms):
    return "-" if ms is None else f"{ms:.4f}" if ms < 1 else f"{ms:.3f}" if ms < 10 else f"{ms:.1f}"


def geomean(values) -> float | None:
    values = [v for v in values if v]
    return math.exp(statistics.fmean(map(math.log, values))) if values else None


def uptime() -> str:
    """``uptime``'s line (the load averages: other work on the machine makes figures noisy)."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def table(head, rows) -> None:
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    line = lambda r: "  ".join(str(c).rjust(wd) for c, wd in zip(r, widths))  # noqa: E731
    print(line(head) + "\n" + "-" * len(line(head)))
    for r in rows:
        print(line(r))


def print_table(res) -> None:
    meta, wls, pk, s = res["meta"], res["workloads"], res["peak"]["median_gflops"], res["summary"]
    h, budgets = meta["host"], meta["budgets"]
    print(f"\nworkbench vs TVM MetaSchedule, side by side in one run, {meta['date']}")
    trials = {
        k: "/".join(sorted({str(w["tuner"][k]["trials"]) for w in wls.values()})) for k in ("wb", "tvm")
    }
    print(
        f"CPU {h['cpu_model']} (LLVM: {h['llvm_cpu']}), {h['isa']}, {h['threads']} threads "
        f"({h['cores']} cores); trials measured per workload: workbench {trials['wb']}, TVM "
        f"{trials['tvm']}; first harness: {meta['rounds']} rounds x {meta['repeat']} repeats "
        f">= {meta['min_repeat_ms']:g} ms; second: {meta['rounds2']} rounds"
    )
    tv = meta["versions"].get("tvm", {})
    print(
        f"workbench {h['workbench']} (llvmlite {h['llvmlite']}, LLVM {h['llvm']}), numpy "
        f"{h['numpy']}, Python {h['python']}; TVM {tv.get('tvm', '?')} (tvm-ffi "
        f"{tv.get('tvm_ffi', '?')}, Python {tv.get('python', '?')})"
    )
    for when, line in meta["uptime"].items():
        print(f"uptime {when}: {line}")
    for kind, src in meta.get("reused", {}).items():
        print(f"{kind} tuning reused from {src}")
    at = [f"wb/TVM@{k}" for k in budgets]
    head = [
        "WL",
        "wb ms",
        "TVM ms",
        "np ms",
        "wb/TVM",
        "wb/np",
        "wb GF/s",
        "TVM GF/s",
        "np GF/s",
        "wb %pk",
        "TVM %pk",
        *at,
        "2nd wb/TVM",
        "check",
    ]
    rows = []
    for name, w in wls.items():
        ms = {k: (w.get(k) or {}).get("median_ms") for k in KINDS}
        gf = {k: w["flops"] / (ms[k] * 1e-3) / 1e9 if w["flops"] and ms[k] else None for k in KINDS}
        pct = {k: f"{100 * gf[k] / pk:.0f}%" if gf[k] and pk else "-" for k in ("wb", "tvm")}
        bad = [k for k, c in w["check"].items() if not c.get("ok")]
        rows.append(
            [
                name,
                fmt_ms(ms["wb"]),
                fmt_ms(ms["tvm"]),
                fmt_ms(ms["numpy"]),
                fmt(w.get("wb_over_tvm")),
                fmt(w.get("wb_over_numpy")),
                fmt(gf["wb"], ".1f"),
                fmt(gf["tvm"], ".1f"),
                fmt(gf["numpy"], ".1f"),
                pct["wb"],
                pct["tvm"],
                *(fmt(w["budgets"][str(k)]["wb_over_tvm"]) for k in budgets),
                fmt(w["second"]["wb_over_tvm"]),
                "ok" if not bad else "FAIL " + ",".join(bad),
            ]
        )
    rows.append(
        [
            "geomean",
            "",
            "",
            "",
            fmt(s["geomean_wb_over_tvm"], ".3f"),
            fmt(s["geomean_wb_over_numpy"], ".3f"),
            "",
            "",
            "",
            "",
            "",
            *(fmt(s["geomean_at"][str(k)], ".3f") for k in budgets),
            fmt(s["geomean_second"], ".3f"),
            "",
        ]
    )
    table(head, rows)
    if s.get("geomean_wb_over_tvm"):
        print(
            f"wb/TVM: geometric mean {s['geomean_wb_over_tvm']:.3f} over {s['n']} workloads, "
            f"max {s['max_wb_over_tvm']:.3f} ({s['max_workload']}); second harness "
            f"{fmt(s['geomean_second'], '.3f')}, max {fmt(s['max_second'], '.3f')} "
            f"({s['max_second_workload']})"
            "  (below 1: workbench faster)"
        )
    p = res["peak"]
    print(
        f"FMA peak of this run: {p['width']}-bit vectors, {p['threads']} threads, median "
        f"{fmt(pk, '.1f')} GFLOP/s ({len(p['samples_gflops'])} runs over the rounds, best "
        f"{fmt(max(p['samples_gflops'], default=None), '.1f')})"
    )
    print(
        "ms: median of all repeats of all rounds of the first harness (a Python loop of calls, "
        "fresh child processes in the order TVM, workbench, numpy); wb/TVM@k: the best kernels at "
        "k trials, timed in the same rounds; 2nd: the final kernels in the second harness "
        "(workbench's kernel.time, then TVM's time_evaluator, workloads reversed); %pk: GFLOP/s / "
        "the FMA peak above; check: every kernel's outputs against the float64 numpy reference "
        "(rtol 1e-4)"
    )
    head = ["WL"]
    for k in budgets:
        head += [f"wb@{k} ms", f"TVM@{k} ms", f"wb/TVM@{k}", f"own@{k}"]
    head += ["2nd wb ms", "2nd TVM ms", "wb tune s", "TVM tune s"]
    rows = []
    for name, w in wls.items():
        row = [name]
        for k in budgets:
            b = w["budgets"][str(k)]
            row += [
                fmt_ms((b["wb"] or {}).get("median_ms")),
                fmt_ms((b["tvm"] or {}).get("median_ms")),
                fmt(b["wb_over_tvm"]),
                fmt(b["own_wb_over_tvm"]),
            ]
        sec = w["second"]
        row += [
            fmt_ms((sec["wb"] or {}).get("median_ms")),
            fmt_ms((sec["tvm"] or {}).get("median_ms")),
            fmt(w["tuner"]["wb"].get("tune_s"), ".0f"),
            fmt(w["tuner"]["tvm"].get("tune_s"), ".0f"),
        ]
        rows.append(row)
    row = ["geomean"]
    for k in budgets:
        row += ["", "", fmt(s["geomean_at"][str(k)], ".3f"), fmt(s["geomean_own_at"][str(k)], ".3f")]
    rows.append(row + ["", "", "", ""])
    print()
    table(head, rows)
    print(
        "wb@k / TVM@k: the best record among each tuner's first k trials (workbench: its pick, at "
        "the full budget the tuner's final pick), built and timed in the first harness; own@k: "
        "the same ratio from each tuner's own measurements of those records"
    )
    for kind, err in res.get("errors", {}).items():
        print(f"{kind} child error: {err.strip()[-600:]}")
    ph = meta["phases_s"]
    print("phases: " + ", ".join(f"{k} {v:.0f} s" for k, v in ph.items()) + f"; results in {res['path']}")


def tvm_side(args, tvm_py, work, env, phases, budgets) -> tuple[str, dict]:
    """TVM's tuned kernels (tuned now, or reused) and its tuner's figures."""
    if args.skip_tune_tvm:
        run_tvm = os.path.join(args.skip_tune_tvm, "tvm")
        tvm_dir = os.path.abspath(run_tvm if os.path.isdir(run_tvm) else args.skip_tune_tvm)
    else:
        tvm_dir = os.path.join(work, "tvm")
        os.makedirs(tvm_dir, exist_ok=True)
        print(f"[1/4] TVM MetaSchedule tunes ({tvm_py})", flush=True)
        t0 = time.monotonic()
        tune_tvm(tvm_py, args, tvm_dir, env)
        phases["TVM tuning"] = time.monotonic() - t0
    stats = tvm_tuner_stats(tvm_dir, args.names, budgets)
    missing = [
        n for n in args.names if not os.path.exists(stats[n]["chosen"][str(budgets[-1])].get("so") or "")
    ]
    if missing:
        sys.exit(
            f"no tuned TVM kernel for {', '.join(missing)} in {tvm_dir}: "
            + "; ".join(f"{n}: {stats[n].get('error')}" for n in missing)
        )
    return tvm_dir, stats


def wb_side(args, target, work, phases, budgets) -> tuple[str, dict]:
    """workbench's tuning database (tuned now, or reused) and its tuner's figures."""
    seconds = {}
    if args.skip_tune_wb:
        db_path = args.skip_tune_wb
        if os.path.isdir(db_path):
            db_path = os.path.join(db_path, "wb.sqlite")
        if not os.path.exists(db_path):
            sys.exit(f"--skip-tune-wb: no database at {db_path}")
        db_path = os.path.abspath(db_path)
    else:
        db_path = os.path.join(work, "wb.sqlite")
        print(f"[2/4] workbench tunes (target {target!r}, database {db_path})", flush=True)
        t0 = time.monotonic()
        seconds = tune_wb(args, db_path, target)
        phases["workbench tuning"] = time.monotonic() - t0
    stats = wb_tuner_stats(db_path, target, args.names, seconds, budgets)
    missing = [n for n in args.names if stats[n]["best_ms"] is None]
    if missing:
        sys.exit(f"no successful workbench record of {', '.join(missing)} on {target!r} in {db_path}")
    return db_path, stats


def ratio(a, b):
    return a / b if a and b else None


def per_workload(args, timings, data_dir, refs, wb_stats, tvm_stats, timed, alias, budgets) -> dict:
    """Each workload's figures: medians, GFLOP counts, checks, tuners' own bests, ratios."""
    import workbench as wb

    first, second = timings["first"], timings["second"]
    wls = {}
    for name in args.names:
        w = wls[name] = {
            "wb": summary(first["wb"][name].get("final", [])),
            "tvm": summary(first["tvm"][name].get("final", [])),
            "numpy": summary(first["numpy"][name].get("numpy", [])),
        }
        w["flops"] = None if name in NO_GFLOPS else wb.workloads.flops(name)
        w["check"] = {"numpy": check(data_dir, name, "numpy", refs[name])}
        for kind in ("wb", "tvm"):
            for label in timed[kind][name]:
                w["check"][f"{kind}.{label}"] = check(data_dir, name, f"{kind}.{label}", refs[name])
            w["check"][f"{kind}.second"] = check(data_dir, name, f"{kind}.second", refs[name])
        w["tuner"] = {"wb": wb_stats[name], "tvm": tvm_stats[name]}
        ms = {k: (w[k] or {}).get("median_ms") for k in KINDS}
        w["wb_over_tvm"] = ratio(ms["wb"], ms["tvm"])
        w["wb_over_numpy"] = ratio(ms["wb"], ms["numpy"])
        w["budgets"] = {}
        for k in budgets:
            labels = alias[name][str(k)]
            b = {kind: summary(first[kind][name].get(labels[kind], [])) for kind in ("wb", "tvm")}
            own = {kind: w["tuner"][kind]["chosen"][str(k)]["tuner_ms"] for kind in ("wb", "tvm")}
            b.update(
                kernels=labels,
                records={kind: w["tuner"][kind]["chosen"][str(k)]["record"] for kind in ("wb", "tvm")},
                wb_over_tvm=ratio((b["wb"] or {}).get("median_ms"), (b["tvm"] or {}).get("median_ms")),
                own_ms=own,
                own_wb_over_tvm=ratio(own["wb"], own["tvm"]),
            )
            w["budgets"][str(k)] = b
        sec = {kind: summary(second[kind][name].get("second", [])) for kind in ("wb", "tvm")}
        sec["wb_over_tvm"] = ratio((sec["wb"] or {}).get("median_ms"), (sec["tvm"] or {}).get("median_ms"))
        w["second"] = sec
    return wls


def main(argv=None):
    args = parse_args(argv)
    if args._child:
        out = child_wb(args) if args._child == "wb" else child_numpy(args)
        print(json.dumps(out))
        return
    tvm_py = find_tvm_python(args.tvm_python)
    env = dict(os.environ, **{v: str(args.threads) for v in THREAD_VARS})
    stamp = datetime.datetime.now()
    work = os.path.abspath(
        args.work_dir or os.path.join(HERE, "out", "vs_tvm", stamp.strftime("%Y%m%d-%H%M%S"))
    )
    data_dir = os.path.join(work, "data")
    os.makedirs(data_dir, exist_ok=True)
    # workbench's parallel loops use the target's core count (the host's if not given)
    target = " ".join(
        ["llvm"]
        + ([f"-mcpu={args.mcpu}"] if args.mcpu else [])
        + ([f"-num-cores={args.threads}"] if args.threads != len(os.sched_getaffinity(0)) else [])
    )
    host = host_info(args.threads, target)
    budgets = budgets_of(args.trials)
    loads = {"before": uptime()}
    print(
        f"# {host['cpu_model']} ({host['llvm_cpu']}, {host['isa']}), {args.threads} threads, "
        f"{', '.join(args.names)}; work dir {work}\n# uptime before: {loads['before']}",
        flush=True,
    )

    phases = {}
    tvm_dir, tvm_stats = tvm_side(args, tvm_py, work, env, phases, budgets)
    db_path, wb_stats = wb_side(args, target, work, phases, budgets)
    timed, alias = kernel_sets(args.names, budgets, wb_stats, tvm_stats)

    loads["before timing"] = uptime()
    print(
        f"[3/4] timing: two harnesses, {args.threads} threads; uptime: {loads['before timing']}", flush=True
    )
    t0 = time.monotonic()
    from peak import FMAPeak  # bench/peak.py
    from workbench.target import Target

    peak = FMAPeak(Target(target).vector_width_bits)
    refs = write_inputs(args.names, data_dir, seed=0)
    timings = time_rounds(args, tvm_py, db_path, target, data_dir, env, peak, timed)
    phases["timing and peak"] = time.monotonic() - t0
    loads["after"] = uptime()

    wls = per_workload(args, timings, data_dir, refs, wb_stats, tvm_stats, timed, alias, budgets)
    ratios = {n: w["wb_over_tvm"] for n, w in wls.items() if w["wb_over_tvm"]}
    worst = max(ratios, key=ratios.get) if ratios else None
    seconds = {n: w["second"]["wb_over_tvm"] for n, w in wls.items() if w["second"]["wb_over_tvm"]}
    worst2 = max(seconds, key=seconds.get) if seconds else None
    reused = {
        k: v
        for k, v in (("TVM", args.skip_tune_tvm and tvm_dir), ("workbench", args.skip_tune_wb and db_path))
        if v
    }
    res = {
        "meta": {
            "date": stamp.strftime("%Y-%m-%d %H:%M"),
            "host": host,
            "target": target,
            "trials": args.trials,
            "budgets": budgets,
            "per_iter": args.per_iter,
            "seed": args.seed,
            "rounds": args.rounds,
            "rounds2": args.rounds2,
            "repeat": args.repeat,
            "min_repeat_ms": args.min_repeat_ms,
            "tvm_python": tvm_py,
            "tvm_dir": tvm_dir,
            "wb_database": db_path,
            "reused": reused,
            "versions": timings["versions"],
            "phases_s": phases,
            "uptime": loads,
            "kernels_timed": timed,
        },
        "peak": {
            "width": peak.width,
            "threads": args.threads,
            "median_gflops": statistics.median(timings["peak_gflops"]) if timings["peak_gflops"] else None,
            "samples_gflops": timings["peak_gflops"],
        },
        "workloads": wls,
        "summary": {
            "n": len(ratios),
            "geomean_wb_over_tvm": geomean(ratios.values()),
            "geomean_wb_over_numpy": geomean(w["wb_over_numpy"] for w in wls.values()),
            "max_wb_over_tvm": ratios.get(worst),
            "max_workload": worst,
            "geomean_at": {
                str(k): geomean(w["budgets"][str(k)]["wb_over_tvm"] for w in wls.values()) for k in budgets
            },
            "geomean_own_at": {
                str(k): geomean(w["budgets"][str(k)]["own_wb_over_tvm"] for w in wls.values())
                for k in budgets
            },
            "geomean_second": geomean(seconds.values()),
            "max_second": seconds.get(worst2),
            "max_second_workload": worst2,
        },
        "errors": timings["errors"],
        "path": os.path.join(work, "results.json"),
    }
    with open(res["path"], "w") as f:
        json.dump(res, f, indent=1)
    print("[4/4] results", flush=True)
    print_table(res)
    if res["errors"] or not all(c["ok"] for w in wls.values() for c in w["check"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
