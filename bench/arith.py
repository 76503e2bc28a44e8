"""Time of the arithmetic layer on index expressions typical of scheduled loop nests.

Run: ``python bench/arith.py``. Prints microseconds per call (best of 5 rounds) for each case,
and the node count of the input; the design target is well under 1000 us for ~30 nodes.
"""

from __future__ import annotations

import time

from workbench.ir.arith import Analyzer, relax
from workbench.ir.expr import Var
from workbench.ir.functor import pre_order


def _cases():
    i0, i1, i2, j0, j1, k0, k1 = (Var(n) for n in ("i0", "i1", "i2", "j0", "j1", "k0", "k1"))
    fo, fi = Var("fo"), Var("fi")
    ranges = {i0: 4, i1: 8, i2: 4, j0: 16, j1: 8, k0: 32, k1: 4, fo: 256, fi: 4}
    vi = i0 * 32 + i1 * 4 + i2  # a 3-level split
    vj = j0 * 8 + j1
    vk = k0 * 4 + k1
    fused = fo * 4 + fi  # fuse(i, j) then split by 4
    return (
        ranges,
        {
            "matmul A index (split)": vi * 128 + vk,
            "split-fuse-split": (fused // 32) * 128 + (fused % 32) * 4 + vk % 4,
            "recombine fused": ((fused // 16) * 16 + fused % 16) * 2 + (vj // 8) * 8 + vj % 8,
            "nested floordiv/floormod": ((fused % 64) // 16) * 64 + ((fused // 4) % 8) * 8 + fi,
            "bound check": (vi < 128) & (vj * 2 + 1 < 256) & (vk - k1 >= 0),
        },
        {i2: 4, k1: 4},
    )


def _time(fn, rounds: int = 5, number: int = 200) -> float:
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t) / number)
    return best * 1e6


def main() -> None:
    ranges, cases, dom = _cases()
    ana = Analyzer(ranges)
    print(f"{'case':28s} {'nodes':>5s} {'simplify us':>12s} {'bound us':>9s} {'relax us':>9s}")
    for name, e in cases.items():
        nodes = sum(1 for _ in pre_order(e))
        t_simp = _time(lambda: ana.simplify(e))
        t_bound = _time(lambda: ana.const_int_bound(e))
        t_relax = _time(lambda: relax(e, dom, ranges)) if e.dtype == "int32" else float("nan")
        print(f"{name:28s} {nodes:5d} {t_simp:12.1f} {t_bound:9.1f} {t_relax:9.1f}")


if __name__ == "__main__":
    main()
