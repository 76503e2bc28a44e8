"""Timing shared by the benchmarks: alternate the contenders so machine noise hits all alike."""
import time


def side_by_side(fns, rounds: int, number: int) -> list[float]:
    """Best mean time of each function, measured in alternation."""
    best = [float("inf")] * len(fns)
    for fn in fns:
        fn()  # warm-up
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            best[k] = min(best[k], (time.perf_counter() - t0) / number)
    return best
