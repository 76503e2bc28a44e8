"""Checks for TVM schedule tests ported as before/after TVMScript (test_split, test_fuse,
test_reorder): each case is the text of the function before, the steps (TVM's trace, with
``get_sblock`` read as ``get_block``) and the text of the function expected after, or the
message of the ScheduleError expected where TVM refuses.

The scheduled function is compared structurally with the "after" text, replayed from its trace
(JSON and Python), and built for llvm beside the unscheduled one: both run on the same random
arrays for every parameter and must leave the same values in all of them.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip


@functools.cache
def _parsed(text: str) -> wb.PrimFunc:
    return wb.parse(text)


@functools.cache
def _built(text: str):
    return wb.build(_parsed(text), target="llvm")


def _random_args(func: wb.PrimFunc, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for buf in func.params:
        shape = tuple(int(getattr(s, "value", s)) for s in buf.shape)
        if buf.dtype.startswith("float"):
            out.append(rng.standard_normal(shape).astype(buf.dtype))
        else:
            out.append(rng.integers(-100, 100, size=shape).astype(buf.dtype))
    return out


def check_same_numbers(func: wb.PrimFunc, before: str) -> None:
    """``func`` built for llvm leaves the values the unscheduled function leaves."""
    args = _random_args(func)
    expected = [a.copy() for a in args]
    _built(before)(*expected)
    wb.build(func, target="llvm")(*args)
    for buf, got, want in zip(func.params, args, expected):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=f"buffer {buf.name}")


def check_after(before: str, steps: Callable[[wb.Schedule], None], after: str) -> wb.Schedule:
    sch = wb.Schedule(_parsed(before))
    steps(sch)
    wb.assert_structural_equal(sch.func, wb.parse(after))
    check_trace_roundtrip(sch)
    check_same_numbers(sch.func, before)
    return sch


def check_refused(
    before: str, steps: Callable[[wb.Schedule], None], match: str, prepare: Optional[Callable] = None
) -> None:
    """``steps`` raises a ScheduleError matching ``match`` and leaves the schedule unchanged:
    the function, and a trace that only gained the lookups the steps made (``prepare``: steps
    that succeed first, kept)."""
    sch = wb.Schedule(_parsed(before))
    if prepare is not None:
        prepare(sch)
    func, n_trace = sch.func, len(sch.trace)
    with pytest.raises(wb.ScheduleError, match=match):
        steps(sch)
    assert sch.func is func
    assert all(inst.kind.name.startswith("get_") for inst in sch.trace.insts[n_trace:])
