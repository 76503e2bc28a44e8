"""Does ``MutateAutoInline`` help? CBR and TBG tuned with the default CPU space and with the
sampled-inline space (``AutoInline(sample_unsure=True)`` + ``MutateAutoInline`` at 0.05), same
trials and seeds, then the bests re-timed side by side (interleaved rounds, minimum).

    python bench/auto_inline.py                      # paper shapes, 64 trials, seeds 0 and 1
    python bench/auto_inline.py --small --trials 8   # a smoke run

Not part of CI: absolute times mean nothing across machines (and on a shared one are noisy);
compare within one run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import workbench as wb  # noqa: E402
from workbench.space import AutoInline, MutateAutoInline, PostOrderApply, default_mutators, default_rules  # noqa: E402
from workbench.tune import LocalRunner, MeasureConfig, MeasureInput, Task, TuneTask, tune  # noqa: E402


def spaces():
    """``name -> space`` (None: the target's default)."""
    rules = [AutoInline(sample_unsure=True), *default_rules("llvm")[1:]]
    mutators = {**default_mutators("llvm"), MutateAutoInline(): 0.05}
    return {"default": None, "auto_inline": PostOrderApply(rules=rules, mutator_probs=mutators)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="CBR,TBG")
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--small", action="store_true", help="the workloads' small shapes")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="auto_inline_")
    for name in args.workloads.split(","):
        shape = wb.workloads.small(name) if args.small else {}
        task = TuneTask.workload(name, **shape)
        bests, walls = {}, {}
        for seed in [int(s) for s in args.seeds.split(",")]:
            for variant, space in spaces().items():
                t0 = time.monotonic()
                db = tune(
                    task,
                    trials=args.trials,
                    database=os.path.join(workdir, f"{name}-{variant}-{seed}.sqlite"),
                    seed=seed,
                    space=space,
                    verbose=False,
                    baseline=False,
                )
                walls[variant, seed] = time.monotonic() - t0
                bests[variant, seed] = db.best(task.func, "llvm")
        check = Task(wb.workloads.get(name, **shape), "llvm", wb.workloads.reference(name, **shape))
        keys = [k for k, rec in bests.items() if rec is not None]
        inputs = [MeasureInput(check, bests[k].schedule().func) for k in keys]
        samples = {k: [] for k in keys}
        with LocalRunner(workers=1, measure=MeasureConfig(run_timeout=120, repeat=5, min_repeat_ms=50)) as r:
            for _ in range(5):
                for k, res in zip(keys, r.measure(inputs)):
                    if res.status != "ok":
                        raise RuntimeError(f"{name} {k}: re-timing failed: {res.error}")
                    samples[k] += res.latencies
        print(f"\n{name} {shape or '(paper shape)'}: {args.trials} trials")
        print(f"{'variant':12} {'seed':>4} {'tuned us':>10} {'retimed us':>11} {'wall s':>7}  inlined?")
        for k in keys:
            variant, seed = k
            trace = str(bests[k].trace)
            inline = [ln.strip() for ln in trace.splitlines() if "compute_inline_if" in ln]
            kept = "n/a"
            if inline:
                flags = {ln.split("inline=")[1].rstrip(")") for ln in inline}
                kept = ", ".join(
                    ln.split("decision=")[1].rstrip(")").replace("0", "kept").replace("1", "inlined")
                    for ln in trace.splitlines()
                    if ln.split(" = ")[0].strip() in flags and "sample_categorical" in ln
                )
            print(
                f"{variant:12} {seed:>4} {bests[k].latency * 1e6:10.1f} {min(samples[k]) * 1e6:11.1f} "
                f"{walls[k]:7.0f}  {kept}"
            )


if __name__ == "__main__":
    main()
