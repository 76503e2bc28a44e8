"""read_at / write_at (TVM semantics): a copy stage at the top / bottom of one loop's body."""

import pytest

from workbench import fuzz
from workbench.errors import ScheduleError
from workbench.schedule.primitives.read_write_at import AUTO_COPY
from workbench.testing import check_small, small_schedule


def _tiled_gmm():
    """GMM small (16x16x16) as i0, j0, k0 / i1, j1, k1 tiles of 8 x 8 x 4."""
    sch = small_schedule("GMM")
    z = sch.get_block("Z")
    _, i, j, k = sch.get_loops(z)
    i0, i1 = sch.split(i, [2, 8])
    j0, j1 = sch.split(j, [2, 8])
    k0, k1 = sch.split(k, [4, 4])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    return sch, z, (i0, j0, k0, i1, j1, k1)


def test_read_at_copies_the_tile_each_iteration():
    sch, z, (i0, j0, k0, *_) = _tiled_gmm()
    x_shared = sch.read_at(k0, z, 0, "shared")
    copy = sch.get(x_shared)
    assert copy.annotations[AUTO_COPY] == 1
    assert copy.writes[0].buffer.scope == "shared"
    # one 8 x 4 tile of X per iteration of k0 (batch 1)
    assert [r.extent.value for r in copy.reads[0].region] == [1, 8, 4]
    assert sch.get(sch.get_loops(x_shared)[-1]) is sch.get(k0)
    assert sch.get(z).reads[0].buffer is copy.writes[0].buffer
    check_small(sch, "GMM")


def test_write_at_copies_back_after_the_loop_body():
    sch, z, (i0, j0, *_) = _tiled_gmm()
    z_local = sch.write_at(j0, z, 0, "local")
    copy = sch.get(z_local)
    assert copy.reads[0].buffer.scope == "local" and copy.writes[0].buffer.name == "Z"
    assert [r.extent.value for r in copy.writes[0].region] == [1, 8, 8]
    body = sch.get(j0).body
    assert body.seq[-1].block.name == copy.name  # after the computation
    check_small(sch, "GMM")


def test_read_at_and_write_at_compose_for_the_tensor_core_stages():
    sch, z, (i0, j0, k0, i1, j1, k1) = _tiled_gmm()
    sch.write_at(j0, z, 0, "wmma.accumulator")
    sch.read_at(k0, z, 0, "shared.dyn")
    sch.read_at(k0, z, 1, "shared.dyn")
    sch.read_at(k0, z, 0, "wmma.matrix_a")
    scopes = [r.buffer.scope for r in sch.get(z).reads]
    assert scopes == ["wmma.matrix_a", "shared.dyn"]
    check_small(sch, "GMM")


def test_read_at_rejects_a_block_outside_the_loop():
    sch, z, (i0, j0, k0, *_) = _tiled_gmm()
    sch.write_at(j0, z, 0, "local")
    copy = sch.get_block("Z_local")
    inner = sch.get_loops(z)[-1]
    with pytest.raises(ScheduleError, match=r"read_at .*no block under loop 'k_1' reads Z_local"):
        sch.read_at(inner, copy, 0, "shared")


def test_read_at_rejects_a_writer_at_or_after_the_first_reader():
    sch, z, (i0, j0, k0, *_) = _tiled_gmm()
    sch.decompose_reduction(z, k0)
    # the update block reads and writes Z in place: a copy at the top of j0 would go stale
    with pytest.raises(
        ScheduleError, match="read_at .*Z is written under loop 'j_0' at or after its first reader"
    ):
        sch.read_at(j0, z, "Z", "local")


def test_write_at_rejects_a_reader_after_the_last_writer():
    sch, z, (i0, j0, k0, *_) = _tiled_gmm()
    sch.write_at(j0, z, 0, "local")
    with pytest.raises(ScheduleError, match="read under loop 'j_0' after its last writer"):
        sch.write_at(j0, z, 0, "shared")


def test_bad_index_and_scope_name_the_argument():
    sch, z, (i0, j0, k0, *_) = _tiled_gmm()
    with pytest.raises(ScheduleError, match="read_buffer_index"):
        sch.read_at(k0, z, 2, "shared")
    with pytest.raises(ScheduleError, match="write_buffer_index"):
        sch.write_at(k0, z, 1, "shared")
    with pytest.raises(ScheduleError, match="storage_scope"):
        sch.read_at(k0, z, 0, "texture")


