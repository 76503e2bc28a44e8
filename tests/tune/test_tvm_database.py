"""TVM MetaSchedule databases: import (convert, match, replay, store) and export as TVM Python.

``tests/data/tvm/<WL>/`` holds a few records of each workload from the Zen 3 anchor run
(shared/anchors/tvm/records_zen3), among them records whose postprocessor fuses loops that are
already parallel (GMM and C1D line 2, C2D lines 1-2, DEP lines 1 and 3, SFM lines 2-3).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import workbench as wb
from workbench.cli import main
from workbench.ir.index import index
from workbench.testing import check_numeric, check_trace_roundtrip
from workbench.tune.database import tvm as tvmdb

DATA = Path(__file__).resolve().parent.parent / "data" / "tvm"
REPO = Path(__file__).resolve().parents[2]
NAMES = ["GMM", "C1D", "C2D", "DEP", "NRM", "SFM"]
ZEN3 = "llvm -mcpu=znver3 -num-cores=2"


def tvm_records(name):
    """(TVM trace, run_secs) of each record line of a test workload."""
    with open(DATA / name / tvmdb.RECORD_FILE) as f:
        return [(rec[1][0], rec[1][1]) for rec in map(json.loads, f)]


def tvm_module(name):
    with open(DATA / name / tvmdb.WORKLOAD_FILE) as f:
        return json.loads(f.readline())[1]


def replayed(name, line):
    trace = tvm_records(name)[line][0]
    return tvmdb.replay(tvmdb.convert_trace(trace), wb.workloads.get(name))


# -- workloads ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_tvm_workload_matches_the_workbench_workload(name):
    sig = tvmdb.module_signature(tvm_module(name))
    assert sig == tvmdb.func_signature(wb.workloads.get(name))
    assert tvmdb.match_workload(sig, tvmdb.default_candidates())[0] == name


def test_signature_reads_shapes_and_blocks():
    sig = tvmdb.module_signature(tvm_module("GMM"))
    assert sig.params == (("float32", (1, 128, 128)),) * 3
    assert sig.blocks == (("Z", "SSSR", (1, 128, 128, 128)),)


def test_other_shapes_do_not_match():
    sig = tvmdb.module_signature(tvm_module("GMM"))
    assert tvmdb.match_workload(sig, {"GMM-64": wb.workloads.get("GMM", n=64)}) is None


@pytest.mark.parametrize(
    "module, reason",
    [
        ("bm90IGpzb24=", "neither JSON nor TVM's base64"),
        ('{"nodes": [{"type": "tirx.PrimFunc", "data": {}}]}', "cannot read the workload's IRModule"),
        ('{"nodes": []}', "the module holds 0 PrimFuncs"),
    ],
)
def test_unreadable_module(module, reason):
    with pytest.raises(tvmdb.TVMImportError, match=reason):
        tvmdb.module_signature(module)


# -- traces ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_record_converts_and_replays_with_tvm_decisions(name):
    for trace, _ in tvm_records(name):
        wb_trace = tvmdb.convert_trace(trace)
        insts, decisions = trace
        assert [i.kind.name for i in wb_trace] == [tvmdb.KIND_MAP[i[0]][0] for i in insts]
        for k, decision in decisions:
            assert wb_trace[k].decision == decision
        sch = tvmdb.replay(wb_trace, wb.workloads.get(name))
        assert len(sch.trace) == len(insts)


def test_split_attributes_and_string_inputs():
    trace = [
        [
            ["GetSBlock", [], ["Z", "main"], ["b0"]],
            ["Annotate", ["b0", '"SSRSRS"'], ["meta_schedule.tiling_structure"], []],
            ["GetLoops", ["b0"], [], ["l1", "l2", "l3", "l4"]],
            ["SamplePerfectTile", ["l2"], [2, -1], ["v5", "v6"]],
            ["Split", ["l2", "None", "v6"], [0, 0], ["l7", "l8"]],
            ["SampleCategorical", [], [[0, 16], [0.5, 0.5]], ["v9"]],
            ["Annotate", ["l7", "v9"], ["pragma_auto_unroll_max_step"], []],
        ],
        [[3, [8, 16]], [5, 1]],
    ]
    wb_trace = tvmdb.convert_trace(trace)
    assert wb_trace[1].args["ann_val"] == "SSRSRS"
    assert wb_trace[3].args["max_innermost_factor"] is None
    split = wb_trace[4]
    assert split.args["factors"][0] is None and split.args["preserve_unit_iters"] is False
    sch = tvmdb.replay(wb_trace, wb.workloads.get("GMM"))
    loops = sch.get_loops(sch.get_block("Z"))
    assert [sch.get(l).extent.value for l in loops] == [1, 8, 16, 128, 128]
    assert sch.get(loops[1]).annotations == {"pragma_auto_unroll_max_step": 16}
    assert sch.get(sch.get_block("Z")).annotations == {"meta_schedule.tiling_structure": "SSRSRS"}


@pytest.mark.parametrize(
    "inst, reason",
    [
        (["Tensorize", ["b0"], ["dot", 1], []], "no workbench counterpart for TVM's Tensorize"),
        (["GetLoops", ["b9"], [], ["l5"]], "uses random variable 'b9' before defining it"),
        (["Split", ["l1", "None", 4], [1, 1], ["l5", "l6"]], "disable_predication=1 is not supported"),
        (["TransformBlockLayout", ["b0"], ["{}"], []], "no workbench counterpart"),
        (["Fuse", ['{"root": 1}'], [1], ["l5"]], "an IndexMap input"),
        (["ComputeInline", ["b0", "b0"], [], []], "expected 1 inputs and 0 attributes"),
    ],
)
def test_conversion_failures_name_the_instruction(inst, reason):
    trace = [
        [["GetSBlock", [], ["Z", "main"], ["b0"]], ["GetLoops", ["b0"], [], ["l1", "l2", "l3", "l4"]], inst],
        [],
    ]
    with pytest.raises(tvmdb.TVMImportError, match=r"instruction 2 \(\w+\): " + reason):
        tvmdb.convert_trace(trace)


def test_a_decision_workbench_would_change_fails_the_replay():
    trace, _ = tvm_records("GMM")[0]
    insts, decisions = trace
    bad = [[k, [3, 5, 1, 1] if isinstance(d, list) and len(d) == 4 else d] for k, d in decisions]
    with pytest.raises(tvmdb.TVMImportError, match="replay: sample_perfect_tile"):
        tvmdb.replay(tvmdb.convert_trace([insts, bad]), wb.workloads.get("GMM"))


def test_a_fuse_of_parallel_loops_is_in_the_test_data():
    """The TVM postprocessor pattern the test data must keep covering."""
    sch = replayed("GMM", 1)
    fuses = [(p, inst) for p, (inst, _) in enumerate(sch.history[1:]) if inst.kind.name == "fuse"]
    kinds = {
        index(sch.history[p][1]).loops[sch.symbols[rv]].kind.value
        for p, inst in fuses
        for rv in inst.args["loops"]
    }
    assert "parallel" in kinds


@pytest.mark.parametrize(
    "name, line",
    [
        ("GMM", 1),
        ("GMM", 2),
        ("C1D", 1),
        ("C1D", 2),
        ("C2D", 0),
        ("DEP", 0),
        ("DEP", 2),
        ("NRM", 0),
        ("NRM", 2),
        ("SFM", 0),
        ("SFM", 2),
    ],
)
def test_replayed_tvm_schedule_computes_the_workload(name, line):
    sch = replayed(name, line)
    check_numeric(sch, name, target="llvm", rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("name", ["GMM", "C1D", "SFM"])
def test_imported_traces_round_trip_through_json_and_python(name):
    for line in range(len(tvm_records(name))):
        check_trace_roundtrip(replayed(name, line))


# -- import into a database -----------------------------------------------------------------


def test_import_stores_replayed_traces_with_tvm_run_times(tmp_path):
    db = wb.tune.Database.open(tmp_path / "t.sqlite")
    report = tvmdb.import_tvm(DATA, db)
    assert report.errors == [] and report.failed == 0
    assert {w.name: w.imported for w in report.workloads} == {
        "GMM": 3,
        "C1D": 3,
        "C2D": 2,
        "DEP": 3,
        "NRM": 3,
        "SFM": 3,
    }
    func = wb.workloads.get("GMM")
    records = db.records(func)
    assert [r.latencies for r in records] == [secs for _, secs in tvm_records("GMM")]
    assert {r.target for r in records} == {ZEN3} and not db.records(func, "llvm")
    assert all(r.meta["source"] == "tvm" and r.meta["tvm_target"]["mcpu"] == "znver3" for r in records)
    best = db.best(func, ZEN3)
    assert best.latency == min(r.latency for r in records)
    assert report.workloads[[w.name for w in report.workloads].index("GMM")].best == best.latency
    check_trace_roundtrip(best.schedule())

    again = tvmdb.import_tvm(DATA / "GMM", db)
    assert again.workloads[0].imported == 0 and again.workloads[0].duplicates == 3
    assert len(db) == 17


def test_import_under_another_target():
    db = wb.tune.Database.open(None)
    tvmdb.import_tvm(DATA / "NRM", db, target="llvm")
    assert len(db.records(wb.workloads.get("NRM"), "llvm")) == 3


def test_import_reports_bad_records_and_goes_on(tmp_path):
    d = tmp_path / "GMM"
    d.mkdir()
    shutil.copy(DATA / "GMM" / tvmdb.WORKLOAD_FILE, d)
    lines = (DATA / "GMM" / tvmdb.RECORD_FILE).read_text().splitlines()
    good = json.loads(lines[0])
    unknown = json.loads(lines[0])
    unknown[1][0][0].append(["Tensorize", ["b0"], ["dot", 1], []])
    failed_run = json.loads(lines[0])
    failed_run[1][1] = [1e10, float("inf")]
    (d / tvmdb.RECORD_FILE).write_text(
        "\n".join(
            [
                json.dumps(good),
                json.dumps(unknown),
                "{not json",
                json.dumps(failed_run),
                json.dumps([7, good[1]]),
                lines[1],
            ]
        )
        + "\n"
    )
    report = tvmdb.import_tvm(tmp_path)
    w = report.workloads[0]
    assert w.imported == 2 and w.failed == 2
    assert [line for line, _ in w.failures] == [2, 4]
    assert "no workbench counterpart for TVM's Tensorize" in w.failures[0][1]
    assert "not a successful measurement" in w.failures[1][1]
    assert len(report.errors) == 2 and ":3: not JSON" in report.errors[0]
    assert "GMM" in report.summary() and "record 2:" in report.summary()


def test_import_without_a_matching_workload_reports_it():
    report = tvmdb.import_tvm(DATA / "DEP", candidates={"GMM": wb.workloads.get("GMM")})
    assert report.workloads == []
    assert "no workbench workload matches (params (float32[1, 112, 112, 32]" in report.errors[0]


def test_import_of_a_missing_directory(tmp_path):
    with pytest.raises(tvmdb.TVMImportError, match="no such directory"):
        tvmdb.import_tvm(tmp_path / "nothing")
    with pytest.raises(tvmdb.TVMImportError, match="neither it nor a subdirectory"):
        tvmdb.import_tvm(tmp_path)


@pytest.mark.parametrize(
    "target, expected",
    [
        ({"keys": ["cpu"], "kind": "llvm", "mcpu": "znver3", "num-cores": 2, "tag": ""}, ZEN3),
        ({"kind": "llvm"}, "llvm"),
        ("llvm -mcpu=icelake-server", "llvm -mcpu=icelake-server"),
    ],
)
def test_convert_target(target, expected):
    assert tvmdb.convert_target(target) == expected


# -- export ---------------------------------------------------------------------------------


def test_export_text_uses_tvm_names():
    sch = replayed("GMM", 1)
    text = tvmdb.to_tvm_python(sch.trace)
    assert 'sch.get_sblock(name="Z")' in text and "get_block(" not in text
    assert "disable_predication" not in text  # TVM's default
    assert text.count("\n") == len(sch.trace) - 1
    assert tvmdb.to_tvm_python(sch.trace.as_json()) == text


def test_export_renames_what_differs():
    sch = wb.Schedule(wb.workloads.get("GMM", **wb.workloads.small("GMM")))
    b, i, j, k = sch.get_loops("Z")
    sch.sample_perfect_tile(k, n=2, max_innermost_factor=None)
    sch.blockize(k)
    text = tvmdb.to_tvm_python(sch.trace)
    assert "max_innermost_factor=-1" in text and "sch.blockize(target=l" in text


def test_export_refuses_primitives_tvm_lacks():
    @wb.schedule_primitive("double_split_for_test")
    def double_split_for_test(sch, loop: wb.LoopRV) -> None:
        sch.split(loop, [None, 2])

    try:
        sch = wb.Schedule(wb.workloads.get("GMM", **wb.workloads.small("GMM")))
        sch.double_split_for_test(sch.get_loops("Z")[1])
        with pytest.raises(ValueError, match="double_split_for_test has no TVM counterpart"):
            tvmdb.to_tvm_python(sch.trace)
    finally:
        wb.schedule.instruction.unregister("double_split_for_test")


def tvm_python():
    # the benches' convention: --tvm-python / WB_TVM_PYTHON, else .venv-tvm in the repository
    default = str(REPO / ".venv-tvm" / "bin" / "python")
    path = os.environ.get("WB_TVM_PYTHON") or os.environ.get("WORKBENCH_TVM_PYTHON") or default
    if not os.path.exists(path):
        return None
    probe = subprocess.run([path, "-c", "import tvm_ffi, tvm.s_tir"], capture_output=True)
    return path if probe.returncode == 0 else None


def test_exported_traces_rebuild_tvm_programs_in_tvm(tmp_path):
    """TVM runs the exported text; the module equals the one TVM's own trace gives."""
    python = tvm_python()
    if python is None:
        pytest.skip("no TVM 0.27 Python (set WB_TVM_PYTHON)")
    jobs = [
        {
            "workload": name,
            "tvm_trace": tvm_records(name)[line][0],
            "text": tvmdb.to_tvm_python(replayed(name, line).trace),
        }
        for name, line in [("GMM", 1), ("C1D", 1), ("DEP", 0), ("NRM", 0), ("SFM", 2)]
    ]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    proc = subprocess.run(
        [python, str(REPO / "bench" / "_tvm_replay.py"), str(tmp_path / "jobs.json")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout.splitlines()[-1])["results"]
    assert results == [{"ok": True, "equal": True, "error": ""}] * len(jobs)


# -- command line ---------------------------------------------------------------------------


def test_cli_import_then_export(tmp_path, capsys):
    db = str(tmp_path / "t.sqlite")
    assert main(["import-tvm", str(DATA), "--db", db]) == 0
    out = capsys.readouterr().out
    assert "GMM      3 imported    0 failed  best " in out and f"on {ZEN3}" in out
    assert "records in" in out and ": 17" in out
    assert main(["export-tvm", "GMM", "--db", db]) == 0
    text = capsys.readouterr().out
    first, body = text.split("\n", 1)
    assert first.startswith(f"# GMM on {ZEN3}: ") and "(imported from TVM)" in first
    assert body.startswith('b0 = sch.get_sblock(name="Z")')
    assert main(["export-tvm", "GMM", "--db", db, "--all"]) == 0
    assert capsys.readouterr().out.count("# GMM on") == 3


def test_cli_export_prints_the_tuners_pick_not_the_fastest_first_measurement(tmp_path, capsys):
    """After a final interleaved re-measurement, the pick (db.best) is what was fastest in it:
    export-tvm prints that trace, even where another trial was faster when first measured."""
    from workbench.tune.database.base import Database, Record

    db_path = str(tmp_path / "t.sqlite")
    assert main(["import-tvm", str(DATA / "GMM"), "--db", db_path]) == 0
    capsys.readouterr()
    func = wb.workloads.get("GMM")
    with Database.open(db_path) as db:
        trials = db.top_k(func, ZEN3, 3)
        fastest, slower = trials[0], trials[-1]
        final = {"remeasure": "final", "final": {"group": "g", "rounds": 2, "stat": "min"}}
        db.add(
            [
                Record.of(func, ZEN3, fastest.trace, [slower.latency * 2] * 2, **final),
                Record.of(func, ZEN3, slower.trace, [slower.latency] * 2, **final),
            ]
        )
        assert db.best(func, ZEN3).trace_hash == slower.trace_hash
    expected = tvmdb.to_tvm_python(slower)
    for target in ([], ["--target", ZEN3]):
        assert main(["export-tvm", "GMM", "--db", db_path, *target]) == 0
        first, body = capsys.readouterr().out.split("\n", 1)
        assert f"{slower.latency * 1e3:.4f} ms" in first
        assert body.strip() == expected.strip()
    assert main(["export-tvm", "GMM", "--db", db_path, "--all"]) == 0
    blocks = capsys.readouterr().out.split("\n# GMM on")
    assert len(blocks) == 3 and blocks[0].split("\n", 1)[1].strip() == expected.strip()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["import-tvm", "{tmp}/missing"], "no such directory"),
        (["import-tvm", "{tmp}"], "neither it nor a subdirectory holds a TVM database"),
        (["import-tvm", str(DATA / "GMM"), "--db", "{tmp}/bad.sqlite"], "not a SQLite database"),
        (["import-tvm", str(DATA / "GMM"), "--target", "gpu"], "unknown target kind"),
        (["export-tvm", "GMM", "--db", "{tmp}/missing.sqlite"], "no such database"),
        (["export-tvm", "NOPE", "--db", "{tmp}/bad.sqlite"], "no workload named 'NOPE'"),
        (["export-tvm", "GMM", "--db", "{tmp}/bad.sqlite"], "not a SQLite database"),
    ],
)
def test_cli_user_errors_exit_2_with_one_line(tmp_path, capsys, argv, message):
    (tmp_path / "bad.sqlite").write_text("not a database")
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_cli_import_of_an_unmatched_workload_exits_2(tmp_path, capsys):
    d = tmp_path / "X"
    d.mkdir()
    graph = tvmdb._decode_module(tvm_module("GMM"))
    for node in graph["nodes"]:
        if node["type"] == "ffi.String" and node["data"] == "Z":
            node["data"] = "Y_renamed"  # a block name no workbench workload has
    (d / tvmdb.WORKLOAD_FILE).write_text(json.dumps(["1", json.dumps(graph)]) + "\n")
    (d / tvmdb.RECORD_FILE).write_text("")
    assert main(["import-tvm", str(d), "--db", str(tmp_path / "t.sqlite")]) == 2
    assert "no workbench workload matches" in capsys.readouterr().err


def test_cli_export_without_records(tmp_path, capsys):
    db = str(tmp_path / "t.sqlite")
    assert main(["import-tvm", str(DATA / "NRM"), "--db", db]) == 0
    capsys.readouterr()
    assert main(["export-tvm", "GMM", "--db", db]) == 1
    assert "no successful record of GMM" in capsys.readouterr().err
