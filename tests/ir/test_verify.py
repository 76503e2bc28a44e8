"""The IR verifier: valid functions pass; each rule has a function that must fail."""

import pytest

import workbench as wb
import workbench.workloads as wb_workloads
from workbench.errors import IRVerifyError, WorkbenchError
from workbench.ir import (
    BufferLoad,
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    FloatImm,
    ForKind,
    IfThenElse,
    IntImm,
    IterVar,
    PrimFunc,
    Range,
    Var,
    seq,
)
from workbench.ir.functor import substitute, transform
from workbench.ir.stmt import TRUE, make_for
from workbench.ir.verify import bounds_problems, verify
from workbench.schedule import BlockRV


def matmul(n=16):
    A = wb.placeholder((n, n), name="A")
    B = wb.placeholder((n, n), name="B")
    k = wb.reduce_axis(n, name="k")
    C = wb.compute((n, n), lambda i, j: wb.sum(A[i, k] * B[k, j], axis=k), name="C")
    return wb.create_func([A, B, C], name="matmul")


def two_stage(n=16):
    A = wb.placeholder((n, n), name="A")
    B = wb.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((n, n), lambda i, j: B[i, j] + 1.0, name="C")
    return wb.create_func([A, C], name="two_stage")


def padded(n=16, pad=1):
    A = wb.placeholder((n, n), name="A")
    P = wb.compute(
        (n + 2 * pad, n + 2 * pad),
        lambda i, j: wb.if_then_else(
            wb.all_of(i >= pad, i < n + pad, j >= pad, j < n + pad), A[i - pad, j - pad], 0.0
        ),
        name="P",
    )
    C = wb.compute((n, n), lambda i, j: P[i, j] + P[i + 2 * pad, j + 2 * pad], name="C")
    return wb.create_func([A, C], name="padded")


@pytest.mark.parametrize("build", [matmul, two_stage, padded])
def test_valid_functions_pass(build):
    verify(build())


def test_lowered_function_with_allocate_passes():
    A, tmp, i = Buffer("A", (8,)), Buffer("tmp", (8,), scope="local"), Var("i")
    body = Allocate(
        tmp, make_for(i, 8, seq(BufferStore(tmp, FloatImm(1.0), (i,)), BufferStore(A, tmp[i], (i,))))
    )
    verify(PrimFunc("lowered", (A,), body))


# helpers to break a valid function -----------------------------------------------------------


def root_func(body, params, allocs=()):
    return PrimFunc(
        "f",
        tuple(params),
        BlockRealize((), TRUE, Block("root", (), (), (), body, alloc_buffers=tuple(allocs))),
    )


def map_blocks(func, fn):
    """``func`` with every non-root block replaced by ``fn(block)``."""
    return func.with_body(
        transform(func.body, lambda n: fn(n) if isinstance(n, Block) and n.name != "root" else n)
    )


def simple_block(name="B", A=None, i=None):
    """for i: block name: vi = i; A[vi] = 0  -> (loop, A, i, vi)."""
    A = A or Buffer("A", (8,))
    i, vi = i or Var("i"), Var("vi")
    blk = Block(
        name,
        (IterVar(vi, Range.from_extent(8)),),
        (),
        (BufferRegion(A, (Range(vi, IntImm(1)),)),),
        BufferStore(A, FloatImm(0.0), (vi,)),
    )
    return make_for(i, 8, BlockRealize((i,), TRUE, blk)), A, i, vi


def fails(func, *patterns):
    with pytest.raises(IRVerifyError) as err:
        verify(func)
    for p in patterns:
        assert p in str(err.value), str(err.value)
    return err.value


# scoping -------------------------------------------------------------------------------------


def test_loop_var_used_outside_its_loop():
    loop, A, i, _ = simple_block()
    fails(
        root_func(seq(loop, BufferStore(A, FloatImm(1.0), (i,))), [A]),
        "block 'root'",
        "variable 'i' is used outside its scope (the loop var of loop 'i')",
    )


