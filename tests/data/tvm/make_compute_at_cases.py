# ruff: noqa: E402, E501  (a by-hand generator: pytest is stubbed before TVM loads; programs stay on one line)
"""Writes tests/data/tvm/compute_at_cases.json from TVM 0.27's compute_at tests (not a test;
run by hand with TVM's interpreter):

    TVM_PYTHON make_compute_at_cases.py <apache/tvm checkout>/tests/python/s_tir/\
schedule/test_tir_schedule_compute_at.py compute_at_cases.json

TVM's test module is imported (with a stand-in for pytest) for its programs; the programs its
tests define inside functions are captured by running those tests with hooks. Each case's steps
then run on TVM, and its result (or refusal) is recorded with the programs as TVM prints them.
"""

import importlib.util
import json
import re
import sys


class _Any:  # pytest stand-in: decorators and marks that do nothing
    def __getattr__(self, name):
        return _Any()

    def __call__(self, *a, **k):
        if len(a) == 1 and callable(a[0]) and not k:
            return a[0]
        return _Any()


sys.modules["pytest"] = _Any()
import tvm

spec = importlib.util.spec_from_file_location("ca", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)

CA = "sch.compute_at"
RCA = "sch.reverse_compute_at"


def L(block, k):
    return f'sch.get_loops(sch.get_block("{block}"))[{k}]'


def B(name):
    return f'sch.get_block("{name}")'


