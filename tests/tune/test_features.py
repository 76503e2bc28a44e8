"""Features: fixed length, finite, and they see what schedules change."""

import numpy as np

import workbench as wb
from workbench.tune import features as F

from tunehelpers import gmm_space, small


def named(vec):
    return dict(zip(F.FEATURE_NAMES, vec))


def test_every_workload_gives_a_finite_vector_of_fixed_length():
    for name in wb.workloads.names():
        vec = F.extract(small(name))
        assert vec.shape == (len(F.FEATURE_NAMES),) and np.isfinite(vec).all(), name
    assert len(set(F.FEATURE_NAMES)) == len(F.FEATURE_NAMES)


def test_loop_kinds_and_arithmetic_show_up():
    plain = named(F.extract(small("GMM")))
    sch = wb.Schedule(small("GMM"), seed=0)
    gmm_space(sch)
    tuned = named(F.extract(sch.func))
    # 16*16*16 multiply-adds, before and after scheduling
    assert plain["sum_f_mul"] == tuned["sum_f_mul"] == np.log2(1 + 16**3)
    assert plain["max_vec_lanes"] == 0 and tuned["max_vec_lanes"] > 0
    assert plain["max_par_tasks"] == 0 and tuned["max_par_tasks"] > 0
    assert tuned["max_n_loops"] > plain["max_n_loops"]


def test_strides_and_footprints():
    """GMM's loads: X[i, k] moves by 1 along k (innermost), Y[k, j] by 16; all of X is read."""
    table, glob = F.store_features(small("GMM"))
    row = dict(zip(F.STORE_FEATURES, table[-1]))  # the update store (the last one)
    strides = sorted(row[f"acc{k}_stride"] for k in range(3))
    assert strides == [0.0, 1.0, 16.0]  # Z[i, j] does not move along k
    assert row["acc0_fp_total"] == 16 * 16 * 4  # every buffer is touched entirely (bytes)
    assert row["trip"] == 16**3
    assert glob[0] == 2  # init store + update store


def test_different_decisions_give_different_vectors():
    vecs = set()
    for seed in range(6):
        sch = wb.Schedule(small("GMM"), seed=seed)
        gmm_space(sch)
        vecs.add(F.extract(sch.func).tobytes())
    assert len(vecs) > 1


def _gmm_register_tile(rows, cols, k_inner, unroll=True):
    """GMM 32x64x32 with a rows x cols register tile under the inner reduction loop, the
    columns vectorized, the tile unrolled (or left as serial loops)."""
    sch = wb.Schedule(wb.workloads.get("GMM", n=32, m=64, k=32), seed=0)
    b = sch.get_block("Z")
    _, i, j, k = sch.get_loops(b)
    io, ii = sch.split(i, [None, rows])
    jo, ji = sch.split(j, [None, cols])
    ko, ki = sch.split(k, [None, k_inner])
    sch.reorder(io, jo, ko, ki, ii, ji)
    sch.vectorize(ji)
    if unroll:
        sch.unroll(ii)
    return named(F.extract(sch.func)), sch


def test_register_tile_features_count_accumulators_and_loads_per_step():
    """An 8x32 float32 tile: 256 accumulators in 16 64-byte registers; each step of k loads 8
    broadcasts of X and 2 vectors of Y (160 bytes): 1.6 registers per load. A 16x16 tile has
    as many accumulators but 17 loads; a 1x64 tile 4 accumulators for 5 loads."""
    f, sch = _gmm_register_tile(8, 32, 16)
    assert f["max_acc_elems"] == np.log2(1 + 256)
    assert f["max_acc_vectors"] == np.log2(1 + 16)
    assert f["max_acc_flat"] == 1.0
    assert f["max_red_inner"] == np.log2(1 + 16)
    assert f["max_step_loads"] == np.log2(1 + 10)
    assert f["max_step_load_bytes"] == np.log2(1 + 160)
    assert f["max_step_intensity"] == np.log2(1 + 1.6)
    square, _ = _gmm_register_tile(16, 16, 16)
    wide, _ = _gmm_register_tile(1, 64, 16)
    assert square["max_step_loads"] == np.log2(1 + 17)
    assert wide["max_acc_vectors"] == np.log2(1 + 4) and wide["max_step_loads"] == np.log2(1 + 5)
    assert f["max_step_intensity"] > square["max_step_intensity"] > wide["max_step_intensity"]
    x, y = np.random.rand(1, 32, 32).astype("float32"), np.random.rand(1, 32, 64).astype("float32")
    z = np.zeros((1, 32, 64), "float32")
    wb.build(sch, target="llvm")(x, y, z)  # the helper's schedule is a valid GMM
    np.testing.assert_allclose(z, x @ y, rtol=1e-5)


