"""workbench vs TVM MetaSchedule on this machine, side by side in one run.

    python bench/vs_tvm.py                                  # the six workloads, 64 trials each
    python bench/vs_tvm.py --workloads GMM,NRM --trials 8 --rounds 2     # a smoke run
    python bench/vs_tvm.py --skip-tune-tvm RUN --skip-tune-wb RUN        # only re-time RUN's

1. **TVM** tunes: the TVM anchor's ``bench.py`` (``shared/anchors/tvm``, run by the Python of a
   virtualenv with TVM, ``--tvm-python``) runs ``tvm.s_tir.meta_schedule.tune_tir`` on each
   workload and exports the best kernel as ``RUN/tvm/<WL>.so``; MetaSchedule's JSON databases
   stay in ``RUN/tvm/<WL>/`` (``workbench import-tvm`` reads them).
2. **workbench** tunes the same workloads (the anchor's te_workload shapes are workbench's paper
   shapes) with the same budget and batch size: ``wb.tune`` into ``RUN/wb.sqlite``.
3. **Timing**, ``--rounds`` rounds of fresh child processes in the order TVM
   (``bench/_tvm_side.py``: the exported ``.so`` through ``tvm.runtime``), workbench (the best
   record of the database, rebuilt), numpy (the anchor's implementations, in the same layouts),
   then the FMA peak (``bench/peak.py``) in this process. Each child times a plain Python loop
   of calls (``timing.time_calls``: ``--repeat`` repeats of at least ``--min-repeat-ms``) on
   the same inputs, generated once here and passed as ``.npy`` files, and saves its output,
   which is checked here against the float64 numpy reference (rtol 1e-4, atol 1e-4 max|ref|).
   A figure is the median of all repeats of all rounds. Every framework runs ``--threads``
   threads (``TVM_NUM_THREADS``, OpenBLAS's, workbench's ``-num-cores``).
4. **The table**: ms of each, workbench/TVM and workbench/numpy, GFLOP/s and % of the FMA peak
   measured in this run, each tuner's own best at its trial count; then the geometric mean and
   the maximum of workbench/TVM. Everything goes to ``RUN/results.json`` too. Every ratio here
   is between figures of this run: nothing is compared with a figure recorded elsewhere.

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

WORKLOADS = ("GMM", "C1D", "C2D", "DEP", "NRM", "SFM")  # the TVM anchor's six
NO_GFLOPS = {"SFM"}  # exp, max and division: no agreed FLOP count (nor in the anchor)
ANCHOR = os.path.normpath(os.path.join(ROOT, "..", "shared", "anchors", "tvm", "bench.py"))
TVM_PYTHONS = (
    os.path.join(os.path.dirname(ANCHOR), ".venv-tvm", "bin", "python"),
    os.path.normpath(os.path.join(ROOT, "..", ".venv-tvm", "bin", "python")),
)
THREAD_VARS = ("TVM_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
KINDS = ("tvm", "wb", "numpy")  # the order of the children in every round

INSTALL = """\
No Python with TVM found ({tried}).
bench/vs_tvm.py runs TVM MetaSchedule in a virtualenv of its own, made as
shared/anchors/tvm/README.md says (Linux x86-64, Python 3.11, pip only; a C compiler exports
the tuned kernels):

    python3 -m venv .venv-tvm
    .venv-tvm/bin/pip install "apache-tvm==0.27.0.post1" "apache-tvm-ffi==0.1.14.post1" \\
        xgboost psutil cloudpickle tornado

