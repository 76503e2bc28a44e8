"""TVMScript in: the printer's text parses back to the same function (the printer is the file
format), TVM's own text parses, and workload identity ignores buffer names."""

import os
import re

import numpy as np
import pytest

import workbench as wb
from workbench.ir.structural import structural_hash, structural_match
from workbench.testing import check_text_roundtrip
from workbench.tune.database import Record, func_hash

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "tvmscript")


TVM_PRINTED = sorted(f[: -len(".tvmscript")] for f in os.listdir(DATA) if f.endswith(".tvmscript"))


def tvm_text(name: str) -> str:
    with open(os.path.join(DATA, f"{name}.tvmscript")) as f:
        return f.read()


@pytest.mark.parametrize("name", wb.workloads.names())
def test_every_workload_round_trips(name):
    func = wb.workloads.get(name)
    parsed = wb.parse(str(func))
    wb.assert_structural_equal(parsed, func)
    assert str(parsed) == str(func)
    assert wb.from_tvmscript is wb.parse


def test_design_space_samples_round_trip():
    """Every sampled design space of the 12 workloads (6 seeds each, small shapes): 252
    schedules with tiles, caches, rfactor, inlining, parallel/vectorize/unroll annotations."""
    n = 0
    for name in TVM_PRINTED:  # the paper's 12
        func = wb.workloads.get(name, **wb.workloads.small(name))
        for seed in range(6):
            for sch in wb.generate_design_space(func, target="llvm", seed=seed):
                check_text_roundtrip(sch.func)
                n += 1
    assert n >= 200


def test_tvm_printed_the_twelve():
    assert len(TVM_PRINTED) == 12 and set(TVM_PRINTED) <= set(wb.workloads.names())


@pytest.mark.parametrize("name", TVM_PRINTED)
def test_tvm_printed_workloads_parse(name):
    """TVM 0.27's ``mod.script()`` (T.sblock, T.sblock_alloc_buffer, tirx) parses, and the result
    prints and parses again to itself."""
    func = wb.parse(tvm_text(name))
    assert func.name == "main" and "tirx.noalias" not in func.attrs
    check_text_roundtrip(func)


@pytest.mark.parametrize("name", ["GMM", "NRM", "TBG"])
def test_tvm_text_is_our_workload_up_to_names(name):
    """Where TVM's definition is ours, the parsed text matches it up to buffer names (TVM's GMM
    is over X, Y, Z, ours over A, B, C... it depends on the workload)."""
    ours, theirs = wb.workloads.get(name), wb.parse(tvm_text(name))
    assert structural_match(ours, theirs, buffer_names=False)
    assert structural_hash(ours, buffer_names=False) == structural_hash(theirs, buffer_names=False)


MATMUL_AB = """
@T.prim_func
def mm(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
       C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def test_workload_identity_ignores_buffer_and_variable_names():
    renamed = MATMUL_AB
    for old, new in {"A": "X", "B": "Y", "C": "Z", "vi": "p", "vj": "q", "vk": "r"}.items():
        renamed = re.sub(rf"\b{old}\b(?!\")", new, renamed)  # not the block name "C"
    ab, xy = wb.parse(MATMUL_AB), wb.parse(renamed)
    assert [b.name for b in xy.params] == ["X", "Y", "Z"]
    assert not wb.structural_equal(ab, xy)  # parameters are the interface ...
    assert func_hash(ab) == func_hash(xy)  # ... but not the workload's identity
    db = wb.Database.open(":memory:")
    sch = wb.Schedule(ab)
    sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 4])
    db.add([Record.of(ab, "llvm", sch.trace, [1e-5])])
    rec = db.best(xy, "llvm")
    assert rec is not None and rec.latency == 1e-5
    replayed = rec.schedule()  # the trace replays on the X, Y function
    assert [b.name for b in replayed.func.params] == ["X", "Y", "Z"]
    other = wb.parse(MATMUL_AB.replace("16", "8"))
    assert db.best(other, "llvm") is None  # shapes still matter


def test_reads_and_writes_are_inferred_when_absent():
    func = wb.parse(MATMUL_AB)
    block = func.block("C")
    assert [r.buffer.name for r in block.writes] == ["C"]
    from workbench.ir.region import infer_access_regions

    reads, writes = infer_access_regions(
        block.body, block.init, var_ranges={iv.var: iv.dom for iv in block.iter_vars}
    )
    assert structural_match(tuple(block.reads), tuple(reads))
    assert {r.buffer.name for r in block.reads} >= {"A", "B"}


def test_ir_module_with_one_main_and_old_spellings():
    text = """
from tvm.script import ir as I
from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func
    def main(a: T.handle, b: T.handle):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        A = T.match_buffer(a, (8,), "float32")
        B = T.match_buffer(b, [8], dtype="float32")
        with T.block("root"):
            T.reads([])
            T.writes([])
            for i in T.serial(8):
                with T.block("B"):
                    vi = T.axis.S(8, i)
                    T.reads([A[vi]])
                    T.writes([B[vi]])
                    B[vi] = A[vi] * 2.0