def test_block_iterator_used_outside_its_block():
    loop, A, _, vi = simple_block()
    fails(
        root_func(seq(loop, BufferStore(A, FloatImm(1.0), (vi,))), [A]),
        "variable 'vi' is used outside its scope (an iterator of block 'B')",
    )


def test_loop_var_used_directly_inside_a_block():
    f = matmul()
    loop_i = next(f.loops())
    bad = map_blocks(f, lambda b: b.with_(body=substitute(b.body, {b.iter_vars[0].var: loop_i.loop_var})))
    fails(bad, "block 'C': loop var 'i' of an enclosing loop outside the block is used directly")


def test_unbound_variable():
    A, n = Buffer("A", (8,)), Var("n")
    fails(root_func(BufferStore(A, FloatImm(0.0), (n,)), [A]), "variable 'n' is used but never bound")


def test_variable_bound_twice_in_nested_scopes():
    A, i = Buffer("A", (8,)), Var("i")
    inner = make_for(i, 8, BufferStore(A, FloatImm(0.0), (i,)))
    fails(PrimFunc("f", (A,), make_for(i, 8, inner)), "variable 'i' is bound again")


# blocks --------------------------------------------------------------------------------------


def test_duplicate_block_names():
    bad = map_blocks(two_stage(), lambda b: b.with_(name="S"))
    fails(bad, "duplicate block name 'S'")


def test_iter_values_count_must_match_iter_vars():
    loop, A, i, _ = simple_block()
    realize = loop.body
    bad_loop = loop.with_(body=realize.with_(iter_values=(i, i)))
    fails(root_func(bad_loop, [A]), "block 'B' has 1 iterators but is bound to 2 values")


def test_predicate_must_be_bool():
    loop, A, i, _ = simple_block()
    bad_loop = loop.with_(body=loop.body.with_(predicate=i + 1))
    fails(root_func(bad_loop, [A]), "predicate of block 'B' i + 1 has dtype int32, expected bool")


def test_if_condition_must_be_bool():
    A = Buffer("A", (8,))
    fails(
        root_func(IfThenElse(IntImm(1), BufferStore(A, FloatImm(0.0), (IntImm(0),))), [A]),
        "if condition 1 has dtype int32",
    )


def test_block_without_realize():
    loop, A, _, _ = simple_block()
    fails(root_func(loop.body.block, [A]), "block 'B' appears without a BlockRealize")


# buffers -------------------------------------------------------------------------------------


def test_buffer_neither_param_nor_allocated():
    f = two_stage()
    bad = f.with_body(f.body.with_(block=f.root.with_(alloc_buffers=())))
    fails(bad, "block 'B': buffer 'B' is neither a parameter nor allocated by an enclosing block")


def test_buffer_allocated_inside_a_block_is_not_visible_outside_it():
    loop, A, _, _ = simple_block()
    inner = loop.body.block
    tmp = Buffer("tmp", (8,))
    loop = loop.with_(body=loop.body.with_(block=inner.with_(alloc_buffers=(tmp,))))
    fails(
        root_func(seq(loop, BufferStore(tmp, FloatImm(0.0), (IntImm(0),))), [A]),
        "block 'root': buffer 'tmp' is neither a parameter",
    )


def test_allocate_scope_ends_with_its_body():
    A, tmp = Buffer("A", (8,)), Buffer("tmp", (8,))
    body = seq(
        Allocate(tmp, BufferStore(tmp, FloatImm(0.0), (IntImm(0),))), BufferStore(A, tmp[0], (IntImm(0),))
    )
    fails(PrimFunc("f", (A,), body), "buffer 'tmp' is neither a parameter")


def test_buffer_allocated_twice_or_a_parameter():
    loop, A, _, _ = simple_block()
    fails(root_func(loop, [A], allocs=[A]), "allocates buffer 'A', which is a parameter")
    tmp = Buffer("tmp", (8,))
    inner = loop.body.block.with_(alloc_buffers=(tmp,))
    loop = loop.with_(body=loop.body.with_(block=inner))
    fails(root_func(loop, [A], allocs=[tmp]), "allocates buffer 'tmp', which is already allocated")


