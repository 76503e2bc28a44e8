"""``workbench tune`` and ``workbench best``."""

from workbench.cli import main
from workbench.tune import Database


def test_tune_then_best(tmp_path, capsys):
    db = str(tmp_path / "cli.sqlite")
    assert (
        main(
            [
                "tune",
                "GMM",
                "--small",
                "--trials",
                "4",
                "--per-iter",
                "4",
                "--db",
                db,
                "--strategy",
                "replay_trace",
                "--cost-model",
                "random",
            ]
        )
        == 0
    )
    out = capsys.readouterr()
    assert "records in" in out.out and "4/4 GMM" in out.err
    assert main(["best", "GMM", "--small", "--db", db]) == 0
    text = capsys.readouterr().out
    assert "# GMM on llvm:" in text and "T.prim_func" in text
    assert "# trace" in text and "sch.sample_perfect_tile" in text


def test_best_without_records(tmp_path, capsys):
    db = str(tmp_path / "empty.sqlite")
    Database.open(db).close()
    assert main(["best", "GMM", "--shape", "n=8", "m=8", "k=8", "--db", db]) == 1
    assert "no successful record of GMM" in capsys.readouterr().out


import subprocess  # noqa: E402

import pytest  # noqa: E402


@pytest.mark.parametrize(
    "argv, words",
    [
        (["tune", "NOPE"], "no workload named 'NOPE'"),
        (["tune", "GMM", "--shape", "n=abc"], "--shape expects key=positive-integer"),
        (["tune", "GMM", "--shape", "zz=4"], "unknown shape parameter"),
        (["tune", "GMM", "--trials", "-3"], "argument --trials: expected a positive integer"),
        (["tune", "GMM", "--per-iter", "x"], "argument --per-iter"),
        (["tune", "GMM", "--target", "llvm -num-cores=x"], "-num-cores must be a positive"),
        (["tune", "GMM", "--small", "--db", "/nonexistent/dir/t.sqlite"], "cannot open"),
        (["tune", "GMM", "--small", "--db", "/nonexistent/dir/t.jsonl"], "cannot create"),
        (["tune", "all", "--shape", "n=4"], "--shape applies to one workload"),
        (["best", "GMM", "--db", "missing.sqlite"], "no such database"),
        (["show", "NOPE"], "no workload named"),
        (["run", "GMM", "--number", "0"], "expected a positive integer"),
        (["db", "check", "missing.sqlite"], "no such database file"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_user_errors_are_one_line_and_status_2(argv, words, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and lines[0].startswith("workbench"), lines
    assert "Traceback" not in captured.err + captured.out


def test_damaged_db_in_best_is_one_line(tmp_path, capsys):
    path = tmp_path / "t.sqlite"
    path.write_bytes(b"\x00" * 300)
    assert main(["best", "GMM", "--db", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a SQLite database" in err[0]


def test_internal_error_prints_traceback_and_asks_to_report(monkeypatch, capsys):
    import workbench.cli as cli

    def broken(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(cli, "_cmd_workloads", broken)
    assert main(["workloads"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: a bug" in err and "please report" in err


def test_real_process_unknown_workload():
    done = subprocess.run(["workbench", "tune", "NOPE"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "workbench: no workload named 'NOPE'; known: " + ", ".join(__import__("workbench").workloads.names())
    ]


def test_best_points_at_records_of_the_same_name_under_other_keys(tmp_path, capsys):
    """No record for this shape, some for another: the answer says the file has them (an old
    database, whose keys differ, looks the same)."""
    db = str(tmp_path / "other.sqlite")
    tune = ["tune", "GMM", "--shape", "n=8", "m=8", "k=8", "--trials", "2", "--per-iter", "2"]
    assert main([*tune, "--strategy", "replay_trace", "--cost-model", "random", "--db", db]) == 0
    capsys.readouterr()
    assert main(["best", "GMM", "--shape", "n=16", "m=8", "k=8", "--db", db]) == 1
    out = capsys.readouterr().out
    assert "(0 records); it holds 2 records of 1 other workload(s) named 'batch_matmul_nkkm'" in out
    assert main(["best", "GMM", "--shape", "n=8", "m=8", "k=8", "--db", db]) == 0
