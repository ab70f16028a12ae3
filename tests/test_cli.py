"""Smoke run of `regret-gateway bench offline` on a tiny RouterBench-layout file."""

import json

import numpy as np
from typer.testing import CliRunner

from regret_gateway.cli import app
from tests.evaluation.test_loaders import rb_row, write_routerbench

runner = CliRunner()


def test_bench_offline_smoke(tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(160):
        code = i % 2 == 0
        rows.append(rb_row(i, q_small=float(code and rng.random() < 0.9), q_large=float(rng.random() < 0.9)))
        rows[-1]["prompt"] = repr([("Write a Python function number " if code else "Explain the history of ") + str(i)])
    write_routerbench(tmp_path / "tiny_train.csv", rows[:120])
    write_routerbench(tmp_path / "tiny_test.csv", rows[120:])
    out = tmp_path / "out"
    result = runner.invoke(app, [
        "bench", "offline", "--data", str(tmp_path), "--out", str(out), "--trials", "2", "--lambdas", "0,100,200",
        "--cache-dir", str(tmp_path / "cache"), "--device", "cpu",
    ])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text())
    assert set(doc) >= {"dataset", "config", "methods"}
    assert set(doc["methods"]) >= {"rm-softmax", "rm-interval", "full-feedback", "single-best", "oracle"}
    m = doc["methods"]["rm-softmax"]
    assert m["lambda"] == [0.0, 100.0, 200.0] and len(m["utility_mean"]) == 3 and len(m["utility_std"]) == 3
    assert set(m) >= {"accuracy_mean", "cost_mean", "auc"}
    oracle = doc["methods"]["oracle"]["utility_mean"]
    assert all(u <= o + 1e-9 for name, mm in doc["methods"].items() for u, o in zip(mm["utility_mean"], oracle))
    assert (out / "utility.md").read_text().startswith("Test utility x100")
    assert (out / "accuracy_cost.png").stat().st_size > 10_000


def test_bench_offline_clear_errors(tmp_path):
    result = runner.invoke(app, ["bench", "offline", "--data", str(tmp_path / "none.csv"), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "not found" in result.output
    write_routerbench(tmp_path / "t_train.csv", [rb_row(i) for i in range(5)])
    result = runner.invoke(app, ["bench", "offline", "--data", str(tmp_path / "t_train.csv"), "--out", str(tmp_path), "--methods", "rm-softmax,bogus"])
    assert result.exit_code == 2 and "unknown methods ['bogus']" in result.output