Keep the apache-tvm-ffi pin (newer versions crash in TVM's JSON serialization). Then pass
--tvm-python .venv-tvm/bin/python or set WB_TVM_PYTHON."""


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
    p.add_argument("--repeat", type=int, default=10, help="timing repeats per child and workload")
    p.add_argument("--min-repeat-ms", type=float, default=40.0, help="least duration of a repeat")
    p.add_argument(
        "--tvm-python",
        help="Python of a virtualenv with TVM (default: $WB_TVM_PYTHON, "
        "then .venv-tvm beside the anchor or beside this repository)",
    )
    p.add_argument("--tvm-bench", default=ANCHOR, help="the TVM anchor's bench.py")
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
    args = p.parse_args(argv)
    args.names = [n.strip().upper() for n in args.workloads.split(",") if n.strip()]
    unknown = [n for n in args.names if n not in WORKLOADS]
    if unknown:
        p.error(f"--workloads: unknown {unknown}; the TVM anchor has {', '.join(WORKLOADS)}")
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
    import llvmlite
    import workbench as wb
    from workbench.tune import Database

    db = Database.open(args._db)
    out = {
        "versions": {
            "workbench": getattr(wb, "__version__", "?"),
            "numpy": np.__version__,
            "llvmlite": llvmlite.__version__,
        },
        "workloads": {},
    }
    for name in args.names:
        arrays, entry = load_data(args._data, name)
        arrays = [wb.aligned(a) for a in arrays]  # 64-byte aligned, as TVM's tensors are
        rec = db.best(wb.workloads.get(name), args._target)
        kernel = wb.build(rec.schedule(), args._target)
        kernel(*arrays)  # checks the arguments once; the timed loop calls the entry directly
        save_outputs(args._data, name, "wb", [arrays[k] for k in entry["outputs"]])
        entry_fn = kernel.entry
        out["workloads"][name] = {
            "samples": time_calls(lambda: entry_fn(*arrays), args.repeat, args.min_repeat_ms)
        }
    return out


def child_numpy(args) -> dict:
    out = {"versions": {"numpy": np.__version__}, "workloads": {}}
    for name in args.names:
        arrays, entry = load_data(args._data, name)
        inputs = [a for k, a in enumerate(arrays) if k not in entry["outputs"]]
        fn = NUMPY[name](entry["shape"])
        save_outputs(args._data, name, "numpy", [fn(*inputs)])
        out["workloads"][name] = {"samples": time_calls(lambda: fn(*inputs), args.repeat, args.min_repeat_ms)}
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


def tune_tvm(py, args, tvm_dir, env) -> None:
    """The anchor's bench.py: tuning and export only (no timing rounds, no peak, no torch)."""
    cmd = [
        py,
        args.tvm_bench,
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
        "--no-torch",
        "--no-peak",
        "--rounds",
        "0",
        "--work-dir",
        tvm_dir,
        "--out",
        os.path.join(tvm_dir, "results.json"),
    ]
    if args.mcpu:
        cmd += ["--mcpu", args.mcpu]
    log_path = os.path.join(tvm_dir, "bench.log")
    with open(log_path, "w") as log:
        log.write(" ".join(cmd) + "\n")
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tvm_dir
        )
        for line in proc.stdout:
            log.write(line)
            if line.startswith("[tune]"):
                print("  TVM " + line[len("[tune]") :].rstrip(), flush=True)
        if proc.wait():
            sys.exit(f"the TVM anchor failed (exit {proc.returncode}); see {log_path}")