# (case, program name in the TVM file, steps (our spelling), name of TVM's expected program or None)
CASES = [
    (
        "compute_at_two_elementwise",
        "two_elementwise",
        [f"{CA}({B('B')}, {L('C', 0)}, preserve_unit_loops=True)"],
        "two_elementwise_after_compute_at",
    ),
    (
        "compute_at_blockized_1",
        "blockized_1",
        [f"{CA}({B('B')}, {L('C_outer', 1)}, preserve_unit_loops=True)"],
        "blockized_after_compute_at",
    ),
    (
        "compute_at_blockized_2",
        "blockized_2",
        [f"{CA}({B('B_outer')}, {L('C', 1)}, preserve_unit_loops=True)"],
        "blockized_2_after_compute_at",
    ),
    (
        "compute_at_cuda_matmul_0",
        "cuda_matmul_0",
        [f"{CA}({B('C')}, {L('C_local', 5)}, preserve_unit_loops=True)"],
        "cuda_matmul_0_after_compute_at",
    ),
    (
        "compute_at_cuda_matmul_1",
        "cuda_matmul_1",
        [f"{CA}({B('A_shared_local')}, {L('C', 7)}, preserve_unit_loops=True)"],
        "cuda_matmul_2",
    ),
    (
        "compute_at_cuda_matmul_2",
        "cuda_matmul_2",
        [f"{CA}({B('B_shared_local')}, {L('C', 7)}, preserve_unit_loops=True)"],
        "cuda_matmul_3",
    ),
    (
        "compute_at_cuda_matmul_3",
        "cuda_matmul_3",
        [f"{CA}({B('A_shared')}, {L('C', 6)}, preserve_unit_loops=True)"],
        "cuda_matmul_4",
    ),
    (
        "compute_at_cuda_matmul_4",
        "cuda_matmul_4",
        [f"{CA}({B('B_shared')}, {L('C', 6)}, preserve_unit_loops=True)"],
        "cuda_matmul_5",
    ),
    (
        "compute_at_reduction_block",
        "multi_reduction",
        [f"{CA}({B('B')}, {L('C', 0)}, preserve_unit_loops=False)"],
        "multi_reduction_after_compute_at",
    ),
    (
        "compute_at_tiled_pooling_read_cache",
        "tiled_pooling_read_cache",
        [f"{CA}({B('cache')}, {L('compute', 1)})"],
        "tiled_pooling_read_cache_after_compute_at",
    ),
    (
        "compute_at_non_uniform_tiled_conv",
        "non_uniform_tiled_conv",
        [f"{CA}({B('cache')}, {L('compute', 1)})"],
        "non_uniform_tiled_conv_after_compute_at",
    ),
    (
        "compute_at_concat",
        "concat_two_elemwise",
        [f"{CA}({B('T_add_1')}, {L('T_concat', 0)})", f"{CA}({B('T_add_2')}, {L('T_concat', 0)})"],
        "concat_two_elemwise_after_compute_at",
    ),
    (
        "compute_at_tiled_repeat_op",
        "tiled_repeat_op",
        [f"{CA}({B('T_add')}, {L('T_repeat', 0)})"],
        "tiled_repeat_op_after_compute_at",
    ),
    ("compute_at_rev_iter", "REV_ITER", [f"{CA}({B('b0')}, {L('b1', 0)})"], "REV_ITER_AFTER"),
    (
        "reverse_compute_at_tiled",
        "tiled",
        [f"{RCA}({B('C')}, {L('B', 2)}, preserve_unit_loops=False)"],
        "tiled_after_reverse_compute_at",
    ),
    (
        "reverse_compute_at_tiled_trivial_binding",
        "tiled_trivial_binding",
        [f"{RCA}({B('C')}, {L('B', 2)}, preserve_unit_loops=False)"],
        "tiled_trivial_binding_after_reverse_compute_at",
    ),
    (
        "reverse_compute_at_blockized_2",
        "blockized_2",
        [f"{RCA}({B('C')}, {L('B_outer', 1)}, preserve_unit_loops=True)"],
        "blockized_2_after_reverse_compute_at",
    ),
    (
        "reverse_compute_at_factorized",
        "factorized",
        [f"{RCA}({B('B')}, {L('B_rf', 1)}, preserve_unit_loops=False)"],
        "factorized_after_reverse_compute_at",
    ),
    (
        "reverse_compute_at_floordiv_and_floormod_indices",
        "floordiv_and_floormod_indices",
        [f"{RCA}({B('B')}, {L('A', 0)})"],
        "floordiv_and_floormod_indices_after_reverse_compute_at",
    ),
    (
        "reverse_compute_at_floordiv_and_floormod_recursive",
        "recursive_floordiv_floormod",
        [f"{RCA}({B('Out')}, {L('In', 2)})"],
        "recursive_floordiv_floormod_after_reverse_compute_at",
    ),
    (
        "read_out_of_bound",
        "read_out_of_bound",
        [f"{CA}({B('B')}, {L('C', 0)})"],
        "read_out_of_bound_after_compute_at",
    ),
    (
        "compact_dataflow",
        "not_all_compact_data_flow",
        [f"{CA}({B('B')}, {L('C_1', 1)})"],
        "not_all_compact_data_flow_after_compute_at",
    ),
    (
        "compute_at_simplify_static_bound",
        "static_bound",
        [f"{CA}({B('B')}, {L('C', 0)}, preserve_unit_loops=True)"],
        "static_bound_after_compute_at",
    ),
    (
        "compute_at_non_perfect_channel_group",
        "GROUPED_CHANNEL_BIAS",
        [f"{CA}({B('init')}, {L('compute', 0)})"],
        "GROUPED_CHANNEL_BIAS_AFTER",
    ),
    (
        "fail_subtree_complete_block",
        "fail_subtree_compact_dataflow",
        [f"{CA}({B('B_0')}, {L('C', 0)})"],
        None,
    ),
    ("fail_not_in_same_scope", "blockized_1", [f"{CA}({B('B')}, {L('C_inner', 0)})"], None),
    ("fail_loop_is_ancestor_of_block", "two_elementwise", [f"{CA}({B('B')}, {L('B', 0)})"], None),
    ("fail_output_block", "tiled", [f"{CA}({B('C')}, {L('B', 0)})"], None),
    (
        "fail_all_consumers_under_loop",
        "fail_all_consumers_under_loop",
        [f"{CA}({B('B')}, {L('C', 0)})"],
        None,
    ),
    (
        "fail_all_producers_under_loop",
        "fail_all_producers_under_loop",
        [f"{RCA}({B('D')}, {L('C', 0)})"],
        None,
    ),
    (
        "compute_at_to_index",
        "MULTI_PRODUCERS_CONV",
        [f"{CA}({B('pad')}, {L('conv', 0)}, index=-2)"],
        "MULTI_PRODUCERS_CONV_AFTER",
    ),
    (
        "reverse_compute_at_to_index",
        "RCA_TO_INDEX",
        [f"{RCA}({B('D')}, {L('B', 2)}, index=1)"],
        "RCA_TO_INDEX_AFTER",
    ),
    (
        "reverse_compute_at_with_unit_loop",
        "RCA_UNIT_LOOP",
        [f"{RCA}({B('D')}, {L('B', 2)}, preserve_unit_loops=True, index=1)"],
        "RCA_UNIT_LOOP_AFTER",
    ),
    (
        "reverse_compute_at_layout_trans",
        "LAYOUT_TRANS",
        [f"{RCA}({B('T_layout_trans')}, {L('compute', 1)})"],
        "LAYOUT_TRANS_AFTER",
    ),
    (
        "compute_at_sliced_concatenate",
        "SLICED_CONCAT",
        [
            f"{CA}({B('T_concat')}, {L('T_strided_slice', 0)})",
            f"{CA}({B('compute')}, {L('T_strided_slice', 0)})",
        ],
        "SLICED_CONCAT_AFTER",
    ),
    (
        "reverse_compute_at_factorized_serial",
        "FACTORIZED_SERIAL",
        [f"{RCA}({B('B')}, {L('B_rf', 1)}, preserve_unit_loops=False)"],
        None,
    ),
    (
        "reverse_compute_at_with_alloc_buffer",
        "MATMUL_RELU",
        [
            'j0, j1 = sch.split(sch.get_loops(sch.get_block("Y"))[1], factors=[16, 8])',
            'sch.reorder(sch.get_loops(sch.get_block("Y"))[0], j0, sch.get_loops(sch.get_block("Y"))[3], j1)',
            f"{RCA}({B('C')}, j0)",
        ],
        None,
    ),
]
SKIPPED = [
    {
        "case": "compute_at_simplify_symbolic_predicate",
        "why": "symbolic shape n (T.int64) and match_buffer of a handle",
    },
    {"case": "compute_at_int64_loop", "why": "symbolic int64 shapes from te.var"},
    {"case": "shape_var_as_bound", "why": "symbolic shape n (T.int32 var as a buffer dimension)"},
]

