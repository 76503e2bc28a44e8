"""The primitives on ``Schedule``: the built-in ones listed in its class body, the others served
from the registry, their TVM names declared on registration, and the import tree that keeps."""

import ast
import os

import pytest

import workbench as wb
from workbench.schedule import REGISTRY, LoopRV, Schedule, get_kind, schedule_primitive, unregister
from workbench.testing import check_small, check_trace_roundtrip, small_schedule
from workbench.tune.database import tvm as tvmdb

SCHEDULE_DIR = os.path.dirname(wb.schedule.__file__)


def test_class_body_lists_every_built_in_primitive():
    # what makes a primitive visible to a reader of schedule.py, to help() and to mypy
    built_in = {n for n, k in REGISTRY.items() if k.fn.__module__.startswith("workbench.schedule.primitives")}
    assert "enter_postproc" in built_in and "split" in built_in
    listed = {n for n, v in vars(Schedule).items() if callable(v) and n in REGISTRY}
    assert built_in <= listed, f"add to Schedule's class body: {sorted(built_in - listed)}"
    assert vars(Schedule)["split"].__wrapped__ is get_kind("split").fn


def test_out_of_tree_primitive_is_served_from_the_registry():
    sch = small_schedule("GMM")

    @schedule_primitive("split_in_two")
    def split_in_two(sch: Schedule, loop: LoopRV) -> list[LoopRV]:
        """Split ``loop`` in two halves."""
        return sch.split(loop, [2, None])

    try:
        assert "split_in_two" not in vars(Schedule)  # nothing set on the class
        assert "split_in_two" in dir(sch)  # tab completion offers it
        assert Schedule.split_in_two is split_in_two
        outer, _ = sch.split_in_two(sch.get_loops("Z")[2])
        assert sch.get(outer).extent.value == 2
        assert str(sch.trace).splitlines()[-1] == "l5, l6 = sch.split_in_two(loop=l3)"
        check_trace_roundtrip(sch)
        check_small(sch, "GMM")
    finally:
        unregister("split_in_two")
    with pytest.raises(AttributeError, match="split_in_two"):
        sch.split_in_two(sch.get_loops("Z")[1])
    with pytest.raises(AttributeError, match="_private"):
        sch._private  # noqa: B018


def test_registering_a_built_in_name_again_replaces_its_method():
    builtin = REGISTRY["unroll"]
    calls = []

    @schedule_primitive("unroll", tvm_inputs=("loop",))
    def unroll(sch: Schedule, loop: LoopRV) -> None:
        calls.append(loop)
        builtin.fn(sch, loop)

    try:
        sch = small_schedule("GMM")
        loop = sch.get_loops("Z")[3]
        sch.unroll(loop)  # the class body's entry follows the registry, as a notebook expects
        assert calls == [loop] and sch.trace[-1].kind is REGISTRY["unroll"]
    finally:
        REGISTRY["unroll"] = builtin
    sch.unroll(sch.get_loops("Z")[2])
    assert len(calls) == 1


def test_tvm_names_are_declared_on_registration():
    assert get_kind("rfactor").tvm_name == "RFactor" and get_kind("reindex").tvm_name == "ReIndex"
    assert tvmdb.KIND_MAP["GetBlock"] == tvmdb.KIND_MAP["GetSBlock"]
    assert tvmdb.KIND_MAP["GetSBlock"] == ("get_block", (), ("name", "-func_name"), False)
    split = (("loop", "*factors"), ("preserve_unit_iters", "!disable_predication"), True)
    assert tvmdb.KIND_MAP["Split"][1:] == split
    assert tvmdb.KIND_MAP["EnterPostproc"] == ("enter_postproc", (), (), False)
    assert "TransformLayout" not in tvmdb.KIND_MAP  # its IndexMap input has no TVM JSON form here

    @schedule_primitive("halve", tvm_name="Halve", tvm_inputs=("loop",), tvm_attrs=("-note",))
    def halve(sch: Schedule, loop: LoopRV) -> list[LoopRV]:
        return sch.split(loop, [2, None])

    try:  # a primitive registered later is importable from TVM's traces as well
        assert tvmdb.KIND_MAP["Halve"] == ("halve", ("loop",), ("-note",), True)
        insts = [
            ["GetBlock", [], ["Z", "main"], ["b0"]],
            ["GetLoops", ["b0"], [], ["l1", "l2", "l3", "l4"]],
            ["Halve", ["l3"], ["ignored"], ["l5", "l6"]],
        ]
        trace = tvmdb.convert_trace([insts, []])
        assert [i.kind.name for i in trace] == ["get_block", "get_loops", "halve"]
        sch = tvmdb.replay(trace, wb.workloads.get("GMM", **wb.workloads.small("GMM")))
        assert sch.get(sch.get_loops("Z")[2]).extent.value == 2
    finally:
        unregister("halve")
    assert "Halve" not in tvmdb.KIND_MAP


def _runtime_imports(path: str) -> set[str]:
    """Modules a file imports when run (``if TYPE_CHECKING:`` blocks left out), relative ones
    resolved against workbench.schedule."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    package = "workbench.schedule" + "".join(
        "." + p for p in os.path.relpath(os.path.dirname(path), SCHEDULE_DIR).split(os.sep) if p != "."
    )
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            mod = ".".join(p for p in (base, node.module or "") if p)
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def test_the_import_graph_is_a_tree():
    # schedule.py -> primitives -> instruction.py; trace.py and tensor_intrin.py below too
    lower = [os.path.join(SCHEDULE_DIR, f) for f in ("instruction.py", "trace.py", "tensor_intrin.py")]
    prims = os.path.join(SCHEDULE_DIR, "primitives")
    lower += [os.path.join(prims, f) for f in os.listdir(prims) if f.endswith(".py")]
    for path in lower:
        imports = _runtime_imports(path)
        assert "workbench.schedule.schedule" not in imports, path
        assert "workbench.schedule.Schedule" not in imports, path
    tensor_intrin = _runtime_imports(os.path.join(SCHEDULE_DIR, "tensor_intrin.py"))
    assert not any("intrinsics" in m for m in tensor_intrin)
