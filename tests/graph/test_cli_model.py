"""``workbench tune-model``: a zoo model tuned, built and run beside PyTorch; user errors."""

import re

import pytest

from workbench.cli import main

pytest.importorskip("torch", reason="PyTorch is the optional extra 'torch' (pip install torch==2.13.0)")

SMALL_BERT = ["--size", "hidden=16", "heads=2", "intermediate=32", "seq=4"]


def test_tune_model_prints_tasks_and_the_comparison_with_pytorch(tmp_path, capsys):
    db = str(tmp_path / "m.sqlite")
    argv = ["tune-model", "bert_layer", *SMALL_BERT, "--trials", "2", "--per-iter", "2", "--db", db]
    argv += ["--strategy", "replay_trace", "--cost-model", "random", "--workers", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "bert_layer {'hidden': 16, 'heads': 2, 'intermediate': 32, 'seq': 4}:" in out
    assert "fused_dense_add_gelu" in out and "no record" in out
    hits = re.search(r"tasks from .*m\.sqlite: (\d+) of 11;", out)
    assert hits and 1 <= int(hits.group(1)) <= 2  # two trials: one or two tasks got a record
    assert "x eager; output matches PyTorch" in out
    # resumed with no more trials: built from the same database
    assert main(["tune-model", "bert_layer", *SMALL_BERT, "--trials", "0", "--db", db]) == 0
    assert f": {hits.group(1)} of 11; tuning 0 trials" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["resnet50"], "unknown model 'resnet50'; the zoo has resnet18, resnet34, mobilenet_v2, bert_layer"),
        (["resnet18", "--size", "depth=3"], "--size expects key=value with a key of resnet18 (width, image,"),
        (["resnet18", "--size", "width=wide"], "--size width: expected a number, got 'wide'"),
        (["resnet18", "--size", "image=0"], "--size image: expected a positive number, got '0'"),
        (["resnet18", "--trials", "-1"], "--trials: expected 0 or more, got -1"),
        (["resnet18", "--target", "nonsense"], "argument --target"),
    ],
)
def test_user_errors_are_one_line_and_status_2(tmp_path, capsys, argv, message):
    assert main(["tune-model", *argv, "--db", str(tmp_path / "x.sqlite")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
