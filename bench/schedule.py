"""Speed of the scheduling language: trace replay and primitive calls on GMM 128^3.

Run: ``python bench/schedule.py``. Prints replays per second of a 20-instruction trace (the
search replays traces constantly), from the in-memory trace and from its JSON text, and the
mean time per call of each instruction kind during those replays.
"""

from __future__ import annotations

import collections
import json
import time

from workbench import workloads
from workbench.schedule import Schedule, Trace


def tiled_matmul(func):
    """A 20-instruction multi-level tiling trace (the shape of the search's traces)."""
    sch = Schedule(func, seed=0)
    b = sch.get_block("Z")
    sch.annotate(b, "meta_schedule.tiling_structure", "SSRSRS")
    bb, i, j, k = sch.get_loops(b)
    i_tiles = sch.split(i, sch.sample_perfect_tile(i, n=4, max_innermost_factor=16))
    j_tiles = sch.split(j, sch.sample_perfect_tile(j, n=4, max_innermost_factor=16))
    k_tiles = sch.split(k, sch.sample_perfect_tile(k, n=2, max_innermost_factor=16))
    sch.reorder(
        i_tiles[0],
        j_tiles[0],
        i_tiles[1],
        j_tiles[1],
        k_tiles[0],
        i_tiles[2],
        j_tiles[2],
        k_tiles[1],
        i_tiles[3],
        j_tiles[3],
    )
    outer = sch.fuse(bb, i_tiles[0], j_tiles[0])
    sch.parallel(outer)
    sch.annotate(outer, "pragma_parallel", 1)
    loops = sch.get_loops(b)
    sch.vectorize(loops[-1])
    sch.unroll(loops[-2])
    root = sch.get_block("root")
    unroll = sch.sample_categorical([0, 16, 64, 512], [0.25] * 4)
    sch.annotate(root, "pragma_auto_unroll_max_step", unroll)
    sch.annotate(root, "pragma_unroll_explicit", 1)
    assert len(sch.trace) == 20, len(sch.trace)
    return sch


def rate(fn, seconds: float = 2.0) -> float:
    """Calls per second of ``fn`` over about ``seconds``."""
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - start)


def main() -> None:
    func = workloads.get("GMM", n=128, m=128, k=128)
    trace = tiled_matmul(func).trace
    text = json.dumps(trace.as_json())

    def replay():
        trace.apply_to_schedule(Schedule(func, seed=0))

    def replay_json():
        Trace.from_json(text).apply_to_schedule(Schedule(func, seed=0))

    def resample():
        trace.apply_to_schedule(Schedule(func, seed=0), decision_provider=Trace.resample)

    print("GMM 128x128x128, a 20-instruction trace")
    print(f"  replays / s (recorded decisions)   {rate(replay):8.1f}")
    print(f"  replays / s (from JSON text)       {rate(replay_json):8.1f}")
    print(f"  replays / s (decisions resampled)  {rate(resample):8.1f}")

    # per-kind time: wrap the one entry point every primitive call goes through
    times: dict[str, list[float]] = collections.defaultdict(list)
    apply = Schedule._apply

    def timed(self, kind, *args, **kwargs):
        start = time.perf_counter()
        try:
            return apply(self, kind, *args, **kwargs)
        finally:
            times[kind.name].append(time.perf_counter() - start)

    Schedule._apply = timed
    try:
        rate(replay, seconds=2.0)
    finally:
        Schedule._apply = apply
    print(f"  {'instruction':24s} {'us / call':>10s}")
    for name, ts in sorted(times.items(), key=lambda kv: -sum(kv[1]) / len(kv[1])):
        print(f"  {name:24s} {1e6 * sum(ts) / len(ts):10.1f}")


if __name__ == "__main__":
    main()