def tvm_tuner_stats(tvm_dir, names) -> dict:
    """Per workload: trials, tuning seconds and the tuner's own best (the anchor's JSON)."""
    path = os.path.join(tvm_dir, "results.json")
    wls = json.load(open(path))["workloads"] if os.path.exists(path) else {}
    out = {}
    for name in names:
        w = wls.get(name, {})
        marks = w.get("tuner_best_at", {})
        last = marks[max(marks, key=int)] if marks else {}
        out[name] = {
            "trials": w.get("trials_measured"),
            "failed": w.get("trials_failed"),
            "tune_s": w.get("tune_wall_s"),
            "best_ms": last.get("best_ms"),
            "best_at_ms": {k: v.get("best_ms") for k, v in marks.items()},
            "error": w.get("error"),
            "database": os.path.join(tvm_dir, name),
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


def wb_tuner_stats(db_path, target, names, seconds) -> dict:
    import workbench as wb
    from workbench.tune import Database

    out = {}
    with Database.open(db_path) as db:
        for name in names:
            recs = db.records(wb.workloads.get(name), target)
            lat = [r.latency for r in recs]
            marks = sorted({*(k for k in (16, 32, 64, 128, 256, 512) if k < len(lat)), len(lat)})
            best_at = {str(k): min(lat[:k]) * 1e3 for k in marks if k and math.isfinite(min(lat[:k]))}
            out[name] = {
                "trials": len(recs),
                "failed": sum(not r.ok for r in recs),
                "tune_s": seconds.get(name),
                "best_ms": best_at.get(str(len(lat))),
                "best_at_ms": best_at,
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
    """The output ``kind`` saved, against the float64 numpy reference (the anchor's tolerance)."""
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


def time_rounds(args, tvm_py, tvm_dir, db_path, target, data_dir, env, peak) -> tuple:
    common = [
        "--workloads",
        ",".join(args.names),
        "--repeat",
        str(args.repeat),
        "--min-repeat-ms",
        str(args.min_repeat_ms),
    ]
    cmds = {
        "tvm": [tvm_py, os.path.join(HERE, "_tvm_side.py"), "--libs", tvm_dir, "--data", data_dir] + common,
        "wb": [
            sys.executable,
            os.path.abspath(__file__),
            "--_child",
            "wb",
            "--_data",
            data_dir,
            "--_db",
            db_path,
            "--_target",
            target,
        ]
        + common,
        "numpy": [sys.executable, os.path.abspath(__file__), "--_child", "numpy", "--_data", data_dir]
        + common,
    }
    rounds = {k: {n: [] for n in args.names} for k in KINDS}
    errors, versions, peak_gflops = {}, {}, []
    for rd in range(args.rounds):
        print(f"  round {rd + 1}/{args.rounds}: TVM, workbench, numpy, FMA peak", flush=True)
        for kind in KINDS:
            out = run_child(cmds[kind], env)
            if "error" in out:
                errors.setdefault(kind, out["error"])
                print(f"    {kind} child failed: {out['error'].strip().splitlines()[-1]}", flush=True)
                continue
            versions[kind] = out["versions"]
            for name, r in out["workloads"].items():
                rounds[kind][name].append(r["samples"])
        peak_gflops += peak.measure(args.threads, runs=3)
    return rounds, errors, versions, peak_gflops


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


def print_table(res) -> None:
    meta, wls, pk = res["meta"], res["workloads"], res["peak"]["median_gflops"]
    h = meta["host"]
    print(f"\nworkbench vs TVM MetaSchedule, side by side in one run, {meta['date']}")
    trials = {
        k: "/".join(sorted({str(w["tuner"][k]["trials"]) for w in wls.values()})) for k in ("wb", "tvm")
    }
    print(
        f"CPU {h['cpu_model']} (LLVM: {h['llvm_cpu']}), {h['isa']}, {h['threads']} threads "
        f"({h['cores']} cores); trials measured per workload: workbench {trials['wb']}, TVM "
        f"{trials['tvm']}; timing: {meta['rounds']} rounds x {meta['repeat']} repeats "
        f">= {meta['min_repeat_ms']:g} ms"
    )
    tv = meta["versions"].get("tvm", {})
    print(
        f"workbench {h['workbench']} (llvmlite {h['llvmlite']}, LLVM {h['llvm']}), numpy "
        f"{h['numpy']}, Python {h['python']}; TVM {tv.get('tvm', '?')} (tvm-ffi "
        f"{tv.get('tvm_ffi', '?')}, Python {tv.get('python', '?')})"
    )
    for kind, src in meta.get("reused", {}).items():
        print(f"{kind} tuning reused from {src}")
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
        "wb best@n",
        "TVM best@n",
        "wb tune s",
        "TVM tune s",
        "check",
    ]
    rows = []
    for name, w in wls.items():
        ms = {k: (w.get(k) or {}).get("median_ms") for k in KINDS}
        gf = {k: w["flops"] / (ms[k] * 1e-3) / 1e9 if w["flops"] and ms[k] else None for k in KINDS}
        pct = {k: f"{100 * gf[k] / pk:.0f}%" if gf[k] and pk else "-" for k in ("wb", "tvm")}
        tuner = w["tuner"]
        best = {
            k: f"{fmt_ms(tuner[k]['best_ms'])}@{tuner[k]['trials']}" if tuner[k].get("best_ms") else "-"
            for k in ("wb", "tvm")
        }
        bad = [k for k in KINDS if not (w.get("check") or {}).get(k, {}).get("ok")]
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
                best["wb"],
                best["tvm"],
                fmt(tuner["wb"].get("tune_s"), ".0f"),
                fmt(tuner["tvm"].get("tune_s"), ".0f"),
                "ok" if not bad else "FAIL " + ",".join(bad),
            ]
        )
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    line = lambda r: "  ".join(str(c).rjust(wd) for c, wd in zip(r, widths))  # noqa: E731
    print(line(head) + "\n" + "-" * len(line(head)))
    for r in rows:
        print(line(r))
    s = res["summary"]
    if s.get("geomean_wb_over_tvm"):
        print(
            f"wb/TVM: geometric mean {s['geomean_wb_over_tvm']:.3f} over {s['n']} workloads, "
            f"max {s['max_wb_over_tvm']:.3f} ({s['max_workload']})  (below 1: workbench faster)"
        )
    p = res["peak"]
    print(
        f"FMA peak of this run: {p['width']}-bit vectors, {p['threads']} threads, median "
        f"{fmt(pk, '.1f')} GFLOP/s ({len(p['samples_gflops'])} runs over the rounds, best "
        f"{fmt(max(p['samples_gflops'], default=None), '.1f')})"
    )
    print(
        "ms: median of all repeats of all rounds (each a Python loop of calls, fresh child "
        "processes in the order TVM, workbench, numpy); best@n: the tuner's own best "
        "measurement over its n trials; %pk: GFLOP/s / the FMA peak above; check: outputs "
        "against the float64 numpy reference (rtol 1e-4)"
    )
    for kind, err in res.get("errors", {}).items():
        print(f"{kind} child error: {err.strip()[-600:]}")
    ph = meta["phases_s"]
    print("phases: " + ", ".join(f"{k} {v:.0f} s" for k, v in ph.items()) + f"; results in {res['path']}")


