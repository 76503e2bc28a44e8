"""parallel / vectorize / unroll / bind: numeric equality, round-trip, and their rules."""

import numpy as np
import pytest

import workbench as wb
from workbench.errors import ScheduleError
from workbench.ir.stmt import REDUCE, ForKind
from workbench.schedule import Schedule
from workbench.testing import (
    check_trace_roundtrip,
    check_elementwise,
    check_small,
    elementwise_func,
    opaque_func,
    small_schedule,
    triangular_func,
)

from .tvm_port import check_after, check_refused

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


# -- a loop that already has a kind (TVM's test_unroll_after_bind, test_bind_after_bind) ---------

ROWSUM = """
@T.prim_func
def rowsum(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
"""

ELEMENTWISE = """
@T.prim_func
def elementwise(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
"""

ELEMENTWISE_NEST = """
@T.prim_func
def elementwise(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i in {i}:
        for j in range(16):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
"""

ROWSUM_NEST = """
@T.prim_func
def rowsum(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    for i in {i}:
        for k in {k}:
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
"""

ELEMENTWISE_I_BOUND = """
@T.prim_func
def elementwise(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i in T.thread_binding(16, thread="threadIdx.x"):
        for j in range(16):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
"""


def test_unroll():
    def steps(sch):
        i, _ = sch.get_loops(sch.get_block("B"))
        sch.unroll(i)

    check_after(ROWSUM, steps, ROWSUM_NEST.format(i="T.unroll(16)", k="range(16)"))


def test_unroll_after_bind_drops_the_binding():
    def steps(sch):
        i, _ = sch.get_loops(sch.get_block("B"))
        sch.bind(i, "blockIdx.x")
        sch.unroll(i)

    check_after(ROWSUM, steps, ROWSUM_NEST.format(i="T.unroll(16)", k="range(16)"))


def test_unroll_of_a_cross_thread_reduction_loop():
    """k bound to threadIdx.x feeds a reduce iterator; unrolling it has no rule to break."""

    def steps(sch):
        _, k = sch.get_loops(sch.get_block("B"))
        sch.bind(k, "threadIdx.x")
        sch.unroll(k)

    check_after(ROWSUM, steps, ROWSUM_NEST.format(i="range(16)", k="T.unroll(16)"))


def test_bind_after_bind_rebinds():
    sch = wb.Schedule(wb.parse(ELEMENTWISE))
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    sch.bind(i, "threadIdx.x")
    wb.assert_structural_equal(sch.func, wb.parse(ELEMENTWISE_I_BOUND))
    check_trace_roundtrip(sch)
    a = np.random.default_rng(0).standard_normal((16, 16)).astype("float32")
    out = np.zeros_like(a)
    wb.build(sch, target="cuda-emulate")(a, out)
    np.testing.assert_allclose(out, a * 2, rtol=1e-6)


@pytest.mark.parametrize("first", ["parallel", "vectorize", "unroll", "blockIdx.x"])
@pytest.mark.parametrize("second", ["parallel", "vectorize", "unroll"])
def test_any_kind_replaces_any_other(first, second):
    def apply(sch, loop, what):
        if "." in what:
            sch.bind(loop, what)
        else:
            getattr(sch, what)(loop)

    def steps(sch):
        i, _ = sch.get_loops(sch.get_block("B"))
        apply(sch, i, first)
        apply(sch, i, second)

    head = {"parallel": "T.parallel(16)", "vectorize": "T.vectorized(16)", "unroll": "T.unroll(16)"}[second]
    check_after(ELEMENTWISE, steps, ELEMENTWISE_NEST.format(i=head))


def test_parallel_of_a_cross_thread_reduction_loop_refused():
    """The rules are those of the new kind: k feeds a reduce iterator, which threadIdx.x allows
    and parallel does not."""

    def prepare(sch):
        _, k = sch.get_loops(sch.get_block("B"))
        sch.bind(k, "threadIdx.x")

    def steps(sch):
        sch.parallel(sch.get_loops(sch.get_block("B"))[1])

    check_refused(ROWSUM, steps, r"parallel.*loop 'k' feeds reduce iterator 'vk'", prepare=prepare)
    check_refused(
        ROWSUM,
        lambda sch: sch.bind(sch.get_loops(sch.get_block("B"))[1], "blockIdx.x"),
        r"bind.*loop 'k' feeds reduce iterator 'vk'",
        prepare=prepare,
    )


@pytest.mark.parametrize("primitive", ["parallel", "vectorize", "unroll"])
def test_non_constant_extent(primitive):
    sch = Schedule(triangular_func())
    j = sch.get_loops("B")[1]
    with pytest.raises(ScheduleError, match=rf"{primitive}.*loop 'j' has extent i \+ 1, not a constant"):
        getattr(sch, primitive)(j)


# -- compact dataflow (TVM's CheckSubtreeCompactDataflow) ------------------------------------

PREFIX_SUM = """
@T.prim_func
def prefix_sum(A: T.Buffer((16,), "float32")):
    for i in range(15):
        with T.block("opaque"):
            A[i + 1] = A[i + 1] + A[i]
"""

OPAQUE_INDEPENDENT = """
@T.prim_func
def add_one(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("opaque"):
            B[i] = A[i] + T.float32(1)
"""

ROWSUM_BINDING = """
@T.prim_func
def rowsum(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128,), "float32")):
    for i, k in T.grid(16, 16):
        with T.block("B"):
            vi = T.axis.spatial(128, {vi})
            vk = T.axis.reduce(128, {vk})
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
"""