def test_get_block_accepts_func_name():
    sch = small_schedule("GMM")
    b = sch.get_block(name="Z", func_name="main")
    assert sch.get(b).name == "Z"
    assert 'get_block(name="Z", func_name="main")' in str(sch.trace)
    with pytest.raises(ScheduleError, match="get_block .*func_name.*no function named 'other'"):
        sch.get_block("Z", func_name="other")
    check_small(sch, "GMM")


# found by the differential fuzzer (workbench.fuzz) ------------------------------------------

PADDED = """
@T.prim_func
def padded(A: T.Buffer((7, 1), "float32"), B: T.Buffer((7, 1), "float32"), C: T.Buffer((8, 3), "float32")):
    for i, j in T.grid(7, 1):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.tanh(A[vi, vj])
    for i, j in T.grid(8, 3):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.Select(vi >= 1 and vj >= 1 and vj < 2, B[vi - 1, vj - 1], T.float32(0))
"""

#: an update whose init block runs outside the loop of the update (the fuzzer's program)
ACCUMULATE = fuzz.SCRIPTS["nested"]


def _same_as_unscheduled(sch):
    from workbench import fuzz
    from workbench.testing import check_trace_roundtrip, original_func

    fuzz.check_final(sch, fuzz.Reference.of(original_func(sch)), roundtrip=False)  # llvm, NaN-poisoned
    check_trace_roundtrip(sch)


def test_read_at_of_a_region_sticking_out_of_the_buffer_copies_only_inside():
    """The padding stage reads B[vi - 1, vj - 1] under a guard: the region one iteration of i
    reads starts at -1. The copy used to read and write outside both buffers (wrong values, or
    a crash where the write hit the allocator's bookkeeping); it is now guarded."""
    import workbench as wb

    sch = wb.Schedule(wb.parse(PADDED))
    c = sch.get_block("C")
    copy = sch.read_at(sch.get_loops(c)[0], c, 0, "local")
    assert "if " in str(sch.get(copy).body)
    _same_as_unscheduled(sch)


def test_read_at_inside_the_buffer_needs_no_guard():
    sch, z, (i0, j0, k0, *_) = _tiled_gmm()
    copy = sch.read_at(k0, z, 0, "local")
    assert "if " not in str(sch.get(copy).body)


def test_write_at_of_an_accumulation_started_outside_the_loop_is_refused():
    """Block B adds into B, initialized by B_init outside loop j: the new buffer would be
    read before anything wrote it (the kernel used to compute from uninitialized memory)."""
    import workbench as wb

    sch = wb.Schedule(wb.parse(ACCUMULATE))
    b = sch.get_block("B")
    j, _ = sch.get_loops(b)
    before, trace = sch.func, sch.trace.as_python()
    with pytest.raises(ScheduleError, match="read uninitialized"):
        sch.write_at(j, b, 0, "local")
    assert sch.func is before and sch.trace.as_python() == trace


def test_write_at_of_a_reduction_whose_init_moved_out_by_blockize_is_refused():
    sch = small_schedule("GMM")
    z = sch.get_block("Z")
    *_, k = sch.get_loops(z)
    sch.blockize(k)  # the init goes to the outer block Z_o, outside loop k
    k_inner = sch.get_loops(z)[-1]
    with pytest.raises(ScheduleError, match="read uninitialized"):
        sch.write_at(k_inner, z, 0, "local")


def test_write_at_around_a_whole_reduction_with_its_init_is_accepted():
    sch, z, (i0, j0, *_) = _tiled_gmm()
    sch.write_at(j0, z, 0, "local")  # k0 and k1 are under j0: the init runs in each iteration
    _same_as_unscheduled(sch)


def test_write_at_inside_the_reduction_loop_is_refused():
    sch, z, (i0, j0, k0, *_) = _tiled_gmm()
    with pytest.raises(ScheduleError, match="read uninitialized"):
        sch.write_at(k0, z, 0, "local")  # each k0 iteration would start from an empty copy
