"""``workbench tune`` and ``workbench best``."""
from workbench.cli import main
from workbench.tune import Database


def test_tune_then_best(tmp_path, capsys):
    db = str(tmp_path / "cli.sqlite")
    assert main(["tune", "GMM", "--small", "--trials", "4", "--per-iter", "4", "--db", db,
                 "--strategy", "replay_trace", "--cost-model", "random"]) == 0
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
