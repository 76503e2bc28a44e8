"""Kernel calls with wrong arrays, fuzzed (hypothesis, derandomized): wrong counts, shapes,
dtypes, layouts, read-only outputs, things that are not arrays. Every bad call raises
``TypeError`` / ``ValueError`` naming the parameter and writes nothing; every good one
computes the reference."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import workbench as wb

FUZZ = settings(derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
SHAPE = dict(b=1, n=4, m=8, k=4)
KERNEL = wb.build(wb.workloads.get("GMM", **SHAPE), target="llvm")
PARAMS = KERNEL.func.params
REFERENCE = wb.workloads.reference("GMM", **SHAPE)

VARIANTS = [
    "good",
    "good",
    "good",
    "shape",
    "dtype",
    "swapped",
    "strided",
    "fortran",
    "readonly",
    "list",
    "scalar",
    "none",
    "zero_d",
    "empty",
    "matrix_view",
]


def variant(buf, how: str, rng):
    good = wb.aligned(rng.uniform(-1, 1, size=buf.shape).astype(buf.dtype))
    if how == "good":
        return good, True
    if how == "shape":
        return np.zeros(tuple(s + 1 for s in buf.shape), buf.dtype), False
    if how == "dtype":
        return good.astype("float64"), False
    if how == "swapped":
        return good.astype(good.dtype.newbyteorder()), False
    if how == "strided":
        return np.zeros(buf.shape[:-1] + (buf.shape[-1] * 2,), buf.dtype)[..., ::2], False
    if how == "fortran":
        f = np.asfortranarray(good)  # with a 1-sized axis alone it is C-contiguous too
        return f, f.flags.c_contiguous
    if how == "readonly":
        good.flags.writeable = False
        return good, buf is not PARAMS[-1]
    if how == "list":
        return good.tolist(), False
    if how == "scalar":
        return 1.0, False
    if how == "none":
        return None, False
    if how == "zero_d":
        return np.float32(1.0), False
    if how == "empty":
        return np.zeros((0,), buf.dtype), False
    return good.reshape(-1).reshape(buf.shape)[...], True  # a contiguous view: fine


@settings(FUZZ, max_examples=400)
@given(
    hows=st.lists(st.sampled_from(VARIANTS), min_size=len(PARAMS), max_size=len(PARAMS)),
    count=st.sampled_from([len(PARAMS)] * 4 + [0, 1, len(PARAMS) - 1, len(PARAMS) + 1]),
    seed=st.integers(0, 3),
    timed=st.booleans(),
)
def test_a_kernel_call_with_wrong_arrays_raises_and_writes_nothing(hows, count, seed, timed):
    rng = np.random.default_rng(seed)
    made = [variant(buf, how, rng) for buf, how in zip(PARAMS, hows)]
    arrays = [a for a, _ in made]
    if count > len(arrays):
        arrays.append(arrays[-1])
    arrays = arrays[:count]
    ok = count == len(PARAMS) and all(fine for _, fine in made)
    before = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in arrays]
    call = (lambda: KERNEL.time(*arrays, number=1, repeat=1)) if timed else (lambda: KERNEL(*arrays))
    if ok:
        call()
        np.testing.assert_allclose(arrays[-1], REFERENCE(*arrays[:-1]), rtol=1e-4, atol=1e-4)
        return
    with pytest.raises((TypeError, ValueError)) as err:
        call()
    names = [b.name for b in PARAMS]
    assert any(f"'{n}'" in str(err.value) for n in names) or "takes 3 arrays" in str(err.value)
    for a, b in zip(arrays, before):  # nothing was written
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "bad",
    [
        dict(number=0),
        dict(number=-3),
        dict(repeat=0),
        dict(repeat=-1),
        dict(number=1.5),
        dict(min_repeat_ms=-1.0),
        dict(warmup=-1),
        dict(repeat="3"),
    ],
)
def test_bad_timing_settings_are_a_value_or_type_error(bad):
    arrays = wb.workloads.random_args("GMM", **SHAPE)
    with pytest.raises((ValueError, TypeError), match="time"):
        KERNEL.time(*arrays, **bad)