def test_store_index_count():
    A = Buffer("A", (8, 8))
    fails(
        root_func(BufferStore(A, FloatImm(0.0), (IntImm(0),)), [A]),
        "stores into buffer 'A' (2-d) with 1 indices",
    )


def test_load_index_count():
    A, B = Buffer("A", (8, 8)), Buffer("B", (8,))
    from workbench.ir import BufferLoad

    load = BufferLoad(A, (IntImm(0),))  # built by hand: A[0] would be refused at once
    fails(root_func(BufferStore(B, load, (IntImm(0),)), [A, B]), "loads buffer 'A' (2-d) with 1 indices")


def test_region_dimension_count():
    loop, A, _, vi = simple_block()
    blk = loop.body.block.with_(reads=(BufferRegion(A, ()),))
    fails(
        root_func(loop.with_(body=loop.body.with_(block=blk)), [A]),
        "reads region of buffer 'A' (1-d) with 0 indices",
    )


def test_stored_value_dtype_must_match_buffer():
    A = Buffer("A", (8,), "float16")
    fails(
        root_func(BufferStore(A, FloatImm(0.0), (IntImm(0),)), [A]),
        "stores a float32 value into float16 buffer 'A'",
    )


# loops ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("extent", [0, -4])
def test_loop_extent_must_be_positive(extent):
    loop, A, _, _ = simple_block()
    fails(root_func(loop.with_(extent=IntImm(extent)), [A]), f"loop 'i' has non-positive extent {extent}")


def test_thread_binding_needs_a_known_tag():
    loop, A, _, _ = simple_block()
    fails(
        root_func(loop.with_(kind=ForKind.THREAD_BINDING), [A]),
        "loop 'i' is a thread_binding loop without a thread tag",
    )
    fails(
        root_func(loop.with_(kind=ForKind.THREAD_BINDING, thread_tag="threadIdx.w"), [A]),
        "loop 'i' has unknown thread tag 'threadIdx.w'",
    )


def test_every_problem_is_reported_once():
    A = Buffer("A", (8, 8), "float16")
    store = BufferStore(A, FloatImm(0.0), (IntImm(0),))
    err = fails(root_func(seq(store, store), [A]))
    assert len(err.problems) == 2 and isinstance(err, WorkbenchError)
    assert err.func_name == "f" and "function 'f' is not valid IR" in str(err)


@pytest.mark.parametrize("name", wb_workloads.PAPER_ORDER)
def test_paper_workloads_pass(name):
    verify(wb_workloads.get(name, **wb_workloads.small(name)))


# ------------------------------------------------------------------------------------------
# bounds: an access provably outside its buffer is refused where the function is made


def test_lesson_one_wrong_answer_is_refused_at_create_func():
    # the classic slip: C has 32 rows, B only 16 (before, this built and read out of bounds)
    B = wb.placeholder((16, 16), name="B")
    C = wb.compute((32, 16), lambda i, j: B[i, j] * 2.0, name="C")
    with pytest.raises(wb.OutOfBoundsError) as err:
        wb.create_func([B, C], name="lesson1")
    assert isinstance(err.value, ValueError) and isinstance(err.value, IRVerifyError)
    (problem,) = err.value.problems
    for part in ("block 'C'", "reads B[", "dimension 0", "reaches 31", "extent 16", "i=31"):
        assert part in problem, (part, problem)


def test_a_negative_index_is_refused():
    A = wb.placeholder((16,), name="A")
    C = wb.compute((16,), lambda i: A[i] - A[i - 1], name="C")
    with pytest.raises(wb.OutOfBoundsError, match=r"reaches -1.*-1 < 0"):
        wb.create_func([A, C])


def padding(lo, hi, shift=2):
    A = wb.placeholder((16,), name="A")
    P = wb.compute((20,), lambda i: wb.if_then_else(wb.all_of(i >= lo, i < hi), A[i - shift], 0.0), name="P")
    return wb.create_func([A, P], name="pad")


def test_guarded_padding_reads_are_not_flagged():
    assert bounds_problems(padding(2, 18)) == []
    assert bounds_problems(padded()) == []


