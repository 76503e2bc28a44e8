"""Differential fuzzing of the schedule primitives at scale (workbench.fuzz).

    python bench/fuzz_schedules.py 1000                 # cases 0..999, one worker process
    python bench/fuzz_schedules.py 200 --start 5000 --jobs 2 --json bugs.jsonl

Each case is one program (a random compute-DSL function, every 8th a hand-written TVMScript one)
and a few random sequences of primitives on it; every accepted schedule is built on llvm and
compared with the unscheduled function. Cases run in worker processes, a chunk at a time, so that
a kernel that crashes the process (a segfault) is recorded as a ``crash`` of its case and the run
goes on. Prints a summary (programs, sequences, steps accepted / refused, bugs by kind) and, for
each distinct bug (kind + primitives of its minimized trace + error text without numbers), the
smallest repro: the program as TVMScript and the trace as Python.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def worker(start: int, end: int, sequences: int, steps: int) -> None:
    from workbench import fuzz

    for seed in range(start, end):
        print(json.dumps({"start": seed}), flush=True)
        t = time.perf_counter()
        r = fuzz.run_case(seed, sequences=sequences, max_steps=steps)
        out = {
            "seed": seed,
            "program": r.program,
            "sequences": r.sequences,
            "steps": r.steps,
            "accepted": r.accepted,
            "refused": r.refused,
            "checked": r.checked,
            "used": r.used,
            "seconds": time.perf_counter() - t,
            "failures": [
                {
                    "kind": f.kind,
                    "message": f.message,
                    "primitives": f.primitives(),
                    "program": str(f.program.func),
                    "trace": f.trace_python(),
                    "steps": len(f.insts),
                }
                for f in r.failures
            ],
        }
        print(json.dumps(out), flush=True)


def _run_worker(cmd: list, env: dict, case_timeout: float) -> tuple[str, object, str]:
    """(stdout, exit code or "timeout", stderr): the worker is killed when one case runs
    longer than ``case_timeout`` seconds (a kernel in an endless loop)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue = queue.Queue()
    errs: list[str] = []
    threading.Thread(
        target=lambda: [lines.put(x) for x in proc.stdout] + [lines.put(None)], daemon=True
    ).start()
    threading.Thread(target=lambda: errs.append(proc.stderr.read()), daemon=True).start()
    out: list[str] = []
    while True:
        try:
            line = lines.get(timeout=case_timeout)
        except queue.Empty:
            proc.kill()
            proc.wait()
            return "".join(out), "timeout", ""
        if line is None:
            break
        out.append(line)
    rc = proc.wait()
    time.sleep(0.1)  # let the stderr reader finish
    return "".join(out), rc, "".join(errs)


def run_chunk(start: int, end: int, args) -> list[dict]:
    """Cases start..end-1 in a child process; a case that kills it becomes a crash record."""
    results: list[dict] = []
    seed = start
    while seed < end:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(seed), str(end)]
        cmd += ["--sequences", str(args.sequences), "--steps", str(args.steps)]
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        out, rc, err = _run_worker(cmd, env, args.timeout)
        started = None
        for line in out.splitlines():
            rec = json.loads(line)
            if "start" in rec:
                started = rec["start"]
            else:
                results.append(rec)
                started = None
                seed = rec["seed"] + 1
        if rc == 0:
            break
        if started is None:  # died before any case: nothing to blame, give up on the chunk
            print(f"worker for {seed}..{end} failed: {err[-2000:]}", file=sys.stderr)
            break
        results.append(
            {
                "seed": started,
                "program": "?",
                "sequences": 0,
                "steps": 0,
                "accepted": 0,
                "refused": 0,
                "checked": 0,
                "used": {},
                "seconds": 0.0,
                "failures": [
                    {
                        "kind": "crash" if rc != "timeout" else "timeout",
                        "message": f"worker exit {rc}: {err[-500:]}",
                        "primitives": [],
                        "program": "",
                        "trace": f"(run: python -c 'from workbench import fuzz; fuzz.run_case({started})')",
                        "steps": 0,
                    }
                ],
            }
        )
        seed = started + 1
    return results


def signature(f: dict) -> tuple:
    message = re.sub(r"\d+(\.\d+)?", "#", f["message"])
    message = re.sub(r"np\.float32\([^)]*\)", "#", message)
    if f["kind"] == "wrong":
        message = "wrong values"
    return (f["kind"], tuple(sorted(set(f["primitives"]))), message[:120])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("n", type=int, nargs="?", default=100, help="number of cases (programs)")
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--sequences", type=int, default=3, help="step sequences per program")
    ap.add_argument("--steps", type=int, default=8, help="at most this many steps per sequence")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes at a time")
    ap.add_argument("--chunk", type=int, default=50, help="cases per worker process")
    ap.add_argument("--timeout", type=float, default=180, help="seconds per case before it counts as hung")
    ap.add_argument("--json", help="write every case record (JSON lines) to this file")
    ap.add_argument("--worker", nargs=2, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker, args.sequences, args.steps)
        return

    t0 = time.perf_counter()
    chunks = [
        (s, min(s + args.chunk, args.start + args.n))
        for s in range(args.start, args.start + args.n, args.chunk)
    ]
    with ThreadPoolExecutor(args.jobs) as pool:
        records = [r for rs in pool.map(lambda c: run_chunk(*c, args), chunks) for r in rs]
    records.sort(key=lambda r: r["seed"])
    if args.json:
        with open(args.json, "w") as fh:
            for r in records:
                fh.write(json.dumps(r) + "\n")

    total = Counter()
    used = Counter()
    for r in records:
        for k in ("sequences", "steps", "accepted", "refused", "checked"):
            total[k] += r[k]
        used.update(r["used"])
    failures = [(r["seed"], f) for r in records for f in r["failures"]]
    groups: dict[tuple, list] = {}
    for seed, f in failures:
        groups.setdefault(signature(f), []).append((seed, f))

    print(
        f"fuzz_schedules: cases {args.start}..{args.start + args.n - 1} in {time.perf_counter() - t0:.0f} s"
    )
    print(
        f"  programs {len(records)}, sequences {total['sequences']}, steps {total['steps']} "
        f"(accepted {total['accepted']}, refused {total['refused']}), "
        f"final schedules checked {total['checked']}"
    )
    print(f"  failing sequences {len(failures)}, distinct bugs {len(groups)}")
    by_kind = Counter(f["kind"] for _, f in failures)
    print("  by kind: " + ", ".join(f"{k} {n}" for k, n in by_kind.most_common()))
    print("  accepted steps by primitive: " + ", ".join(f"{k} {n}" for k, n in used.most_common()))
    for sig, items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        seed, f = min(items, key=lambda sf: (sf[1]["steps"], len(sf[1]["program"])))
        print("\n" + "=" * 100)
        seeds = sorted({s for s, _ in items})[:12]
        print(f"[{sig[0]}] primitives {list(sig[1])}: {len(items)} sequences, seeds {seeds}")
        print(f"  {f['message']}")
        print(f"--- program (seed {seed}) ---\n{f['program']}")
        print(f"--- trace ---\n{f['trace']}")


if __name__ == "__main__":
    main()
