"""read_at / write_at (TVM semantics): a copy stage at the top / bottom of one loop's body."""

import pytest

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
