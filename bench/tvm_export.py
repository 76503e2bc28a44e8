"""Round trip TVM -> workbench -> TVM: do exported traces rebuild TVM's own programs?

    python bench/tvm_export.py DIR [more dirs] [--every 1]   # folders of TVM databases
                               [--tvm-python PY]    # default $WB_TVM_PYTHON

For each TVM MetaSchedule database (a directory per workload), every ``--every``-th record is
converted to a workbench trace and replayed on the workbench workload (what ``workbench
import-tvm`` does); the replayed trace is exported as TVM Python (``workbench export-tvm``) and
run by TVM 0.27 on the same ``te_workload`` function, and the module it gives is compared with
``tvm_ffi.structural_equal`` to the one TVM's original trace gives (``bench/_tvm_replay.py``).
Prints per directory and workload: records, replayed in workbench, exported text run by TVM,
structurally equal to TVM's. Not timed: a correctness check.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from workbench.tune.database import tvm as tvmdb

HERE = os.path.dirname(os.path.abspath(__file__))


def default_tvm_python() -> str:
    """``$WB_TVM_PYTHON`` (``$WORKBENCH_TVM_PYTHON``, its older name), else ``.venv-tvm`` in the
    repository's root: a virtualenv with TVM, made as ``bench/vs_tvm.py``'s docstring says."""
    env = os.environ.get("WB_TVM_PYTHON") or os.environ.get("WORKBENCH_TVM_PYTHON")
    return env or os.path.join(os.path.dirname(HERE), ".venv-tvm", "bin", "python")


def jobs_of(directory: str, every: int):
    """(workload name, [(tvm trace, exported text or None, reason)]) of one database dir."""
    with open(os.path.join(directory, tvmdb.WORKLOAD_FILE)) as f:
        shash, module = json.loads(f.readline())
    match = tvmdb.match_workload(tvmdb.module_signature(module), tvmdb.default_candidates())
    if match is None:
        raise SystemExit(f"{directory}: no workbench workload matches")
    name, func = match
    out = []
    with open(os.path.join(directory, tvmdb.RECORD_FILE)) as f:
        for k, line in enumerate(f):
            if k % every:
                continue
            trace = json.loads(line)[1][0]
            try:
                sch = tvmdb.replay(tvmdb.convert_trace(trace), func)
                out.append((trace, tvmdb.to_tvm_python(sch.trace), ""))
            except tvmdb.TVMImportError as exc:
                out.append((trace, None, str(exc)))
    return name, out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", help="TVM databases, or directories of them")
    p.add_argument("--every", type=int, default=1, help="check every n-th record")
    p.add_argument("--tvm-python", default=default_tvm_python())
    args = p.parse_args(argv)
    rows, jobs = [], []
    for top in args.dirs:
        for d in tvmdb.find_databases(top):
            name, items = jobs_of(d, args.every)
            rows.append([d, name, len(items), sum(t is not None for _, t, _ in items), 0, 0, []])
            for trace, text, reason in items:
                if text is not None:
                    jobs.append((len(rows) - 1, {"workload": name, "tvm_trace": trace, "text": text}))
                else:
                    rows[-1][6].append(reason)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump([j for _, j in jobs], f)
    try:
        proc = subprocess.run(
            [args.tvm_python, os.path.join(HERE, "_tvm_replay.py"), f.name],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        os.unlink(f.name)
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
        return 1
    reply = json.loads(proc.stdout.strip().splitlines()[-1])
    for (row, _), res in zip(jobs, reply["results"]):
        rows[row][4] += res["ok"]
        rows[row][5] += bool(res["equal"])
        if res["error"] or not res["equal"]:
            rows[row][6].append(res["error"] or "not structurally equal to TVM's program")
    print(
        f"TVM {reply['tvm']}: records / replayed in workbench / exported text run by TVM / "
        f"equal to TVM's own program"
    )
    for d, name, n, replayed, ran, equal, problems in rows:
        print(f"{os.path.relpath(d):55s} {name:4s} {n:3d} {replayed:3d} {ran:3d} {equal:3d}")
        for problem in problems[:3]:
            print(f"    {problem}")
    return 0 if all(r[2] == r[5] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