ROWSUM_REDUCE_INDEXES_OUTPUT = """
@T.prim_func
def rowsum(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128,), "float32")):
    for i, k in T.grid(128, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vk] = T.float32(0)
            B[vk] = B[vk] + A[vi, vk]
"""

IN_PLACE = """
@T.prim_func
def scale(A: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            A[vi] = A[vi] * T.float32(2)
"""


def _run_llvm(sch_or_func, *arrays):
    import workbench as wb

    out = [a.copy() for a in arrays]
    wb.build(sch_or_func, target="llvm")(*out)
    return out


def _refused(sch, primitive, loop, match, *args):
    before, n = sch.func, len(sch.trace)
    with pytest.raises(ScheduleError, match=match):
        getattr(sch, primitive)(loop, *args)
    assert sch.func is before and len(sch.trace) == n


@pytest.mark.parametrize(
    "primitive, args",
    [("parallel", ()), ("vectorize", ()), ("bind", ("threadIdx.x",)), ("bind", ("blockIdx.x",))],
)
def test_carried_dependence_through_opaque_block_refused(primitive, args):
    """Vectorized, this prefix sum gave 1, 2, 2, 2, … on llvm (every lane read the old A[i])."""
    import workbench as wb

    sch = Schedule(wb.parse(PREFIX_SUM))
    _refused(
        sch,
        primitive,
        sch.get_loops("opaque")[0],
        rf"{primitive} \(argument 'loop'\): loop 'i' does not have compact dataflow: block 'opaque' "
        rf"under it is neither a complete nor a reduction block \(it reads \['A'\], which it writes",
        *args,
    )


def test_carried_dependence_unroll_keeps_order():
    import numpy as np

    import workbench as wb

    sch = Schedule(wb.parse(PREFIX_SUM))
    sch.unroll(sch.get_loops("opaque")[0])
    (a,) = _run_llvm(sch, np.ones(16, "float32"))
    np.testing.assert_array_equal(a, np.arange(1, 17, dtype="float32"))
    check_trace_roundtrip(sch)


def test_opaque_block_without_carried_dependence_parallel():
    """As in TVM, an opaque block reading none of what it writes is a complete block."""
    import numpy as np

    import workbench as wb

    sch = Schedule(wb.parse(OPAQUE_INDEPENDENT))
    sch.parallel(sch.get_loops("opaque")[0])
    a = np.random.default_rng(0).random(16, dtype="float32")
    _, b = _run_llvm(sch, a, np.zeros(16, "float32"))
    np.testing.assert_allclose(b, a + 1)
    check_trace_roundtrip(sch)


def test_in_place_spatial_block_refused():
    """TVM refuses it too (a complete block reads nothing it writes)."""
    import workbench as wb

    sch = Schedule(wb.parse(IN_PLACE))
    _refused(sch, "parallel", sch.get_loops("B")[0], r"block 'B' under it is neither a complete")


@pytest.mark.parametrize(
    "vi, vk, why",
    [
        ("i", "k * k // 2", r"vk uses k \* k"),
        ("i * 2", "k", r"vi = i \* 2 is not a mixed-radix"),
        ("i * 8 + k // 2", "k", r"loop 'k' feeds \['vi', 'vk'\] through overlapping slices"),
    ],
)
def test_reduction_block_not_quasi_affine_refused(vi, vk, why):
    import workbench as wb

    sch = Schedule(wb.parse(ROWSUM_BINDING.format(vi=vi, vk=vk)))
    i = sch.get_loops("B")[0]
    _refused(sch, "parallel", i, rf"parallel.*loop 'i' does not have compact dataflow.*quasi-affine: {why}")
    sch.unroll(i)  # unroll keeps the order: no rule
    check_trace_roundtrip(sch)


@pytest.mark.parametrize("vi, vk", [("i", "k // 2"), ("i + 1", "k % 4"), ("i // 2", "k % 4 * 4 + k // 4")])
def test_reduction_block_quasi_affine_parallel(vi, vk):
    """Quasi-affine bindings TVM accepts (parts of a loop may go unused)."""
    import numpy as np

    import workbench as wb

    func = wb.parse(ROWSUM_BINDING.format(vi=vi, vk=vk))
    sch = Schedule(func)
    sch.parallel(sch.get_loops("B")[0])
    a = np.random.default_rng(0).random((128, 128), dtype="float32")
    b0 = np.random.default_rng(1).random(128, dtype="float32")
    np.testing.assert_allclose(_run_llvm(sch, a, b0)[1], _run_llvm(func, a, b0)[1], rtol=1e-5)
    check_trace_roundtrip(sch)


def test_reduce_iterator_indexing_output_refused():
    import workbench as wb

    sch = Schedule(wb.parse(ROWSUM_REDUCE_INDEXES_OUTPUT))
    _refused(
        sch,
        "parallel",
        sch.get_loops("B")[0],
        r"as a reduction block it indexes its output B with reduce iterators \['vk'\]",
    )


def test_parallel_after_decompose_reduction_refused():
    """The update block left by decompose_reduction has reduce iterators and no init: TVM
    refuses to parallelize a loop above it too (parallelize first, then decompose)."""
    sch = small_schedule("GMM")
    i = sch.get_loops("Z")[1]
    sch.decompose_reduction("Z", i)
    _refused(sch, "parallel", i, r"block 'Z_update' under it is neither.*reduce iterators but no init")
    sch = small_schedule("GMM")
    i = sch.get_loops("Z")[1]
    sch.parallel(i)
    sch.decompose_reduction("Z", i)
    check_small(sch, "GMM")
