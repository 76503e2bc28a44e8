"""How dense are good schedules among the search's random samples? Against TVM's best records.

    python bench/random_pool.py DIR --workload C2D --samples 48 [--seed 1]

DIR holds MetaSchedule JSON databases, one folder per workload (``bench/out/vs_tvm/<run>/tvm``
or any folder of them). Draws ``--samples`` random candidates the way the evolutionary search
draws its random ones (``SearchContext.random_candidates``), builds them and TVM's ``--top``
fastest records of the workload (converted to workbench traces and built by workbench), then
times every kernel with ``kernel.time`` in ``--rounds`` interleaved rounds (the median is kept).

Prints, fastest first, each kernel's ms and its decisions (tile sizes, write-cache level, unroll
step, compute location), then: how many distinct tilings the samples hold and how many samples
are within 1.1x and 1.25x of TVM's fastest record (so 1 / share is about the random trials
needed to meet one). Timings are noisy on a shared machine: run it quiet, or the timing phase
under ``chrt -r`` (``--rt``: this process switches itself to SCHED_RR priority 5 after building,
for the timing only; root needed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import workbench as wb  # noqa: E402
from workbench.tune import CostModel, Database, SearchContext, make_space  # noqa: E402
from workbench.tune.database import tvm as tvmdb  # noqa: E402
from space_coverage import best_records  # noqa: E402


def decisions(trace) -> str:
    out = []
    for inst in trace.insts:
        if inst.kind.name == "enter_postproc":
            break
        if inst.kind.is_sampling:
            d = inst.decision
            if inst.kind.name == "sample_categorical":
                d = inst.args["candidates"][d]
            out.append(str(d).replace(" ", ""))
        elif inst.kind.name == "reverse_compute_at":
            out.append("cache")
    return " ".join(out)


def tilings(trace) -> tuple:
    return tuple(repr(i.decision) for i in trace.insts if i.kind.name == "sample_perfect_tile")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="folder of MetaSchedule databases, one per workload")
    p.add_argument("--workload", default="C2D")
    p.add_argument("--samples", type=int, default=48)
    p.add_argument("--top", type=int, default=2, help="TVM records (its fastest)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--target", default="llvm")
    p.add_argument("--rt", action="store_true", help="time under SCHED_RR 5 (after building)")
    args = p.parse_args(argv)

    func = wb.workloads.get(args.workload)
    items: list[tuple[str, object]] = []
    for directory in tvmdb.find_databases(args.dir):
        if os.path.basename(directory).upper() != args.workload.upper():
            continue
        for k, (_secs, trace, _) in enumerate(best_records(directory, args.top)):
            items.append((f"TVM#{k}", tvmdb.replay(tvmdb.convert_trace(trace), func)))
    if not items:
        sys.exit(f"no TVM database of {args.workload} under {args.dir}")
    n_tvm = len(items)
    ctx = SearchContext(
        func,
        args.target,
        make_space(None, args.target),
        Database.open(":memory:"),
        CostModel.create("random"),
        seed=args.seed,
    )
    samples = ctx.random_candidates(args.samples)
    items += [(f"rand{k}", c.sch) for k, c in enumerate(samples)]
    kernels = [wb.build(sch, target=args.target) for _, sch in items]
    data = wb.workloads.random_args(args.workload, seed=0)
    if args.rt:
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(5))
    times: list[list[float]] = [[] for _ in items]
    for _ in range(args.rounds):
        for k, kernel in enumerate(kernels):
            times[k].append(float(kernel.time(*data, repeat=3, min_repeat_ms=20)) * 1e3)
    if args.rt:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    ms = [statistics.median(t) for t in times]
    for k in sorted(range(len(items)), key=lambda k: ms[k]):
        print(f"{ms[k]:10.3f} ms  {items[k][0]:8s} {decisions(items[k][1].trace)}")
    ref = min(ms[:n_tvm])
    rand = ms[n_tvm:]
    share = {f: sum(m <= f * ref for m in rand) for f in (1.1, 1.25)}
    print(
        f"\n{args.workload}: TVM's fastest record {ref:.3f} ms (workbench build); "
        f"{len(rand)} random samples, "
        f"{len({tilings(s.sch.trace) for s in samples})} distinct tilings; best {min(rand):.3f} ms; "
        f"within 1.1x: {share[1.1]}, within 1.25x: {share[1.25]}; load {os.getloadavg()[0]:.1f}"
    )
    print(json.dumps({"tvm_ms": ref, "random_ms": rand, "within": share}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
