"""parallel / vectorize / unroll / bind: numeric equality, round-trip, and their rules."""

import pytest

from workbench.errors import ScheduleError
from workbench.ir.stmt import REDUCE, ForKind
from workbench.schedule import Schedule
from workbench.testing import (
    check_elementwise,
    check_small,
    elementwise_func,
    opaque_func,
    small_schedule,
    triangular_func,
)

WORKLOADS = ["GMM", "C2D", "SFM"]


def spatial_and_reduce_loops(sch, block):
    """The block's loops split by the kind of iterator they feed (the DSL's one-to-one nests)."""
    loops = sch.get_loops(block)
    kinds = [iv.iter_type for iv in sch.get(block).iter_vars]
    spatial = [l for l, t in zip(loops, kinds) if t != REDUCE]
    reduce = [l for l, t in zip(loops, kinds) if t == REDUCE]
    return spatial, reduce


@pytest.mark.parametrize("name", WORKLOADS)
def test_parallel_vectorize_unroll(name):
    sch = small_schedule(name)
    for block in sch.get_child_blocks(sch.get_block("root")):
        spatial, reduce = spatial_and_reduce_loops(sch, block)
        sch.parallel(spatial[0])
        if len(spatial) > 1:
            sch.vectorize(spatial[-1])
        for loop in reduce:
            sch.unroll(loop)
    kinds = {l.kind for l in sch.func.loops()}
    assert {ForKind.PARALLEL, ForKind.VECTORIZED} <= kinds
    check_small(sch, name)


@pytest.mark.parametrize("name", WORKLOADS)
def test_bind_gpu_style(name):
    """Fused spatial loops split into blockIdx x threadIdx; reduce loops bound to threadIdx.y."""
    sch = small_schedule(name)
    for block in sch.get_child_blocks(sch.get_block("root")):
        spatial, reduce = spatial_and_reduce_loops(sch, block)
        if reduce:
            sch.reorder(*spatial, *reduce)
        fused = sch.fuse(*spatial)
        bx, tx = sch.split(fused, [None, 4])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        if reduce:
            sch.bind(reduce[-1], "threadIdx.y")  # cross-thread reduction is allowed
    check_small(sch, name)


def test_kinds_in_ir():
    sch = Schedule(elementwise_func())
    i, j = sch.get_loops("B")
    sch.parallel(i)
    sch.vectorize(j)
    i2, j2 = sch.get_loops("C")
    sch.bind(i2, "blockIdx.x")
    sch.unroll(j2)
    assert [(l.kind, l.thread_tag) for l in sch.get([i, j, i2, j2])] == [
        (ForKind.PARALLEL, None),
        (ForKind.VECTORIZED, None),
        (ForKind.THREAD_BINDING, "blockIdx.x"),
        (ForKind.UNROLLED, None),
    ]
    check_elementwise(sch)


def test_unroll_reduce_loop_is_fine():
    sch = small_schedule("GMM")
    sch.unroll(sch.get_loops("Z")[3])
    check_small(sch, "GMM")


# -- rules --------------------------------------------------------------------------------


@pytest.mark.parametrize("primitive", ["parallel", "vectorize"])
def test_reduce_iterator_refused(primitive):
    sch = small_schedule("GMM")
    k = sch.get_loops("Z")[3]
    with pytest.raises(
        ScheduleError,
        match=rf"{primitive} \(argument 'loop'\): loop 'k' feeds reduce "
        rf"iterator 'vk' of block 'Z'.*only feed spatial",
    ):
        getattr(sch, primitive)(k)


def test_fused_spatial_reduce_loop_refused():
    sch = small_schedule("GMM")
    _, _, j, k = sch.get_loops("Z")
    jk = sch.fuse(j, k)
    with pytest.raises(ScheduleError, match=r"parallel.*loop 'j_k_fused' feeds reduce iterator 'vk'"):
        sch.parallel(jk)


def test_bind_reduce_to_block_axis_refused():
    sch = small_schedule("GMM")
    k = sch.get_loops("Z")[3]
    with pytest.raises(
        ScheduleError,
        match=r"bind \(argument 'loop'\): loop 'k' feeds reduce iterator "
        r"'vk' of block 'Z'.*only feed spatial iterators",
    ):
        sch.bind(k, "blockIdx.x")
    sch.bind(k, "threadIdx.x")  # a cross-thread reduction is fine
    check_small(sch, "GMM")


def test_bind_unknown_axis():
    sch = small_schedule("GMM")
    with pytest.raises(
        ScheduleError,
        match=r"bind \(argument 'thread_axis'\): unknown thread axis "
        r"'threadIdx.w'",
    ):
        sch.bind(sch.get_loops("Z")[1], "threadIdx.w")


@pytest.mark.parametrize("primitive", ["parallel", "vectorize", "unroll"])
def test_opaque_iterator_refused_or_not(primitive):
    sch = Schedule(opaque_func())
    i = sch.get_loops("B")[0]
    if primitive == "unroll":
        sch.unroll(i)
        check_elementwise(sch)
    else:
        with pytest.raises(
            ScheduleError,
            match=rf"{primitive}.*loop 'i' feeds opaque iterator 'vi' "
            rf"of block 'B'",
        ):
            getattr(sch, primitive)(i)


@pytest.mark.parametrize("primitive", ["parallel", "vectorize", "unroll"])
def test_already_non_serial(primitive):
    sch = Schedule(elementwise_func())
    j = sch.get_loops("B")[1]
    if primitive == "unroll":
        sch.parallel(j)
    else:
        sch.unroll(j)
    with pytest.raises(
        ScheduleError,
        match=rf"{primitive} \(argument 'loop'\): loop 'j' is already "
        rf"(unrolled|parallel); {primitive} applies to serial loops",
    ):
        getattr(sch, primitive)(j)


def test_bind_twice():
    sch = Schedule(elementwise_func())
    i = sch.get_loops("B")[0]
    sch.bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match=r"bind.*loop 'i' is already thread_binding \(blockIdx.x\)"):
        sch.bind(i, "blockIdx.y")


@pytest.mark.parametrize("primitive", ["parallel", "vectorize", "unroll"])
def test_non_constant_extent(primitive):
    sch = Schedule(triangular_func())
    j = sch.get_loops("B")[1]
    with pytest.raises(ScheduleError, match=rf"{primitive}.*loop 'j' has extent i \+ 1, not a constant"):
        getattr(sch, primitive)(j)
