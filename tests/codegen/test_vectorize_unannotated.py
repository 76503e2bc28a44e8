"""Loops without a vectorize annotation are still vectorized by LLVM when they read padded input.

A padded read ``Select(guard, A[h - 1, w - 1, c], 0)`` is emitted as a load from a clamped address
(the value is discarded where the guard fails). Only the indices that may leave their dimension
are clamped: the others stay affine in their loops, so LLVM's loop vectorizer sees consecutive
addresses along the channel loop and emits one vector load per padded read. A clamp of the whole
flat offset made the address opaque along every loop: gathers on AVX-512, scalar loads and
inserts on AVX2, and TVM's best DEP record ran 8-11x slower than TVM's build of it.

The properties below are of the generated code, not timings; they hold for code compiled for a
CPU this host may not have (compile-only kernels still give their IR and assembly).
"""

import re
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.codegen.lower import lower
from workbench.testing import check_trace_roundtrip, runs_here

#: AVX2 (8 float lanes, ymm) and AVX-512 (LLVM uses 16 lanes and zmm on Zen 4)
TARGETS = {"llvm -mcpu=znver3": (8, "ymm"), "llvm -mcpu=znver4": (16, "zmm")}

#: TVM's best DEP record of a Zen 4 tuning run (anchor records_zen4_b, 0.055 ms there), as
#: ``workbench import-tvm`` converts it (Python trace text): the padding stage computed at the
#: innermost spatial loop (channels, extent 32), unroll_explicit 512, no vectorize annotation.
DEP_RECORD = (Path(__file__).resolve().parent.parent / "data" / "tvm" / "dep_best_zen4.trace").read_text()


def dep_schedule() -> wb.Schedule:
    return wb.Schedule.from_python(DEP_RECORD, wb.workloads.get("DEP"))


def float_loads(ir: str) -> dict[str, int]:
    """Loads of floats in optimized IR by kind: scalar, vector (by lanes), gathers."""
    return {
        "scalar": len(re.findall(r"= load float,", ir)),
        "gather": len(re.findall(r"@llvm\.masked\.gather", ir)) + len(re.findall(r"= call .*gather", ir)),
        **{str(n): len(re.findall(rf"= load <{n} x float>", ir)) for n in (4, 8, 16)},
    }


def test_dep_record_has_no_vectorize_annotation():
    """The premise: the kernel's loops carry no vectorize kind; any SIMD comes from LLVM."""
    sch = dep_schedule()
    assert "T.vectorized" not in str(sch.func)
    lowered = str(lower(sch.func))
    assert "T.vectorized" not in lowered and "T.Select" in lowered


@pytest.mark.parametrize("target", TARGETS)
def test_dep_record_padded_reads_are_vector_loads(target):
    """Every float the DEP record reads (18 padded input rows, 9 weights per channel vector)
    comes from a consecutive vector load of the target's width: no gather, no scalar load."""
    lanes, reg = TARGETS[target]
    kernel = wb.build(dep_schedule(), target)
    loads = float_loads(kernel.source("llvm"))
    assert loads["gather"] == 0, loads
    assert loads["scalar"] == 0, loads
    assert loads[str(lanes)] >= 18 + 9, loads
    asm = kernel.source("asm")
    assert "vgather" not in asm and "vinsertps" not in asm
    fmas = [line for line in asm.splitlines() if "vfmadd" in line]
    assert fmas and all(reg in line for line in fmas)


def test_dep_record_numerics_and_trace():
    """The record built for this host computes the depthwise convolution; its trace replays."""
    sch = dep_schedule()
    check_trace_roundtrip(sch)
    kernel = wb.build(sch, "llvm")
    args = [wb.aligned(a) for a in wb.workloads.random_args("DEP", seed=3)]
    args[-1].fill(np.nan)
    kernel(*args)
    want = [wb.aligned(a) for a in wb.workloads.random_args("DEP", seed=3)]
    wb.build(wb.workloads.get("DEP"), "llvm")(*want)
    np.testing.assert_allclose(args[-1], want[-1], rtol=1e-5, atol=1e-5)


