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