# programs defined inside TVM's test functions: captured by running those tests with hooks
captured = {}
_Orig = tvm.s_tir.Schedule
last = {}


class Rec(_Orig):
    def __init__(self, mod, *a, **k):
        super().__init__(mod, *a, **k)
        last["sch"] = self
        last["before"] = self.mod["main"]


def rec_assert(a, b, *args, **k):
    cur = last["sch"].mod["main"]
    exp = b if a.same_as(cur) else a
    last["expected"] = exp


tvm.s_tir.Schedule = Rec
m.assert_structural_equal_ignore_global_symbol = rec_assert
_orig_ir_assert = tvm.ir.assert_structural_equal
tvm.ir.assert_structural_equal = rec_assert
for test, names in [
    ("test_compute_at_rev_iter", ("REV_ITER", "REV_ITER_AFTER")),
    ("test_compute_at_non_perfect_channel_group", ("GROUPED_CHANNEL_BIAS", "GROUPED_CHANNEL_BIAS_AFTER")),
    ("test_compute_at_to_index", ("MULTI_PRODUCERS_CONV", "MULTI_PRODUCERS_CONV_AFTER")),
    ("test_reverse_compute_at_to_index", ("RCA_TO_INDEX", "RCA_TO_INDEX_AFTER")),
    ("test_reverse_compute_at_with_unit_loop", ("RCA_UNIT_LOOP", "RCA_UNIT_LOOP_AFTER")),
    ("test_reverse_compute_at_layout_trans", ("LAYOUT_TRANS", "LAYOUT_TRANS_AFTER")),
    ("test_compute_at_sliced_concatenate", ("SLICED_CONCAT", "SLICED_CONCAT_AFTER")),
]:
    fn = getattr(m, test)
    try:
        fn(False) if fn.__code__.co_argcount else fn()
    except Exception as e:  # verify_trace_roundtrip etc.
        print("note:", test, type(e).__name__, str(e)[:200], file=sys.stderr)
    captured[names[0]] = last["before"]
    captured[names[1]] = last["expected"]
tvm.s_tir.Schedule = _Orig
tvm.ir.assert_structural_equal = _orig_ir_assert

MATMUL_RELU = """
@T.prim_func(s_tir=True)
def matmul_relu_alloc_buffer(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    Y = T.sblock_alloc_buffer((128, 128))
    for i, j, k in T.grid(128, 128, 128):
        with T.sblock("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(128, 128):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
"""
captured["MATMUL_RELU"] = tvm.script.from_source(MATMUL_RELU)
# TVM's factorized program with its thread loop made serial (ours: the variant we accept)
captured["FACTORIZED_SERIAL"] = tvm.script.from_source(
    m.factorized.script()
    .replace('T.thread_binding(4, thread="threadIdx.x")', "T.serial(4)")
    .replace('T.thread_binding(16, thread="blockIdx.x")', "T.serial(16)")
)
assert "thread_binding" not in captured["FACTORIZED_SERIAL"].script()


def prog(name):
    f = captured[name] if name in captured else getattr(m, name)
    if isinstance(f, tvm.IRModule):
        f = f["main"]
    return f


def text(f):
    s = f.script()
    lines = [
        l for l in s.splitlines() if not l.startswith("# from") and not re.match(r"\s*T\.(reads|writes)\(", l)
    ]
    return "\n".join(lines).strip() + "\n"


programs, cases = {}, []
for case, before, steps, expected in CASES:
    f = prog(before)
    programs.setdefault(before, text(f))
    sch = tvm.s_tir.Schedule(f, debug_mask="all")
    ns = {"sch": sch}

    error = None
    try:
        for s in steps:
            exec(s.replace("get_block", "get_sblock"), ns)
    except tvm.s_tir.ScheduleError as e:
        lines = str(e).splitlines()
        error = next(
            (l.split("Error message:", 1)[1].strip() for l in lines if "Error message:" in l), lines[-1]
        )
    if error is None:
        after = sch.mod["main"]
        if expected is not None:
            _orig_ir_assert(
                after.with_attr("global_symbol", "x"), prog(expected).with_attr("global_symbol", "x")
            )
        key = case.upper() + "_AFTER"
        programs[key] = text(after)
        cases.append({"case": case, "before": before, "steps": steps, "after": key})
        print("ok      ", case)
    else:
        cases.append({"case": case, "before": before, "steps": steps, "after": None, "tvm_error": error})
        print("refused ", case, error[:150])

json.dump(
    {
        "source": "apache/tvm tests/python/s_tir/schedule/test_tir_schedule_compute_at.py (+ test_schedule_reverse_compute_at_regression.py), "
        "run on TVM 0.27 (programs as TVM prints them before and after its schedule; T.reads/T.writes dropped, "
        "the parser infers them; steps as Python with get_sblock read as get_block)",
        "programs": programs,
        "cases": cases,
        "skipped": SKIPPED,
    },
    open(sys.argv[2], "w"),
    indent=1,
)