def tvm_side(args, tvm_py, work, env, phases) -> tuple[str, dict]:
    """TVM's tuned kernels (tuned now, or reused) and its tuner's figures."""
    if args.skip_tune_tvm:
        run_tvm = os.path.join(args.skip_tune_tvm, "tvm")
        tvm_dir = os.path.abspath(run_tvm if os.path.isdir(run_tvm) else args.skip_tune_tvm)
    else:
        if not os.path.exists(args.tvm_bench):
            sys.exit(f"the TVM anchor's bench.py is not at {args.tvm_bench} (--tvm-bench)")
        tvm_dir = os.path.join(work, "tvm")
        os.makedirs(tvm_dir, exist_ok=True)
        print(f"[1/4] TVM MetaSchedule tunes ({tvm_py})", flush=True)
        t0 = time.monotonic()
        tune_tvm(tvm_py, args, tvm_dir, env)
        phases["TVM tuning"] = time.monotonic() - t0
    stats = tvm_tuner_stats(tvm_dir, args.names)
    missing = [n for n in args.names if not os.path.exists(os.path.join(tvm_dir, n + ".so"))]
    if missing:
        sys.exit(
            f"no tuned TVM kernel for {', '.join(missing)} in {tvm_dir}: "
            + "; ".join(f"{n}: {stats[n].get('error')}" for n in missing)
        )
    return tvm_dir, stats