@pytest.mark.parametrize("lo, hi, value", [(2, 19, 16), (1, 18, -1)])
def test_a_guard_that_lets_an_out_of_bounds_read_through_is_flagged(lo, hi, value):
    with pytest.raises(wb.OutOfBoundsError, match=f"block 'P': reads A.*reaches {value}"):
        padding(lo, hi)


def test_a_data_dependent_index_is_left_to_the_run_time_checks():
    A = wb.placeholder((8,), name="A")
    idx = wb.placeholder((4,), "int32", name="I")
    C = wb.compute((4,), lambda i: A[idx[i]], name="C")
    assert bounds_problems(wb.create_func([A, idx, C])) == []


@pytest.mark.parametrize("name", wb_workloads.PAPER_ORDER)
def test_paper_workloads_at_paper_shapes_have_no_bounds_problem(name):
    assert bounds_problems(wb_workloads.get(name)) == []


PARSED = """
from tvm.script import tir as T

@T.prim_func
def f(A: T.Buffer((10,), "float32"), B: T.Buffer((12,), "float32")):
    for io, ii in T.grid(3, 4):
        with T.block("B"):
            vi = T.axis.spatial(12, io * 4 + ii)
            T.where(io * 4 + ii < LIMIT)
            B[vi] = A[vi]
"""


def test_parse_respects_the_block_predicate_and_refuses_a_read_past_it():
    # T.where(... < 10): the split tail never reads A[10], A[11]
    assert bounds_problems(wb.parse(PARSED.replace("LIMIT", "10"))) == []
    with pytest.raises(wb.OutOfBoundsError, match=r"reads A\[vi\].*reaches 10.*extent 10"):
        wb.parse(PARSED.replace("LIMIT", "11"))


IF_GUARDED = """
from tvm.script import tir as T

@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.block("B"):
            vi = T.axis.spatial(10, i)
            if vi >= SHIFT:
                B[vi] = A[vi - SHIFT]
            else:
                B[vi] = T.float32(0)
"""


def test_an_if_statement_guards_the_reads_under_it():
    assert bounds_problems(wb.parse(IF_GUARDED.replace("SHIFT", "2"))) == []
    with pytest.raises(wb.OutOfBoundsError, match=r"reads A\[vi - 1\].*reaches 8"):
        wb.parse(IF_GUARDED.replace("SHIFT", "1"))


def test_a_reduction_init_is_checked_only_on_its_first_iteration():
    func = matmul(8)
    assert bounds_problems(func) == []
    verify(func)


def test_a_primitive_whose_result_reads_out_of_bounds_is_refused():
    from workbench.schedule.instruction import schedule_primitive, unregister

    @schedule_primitive("shift_reads_for_test")
    def shift_reads_for_test(sch, block: BlockRV) -> None:
        """A broken rewrite: every read of A moves one row down."""
        A = sch.func.params[0]

        def post(n):
            if isinstance(n, BufferLoad) and n.buffer is A:
                return BufferLoad(A, (n.indices[0] + 1,) + n.indices[1:])
            return n

        sch.func = sch.func.with_body(transform(sch.func.body, post))

    try:
        sch = wb.Schedule(matmul(8))
        before = sch.func
        with pytest.raises(
            wb.ScheduleError,
            match=r"(?s)shift_reads_for_test.*out of bounds.*reads A\[vi \+ 1, vk\].*reaches 8",
        ):
            sch.shift_reads_for_test(sch.get_block("C"))
        assert sch.func is before and len(sch.trace.insts) == 1  # only get_block was recorded
    finally:
        unregister("shift_reads_for_test")


def test_a_problem_the_function_already_had_is_not_blamed_on_a_primitive():
    A, C = Buffer("A", (8,)), Buffer("C", (8,))
    i = Var("i")
    vi = IterVar(Var("vi"), Range.from_extent(8), "S")
    blk = Block("C", (vi,), (), (), BufferStore(C, A[vi.var + 1], (vi.var,)))
    body = make_for(i, 8, BlockRealize((i,), TRUE, blk))
    func = root_func(body, (A, C))
    assert [p.value for p in bounds_problems(func)] == [8]
    sch = wb.Schedule(func)
    sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[2, 4])  # not refused