def pad_schedule(guard: str, n: int = 6, m: int = 64) -> tuple[wb.Schedule, tuple[int, int]]:
    """A zero-padded copy of an (n, m) array, padded on the rows (a guard constant along the
    inner loop) or on the columns (a guard that varies along it); loops left as they are."""
    A = wb.placeholder((n, m), "float32", name="A")
    if guard == "rows":
        body = lambda i, j: wb.if_then_else(wb.all_of(i >= 1, i < n + 1), A[i - 1, j], 0.0)  # noqa: E731
        shape = (n + 2, m)
    else:
        body = lambda i, j: wb.if_then_else(wb.all_of(j >= 1, j < m + 1), A[i, j - 1], 0.0)  # noqa: E731
        shape = (n, m + 2)
    P = wb.compute(shape, body, name="P")
    return wb.Schedule(wb.create_func([A, P], name="pad")), shape


@pytest.mark.parametrize("target", TARGETS)
def test_row_padding_in_a_serial_loop_is_vectorized(target):
    """The smallest case of the cliff: ``P[i, j] = A[i - 1, j] if 1 <= i <= n else 0`` with a
    serial inner loop. The row index is clamped, the column index is not (it cannot leave its
    dimension): LLVM vectorizes the column loop with plain vector loads."""
    lanes, _ = TARGETS[target]
    sch, _ = pad_schedule("rows")
    loads = float_loads(wb.build(sch, target).source("llvm"))
    assert loads["gather"] == 0 and loads["scalar"] == 0, loads
    assert loads[str(lanes)] >= 1, loads


@pytest.mark.parametrize("guard", ["rows", "columns"])
@pytest.mark.parametrize("check_bounds", [False, True])
def test_padding_without_annotation_matches_numpy(guard, check_bounds):
    """Clamped reads stay inside ``A`` at every border (check_bounds: each access is checked
    against A's shape) and the padding is zero."""
    sch, shape = pad_schedule(guard, n=5, m=37)
    kernel = wb.build(sch, "llvm", check_bounds=check_bounds)
    a = np.random.default_rng(0).uniform(-1, 1, (5, 37)).astype("float32")
    p = np.full(shape, np.nan, dtype="float32")
    kernel(a, p)
    np.testing.assert_array_equal(p, np.pad(a, ((1, 1), (0, 0)) if guard == "rows" else ((0, 0), (1, 1))))


def test_targets_are_compiled_whatever_the_host():
    """The IR tests above need no CPU: each target compiles here, runnable or not."""
    for target in TARGETS:
        kernel = wb.build(pad_schedule("rows")[0], target)
        assert kernel.source("asm")
        if not runs_here(target):
            with pytest.raises(RuntimeError, match="cannot run"):
                kernel(np.zeros((6, 64), "float32"), np.zeros((8, 64), "float32"))


def row_padded_vector_schedule(n: int = 6, m: int = 256) -> wb.Schedule:
    """``P[i, j] = 2 * (A[i - 1, j] if 1 <= i <= n else 0)`` with j split by 4 and the inner
    part vectorized: the guard is the same for every lane and for the whole j loop."""
    A = wb.placeholder((n, m), "float32", name="A")
    P = wb.compute(
        (n + 2, m),
        lambda i, j: wb.if_then_else(wb.all_of(i >= 1, i < n + 1), A[i - 1, j], 0.0) * 2.0,
        name="P",
    )
    sch = wb.Schedule(wb.create_func([A, P], name="pad"))
    _, j = sch.get_loops("P")
    _, ji = sch.split(j, [None, 4])
    sch.vectorize(ji)
    return sch


@pytest.mark.parametrize("target", TARGETS)
def test_vector_padded_reads_clamp_only_the_row(target):
    """An explicit vector load under a lane-uniform guard reads from a clamped address; only the
    row is clamped (the columns stay in bounds), so no clamp is left inside the j loop. A clamp of
    the flat offset depended on j: two i64 min/max per load and iteration (TVM's 6th-best DEP
    record, channels vectorized by 4, ran 1.3-1.9x slower than TVM's build that way)."""
    ir = wb.build(row_padded_vector_schedule(), target).source("llvm")
    blocks = [b for b in re.split(r"\n(?=[\w.]+:)", ir) if b.startswith("for_j_0")]
    assert any("load <" in b for b in blocks), ir
    for block in blocks:
        assert not re.search(r"@llvm\.[su]m(ax|in)\.i64|select i1 [^,]*, i64", block), block


def test_vector_padded_reads_match_numpy():
    n, m = 6, 256
    kernel = wb.build(row_padded_vector_schedule(n, m), "llvm")
    a = np.random.default_rng(1).uniform(-1, 1, (n, m)).astype("float32")
    p = np.full((n + 2, m), np.nan, dtype="float32")
    kernel(a, p)
    np.testing.assert_array_equal(p, 2 * np.pad(a, ((1, 1), (0, 0))))