"""
    func = wb.parse(text)
    assert [b.name for b in func.params] == ["A", "B"] and func.attrs == {}
    assert func.block("B").reads[0].buffer.name == "A"
    check_text_roundtrip(func)


@pytest.mark.parametrize("name", ["C2D", "SFM", "CBR"])
def test_lowered_functions_round_trip(name):
    """Lowering's output (T.allocate, loops and guarded stores, no blocks) reads back too."""
    func = wb.workloads.get(name, **wb.workloads.small(name))
    for sch in [wb.Schedule(func)] + wb.generate_design_space(func, target="llvm", seed=0):
        lowered = wb.lower(sch.func)
        assert "T.allocate(" in str(lowered)
        check_text_roundtrip(lowered)


SCHEDULED = os.path.join(DATA, "scheduled")


@pytest.mark.parametrize("name", ["GMM", "C1D", "C2D", "DEP", "NRM", "SFM"])
def test_tvm_scheduled_programs_parse(name):
    """What TVM prints after applying one of its own tuning records (tests/data/tvm): an
    I.ir_module, T.parallel with annotations, T.vectorized, T.sblock_attr, split bindings."""
    with open(os.path.join(SCHEDULED, f"{name}.tvmscript")) as f:
        func = wb.parse(f.read())
    assert any(loop.kind.value == "parallel" for loop in func.loops())
    check_text_roundtrip(func)


@pytest.mark.parametrize("name", ["GMM", "C2D", "DEP", "NRM"])
def test_tvm_scheduled_programs_run_and_match_numpy(name):
    with open(os.path.join(SCHEDULED, f"{name}.tvmscript")) as f:
        func = wb.parse(f.read())
    args = wb.workloads.random_args(name, seed=0)
    expected = wb.workloads.reference(name)(*args[:-1])
    wb.build(func, target="llvm")(*args)
    np.testing.assert_allclose(args[-1], expected, rtol=1e-4, atol=1e-4)


CONSTRUCTS = """
from tvm.script import tir as T

@T.prim_func
def constructs(a: T.handle, B: T.Buffer((4, 16), "int32"), C: T.Buffer((32,), "float32", scope="global")):
    A = T.match_buffer(a, (64,), "float32")
    S = T.alloc_buffer((16,), "float32", scope="shared", align=[(0, 16, 4)])
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            with T.block("S"):
                v = T.axis.spatial(16, tx)
                T.reads(A[bx * 32 + v * 2:bx * 32 + v * 2 + 2])
                T.writes(S[v])
                T.block_attr({"note": "two loads", "n": 2, "pi": 3.5, "on": True})
                S[v] = A[bx * 32 + v * 2] + A[bx * 32 + v * 2 + 1]
    for i in T.serial(2, 6, annotations={"pragma_unroll_explicit": 1}):
        for j in T.unroll(16):
            with T.block("B"):
                vi = T.axis.spatial((2, 6), i)
                vj = T.axis.opaque(16, j)
                T.where(not (i == 3 or j == 15))
                B[vi - 2, vj] = T.Cast("int32", S[vj]) // 3 % 5 + T.floordiv(vj, 2) - T.floormod(vj, 4)
    for k in range(32):
        with T.block("C"):
            vk = T.axis.S(32, k)
            if vk < 16:
                C[vk] = T.sqrt(T.exp(S[vk])) + T.float32(vk % 2).astype("float32")
            else:
                C[vk] = T.max(T.min_value("float32"), T.if_then_else(vk > 20, T.float32(1), T.float32(-1.5)))
"""


def test_every_construct_of_the_issue_reads_and_reads_back():
    from workbench.ir.expr import Cast, FloorDiv, FloorMod, Not, Or, Select

    func = wb.parse(CONSTRUCTS)
    check_text_roundtrip(func)
    assert [b.name for b in func.params] == ["A", "B", "C"]
    loops = list(func.loops())
    assert [(l.kind.value, l.thread_tag) for l in loops[:2]] == [
        ("thread_binding", "blockIdx.x"),
        ("thread_binding", "threadIdx.x"),
    ]
    assert (loops[2].min.value, loops[2].extent.value, loops[2].annotations) == (
        2,
        4,
        {"pragma_unroll_explicit": 1},
    )
    assert loops[3].kind.value == "unrolled"
    shared = func.root.alloc_buffers[0]
    assert (shared.scope, shared.align) == ("shared", ((0, 16, 4),))
    s = func.block("S")
    assert s.annotations == {"note": "two loads", "n": 2, "pi": 3.5, "on": True}
    assert s.reads[0].region[0].extent.value == 2
    b = func.block("B")
    assert [iv.iter_type for iv in b.iter_vars] == ["S", "O"]
    assert (b.iter_vars[0].dom.min.value, b.iter_vars[0].dom.extent.value) == (2, 4)
    kinds = {type(n) for n in wb.ir.functor.pre_order(func.body)}
    assert {Cast, FloorDiv, FloorMod, Not, Or, Select, wb.ir.IfThenElse} <= kinds
