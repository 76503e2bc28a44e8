"""Are TVM's best schedules points of workbench's design space?

    python bench/space_coverage.py DIR [--top 4] [--workloads SFM,C1D,DEP]

DIR holds MetaSchedule JSON databases, one folder per workload (what ``bench/vs_tvm.py`` tuned:
``bench/out/vs_tvm/<run>/tvm``, or any folder of them). For each workload, the ``--top``
records TVM measured fastest are converted to workbench traces
(``workbench.tune.database.tvm``), and workbench's design space of the same function is
generated for the record's target (its core count sets the parallel extent). Per record:

* ``sketch``: the workbench sketch with the record's instructions (TVM's database stores its
  traces simplified: unused queries and samples dropped; the sketches are compared so too),
  or ``none``, with the first instruction where the closest sketch differs;
* ``program``: that sketch with the record's decisions, postprocessed by workbench's
  postprocessors, against the record's own trace (TVM's postprocessing steps included)
  replayed in workbench: ``same`` when the two programs are structurally equal, loops that
  workbench's postprocessor marks ``unrolled`` counted as serial (workbench unrolls in the
  postprocessor what TVM's UnrollLoop lowering pass unrolls from the same annotation). ``differs``
  means the space holds the schedule but workbench's postprocessors finish it differently;
  ``rejected`` that a postprocessor refused it.

Exit status 0 (a report, not a check). Nothing is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Optional

from workbench.space import PostOrderApply
from workbench.tune.database import tvm as tvmdb


def best_records(directory: str, top: int) -> list[tuple[float, list, object]]:
    """The ``top`` fastest (mean run seconds, TVM trace, TVM target) of one database."""
    out = []
    with open(os.path.join(directory, tvmdb.RECORD_FILE)) as f:
        for line in f:
            if not line.strip():
                continue
            _, (trace, run_secs, target, _args) = json.loads(line)
            if run_secs:
                out.append((sum(run_secs) / len(run_secs), trace, target))
    out.sort(key=lambda r: r[0])
    return out[:top]


def check_record(func, space: PostOrderApply, sketches, tvm_trace) -> dict:
    """The sketch a record belongs to and whether its program is reproduced."""
    try:
        theirs = tvmdb.convert_trace(tvm_trace)
    except tvmdb.TVMImportError as exc:
        return {"sketch": None, "why": f"not importable: {exc}"}
    cov = tvmdb.coverage(theirs, func, [s.trace for s in sketches], space.postprocs)
    m = cov.match
    if m.index is None:
        return {
            "sketch": None,
            "why": f"closest sketch {m.closest} differs at instruction {m.position}",
            "tvm": m.theirs or "<end>",
            "ours": m.ours or "<end>",
        }
    return {"sketch": m.index, "program": cov.program, "why": cov.why}


def run(directory: str, top: int) -> tuple[Optional[str], list[dict]]:
    with open(os.path.join(directory, tvmdb.WORKLOAD_FILE)) as f:
        _, module = json.loads(f.readline())
    match = tvmdb.match_workload(tvmdb.module_signature(module), tvmdb.default_candidates())
    if match is None:
        return None, []
    name, func = match
    rows = []
    spaces: dict[str, tuple[PostOrderApply, list]] = {}
    for secs, trace, target in best_records(directory, top):
        wb_target = tvmdb.convert_target(target)
        if wb_target not in spaces:
            space = PostOrderApply()
            space.initialize_with_target(wb_target)
            spaces[wb_target] = (space, space.generate_design_space(func, seed=0))
        space, sketches = spaces[wb_target]
        row = check_record(func, space, sketches, trace)
        row.update(us=secs * 1e6, target=wb_target, n_sketches=len(sketches))
        rows.append(row)
    return name, rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="folder of MetaSchedule databases, one per workload")
    p.add_argument("--top", type=int, default=4, help="records per workload (TVM's fastest)")
    p.add_argument("--workloads", default="SFM,C1D,DEP")
    args = p.parse_args(argv)
    wanted = {n.strip().upper() for n in args.workloads.split(",") if n.strip()}
    for directory in tvmdb.find_databases(args.dir):
        if os.path.basename(directory).upper() not in wanted:
            continue
        name, rows = run(directory, args.top)
        if name is None:
            print(f"{directory}: no workbench workload matches")
            continue
        n_same = sum(r.get("program") == "same" for r in rows)
        n_sketch = sum(r["sketch"] is not None for r in rows)
        print(
            f"{name}: {len(rows)} best TVM records; {n_sketch} in a workbench sketch, "
            f"{n_same} reproduced exactly  ({rows[0]['target'] if rows else ''}, "
            f"{rows[0]['n_sketches'] if rows else 0} sketches)"
        )
        for k, r in enumerate(rows):
            head = f"  #{k} {r['us']:8.1f} us  "
            if r["sketch"] is None:
                print(f"{head}no sketch: {r['why']}")
                if "tvm" in r:
                    print(f"      TVM:       {r['tvm']}")
                    print(f"      workbench: {r['ours']}")
            else:
                extra = f" ({r['why']})" if r.get("why") else ""
                print(f"{head}sketch {r['sketch']}, program {r['program']}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