def test_an_unrolled_inner_reduction_loop_is_part_of_the_register_tile():
    """k split [16, 2] with the 2 unrolled between 8 unrolled row blocks and 2 unrolled rows:
    the machine code keeps a 16x16 tile (16 vectors) while the 16 turns, not the 2x16 tile under
    the 2 (what the search's 16x16 GMM kernels look like: 0.95x the 8x32 one, where the old
    features saw 2 accumulator registers)."""
    sch = wb.Schedule(wb.workloads.get("GMM", n=32, m=64, k=32), seed=0)
    _, i, j, k = sch.get_loops(sch.get_block("Z"))
    io, im, ii = sch.split(i, [None, 8, 2])
    jo, ji = sch.split(j, [None, 16])
    ko, ki = sch.split(k, [None, 2])
    sch.reorder(io, jo, ko, im, ki, ii, ji)
    sch.vectorize(ji)
    for loop in (im, ki, ii):
        sch.unroll(loop)
    f = named(F.extract(sch.func))
    assert f["max_red_inner"] == np.log2(1 + 16)  # the loop that stays a loop
    assert f["max_acc_elems"] == np.log2(1 + 256) and f["max_acc_vectors"] == np.log2(1 + 16)
    # per step of ko: 16 rows x 2 k broadcasts of X, 2 vectors of Y; 32 vector FMAs
    assert f["max_step_loads"] == np.log2(1 + 34)
    assert f["max_step_intensity"] == np.log2(1 + 32 / 34)
    # left serial, the 2 is the reduction loop again (nothing flattens it)
    sch2 = wb.Schedule(wb.workloads.get("GMM", n=32, m=64, k=32), seed=0)
    _, i, j, k = sch2.get_loops(sch2.get_block("Z"))
    io, im, ii = sch2.split(i, [None, 8, 2])
    jo, ji = sch2.split(j, [None, 16])
    ko, ki = sch2.split(k, [None, 2])
    sch2.reorder(io, jo, ko, im, ki, ii, ji)
    sch2.vectorize(ji)
    sch2.unroll(ii)
    g = named(F.extract(sch2.func))
    assert g["max_red_inner"] == np.log2(1 + 2) and g["max_acc_vectors"] == np.log2(1 + 2)
    x, y = np.random.rand(1, 32, 32).astype("float32"), np.random.rand(1, 32, 64).astype("float32")
    z = np.zeros((1, 32, 64), "float32")
    wb.build(sch, target="llvm")(x, y, z)
    np.testing.assert_allclose(z, x @ y, rtol=1e-5)


def test_register_tile_features_need_a_flat_tile_and_a_reduction():
    serial, _ = _gmm_register_tile(8, 32, 16, unroll=False)
    assert serial["max_acc_flat"] == 0.0 and serial["max_acc_elems"] == np.log2(1 + 256)
    # the unscheduled GMM: the reduction loop k is innermost, nothing inside it
    plain = named(F.extract(small("GMM")))
    assert plain["max_acc_elems"] == np.log2(1 + 1) and plain["max_step_loads"] == np.log2(1 + 2)
    # stores that read no earlier value of their own buffer (an init) have no register tile
    sch = wb.Schedule(small("GMM"), seed=0)
    gmm_space(sch)
    sch.decompose_reduction(sch.get_block("Z"), sch.get_loops(sch.get_block("Z"))[1])
    table, _ = F.store_features(sch.func)
    init, update = (dict(zip(F.STORE_FEATURES, row)) for row in table)
    assert all(init[n] == 0.0 for n in F._REG) and update["acc_elems"] > 0