def wb_side(args, target, work, phases) -> tuple[str, dict]:
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
    stats = wb_tuner_stats(db_path, target, args.names, seconds)
    missing = [n for n in args.names if stats[n]["best_ms"] is None]
    if missing:
        sys.exit(f"no successful workbench record of {', '.join(missing)} on {target!r} in {db_path}")
    return db_path, stats


def per_workload(args, rounds, data_dir, refs, wb_stats, tvm_stats) -> dict:
    """Each workload's figures: medians, GFLOP counts, checks, tuners' own bests, ratios."""
    import workbench as wb

    wls = {}
    for name in args.names:
        w = wls[name] = {k: summary(rounds[k][name]) for k in KINDS}
        w["flops"] = None if name in NO_GFLOPS else wb.workloads.flops(name)
        w["check"] = {k: check(data_dir, name, k, refs[name]) for k in KINDS}
        w["tuner"] = {"wb": wb_stats[name], "tvm": tvm_stats[name]}
        ms = {k: (w[k] or {}).get("median_ms") for k in KINDS}
        w["wb_over_tvm"] = ms["wb"] / ms["tvm"] if ms["wb"] and ms["tvm"] else None
        w["wb_over_numpy"] = ms["wb"] / ms["numpy"] if ms["wb"] and ms["numpy"] else None
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
    print(
        f"# {host['cpu_model']} ({host['llvm_cpu']}, {host['isa']}), {args.threads} threads, "
        f"{', '.join(args.names)}; work dir {work}",
        flush=True,
    )

    phases = {}
    tvm_dir, tvm_stats = tvm_side(args, tvm_py, work, env, phases)
    db_path, wb_stats = wb_side(args, target, work, phases)

    print(f"[3/4] timing rounds, {args.threads} threads", flush=True)
    t0 = time.monotonic()
    from peak import FMAPeak  # bench/peak.py
    from workbench.target import Target

    peak = FMAPeak(Target(target).vector_width_bits)
    refs = write_inputs(args.names, data_dir, seed=0)
    rounds, errors, versions, peak_gflops = time_rounds(
        args, tvm_py, tvm_dir, db_path, target, data_dir, env, peak
    )
    phases["timing and peak"] = time.monotonic() - t0

    wls = per_workload(args, rounds, data_dir, refs, wb_stats, tvm_stats)
    ratios = {n: w["wb_over_tvm"] for n, w in wls.items() if w["wb_over_tvm"]}
    worst = max(ratios, key=ratios.get) if ratios else None
    geomean = math.exp(statistics.fmean(map(math.log, ratios.values()))) if ratios else None
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
            "per_iter": args.per_iter,
            "seed": args.seed,
            "rounds": args.rounds,
            "repeat": args.repeat,
            "min_repeat_ms": args.min_repeat_ms,
            "tvm_python": tvm_py,
            "tvm_dir": tvm_dir,
            "wb_database": db_path,
            "reused": reused,
            "versions": versions,
            "phases_s": phases,
        },
        "peak": {
            "width": peak.width,
            "threads": args.threads,
            "median_gflops": statistics.median(peak_gflops) if peak_gflops else None,
            "samples_gflops": peak_gflops,
        },
        "workloads": wls,
        "summary": {
            "n": len(ratios),
            "geomean_wb_over_tvm": geomean,
            "max_wb_over_tvm": ratios.get(worst),
            "max_workload": worst,
        },
        "errors": errors,
        "path": os.path.join(work, "results.json"),
    }
    with open(res["path"], "w") as f:
        json.dump(res, f, indent=1)
    print("[4/4] results", flush=True)
    print_table(res)
    if errors or not all(c["ok"] for w in wls.values() for c in w["check"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
