"""The CLI's wiring: `bench offline` on a tiny RouterBench-layout file (two methods, one trial), `db`, errors."""

import json
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from typer.testing import CliRunner

from regret_gateway.cli import app
from regret_gateway.config import EmbedderSpec
from tests.evaluation.test_loaders import rb_row, write_routerbench

runner = CliRunner()


def _tiny_benchmark(folder):
    """A RouterBench-layout train/test pair: the small model solves the code prompts only, the large one most."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(160):
        code = i % 2 == 0
        rows.append(rb_row(i, q_small=float(code and rng.random() < 0.9), q_large=float(rng.random() < 0.9)))
        rows[-1]["prompt"] = repr([("Write a Python function number " if code else "Explain the history of ") + str(i)])
    write_routerbench(folder / "tiny_train.csv", rows[:120])
    write_routerbench(folder / "tiny_test.csv", rows[120:])


def test_bench_offline_wiring(tmp_path):
    _tiny_benchmark(tmp_path)
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "bench",
            "offline",
            "--data",
            str(tmp_path),
            "--out",
            str(out),
            "--trials",
            "1",
            "--lambdas",
            "0,100,200",
            "--methods",
            "r-and-c,rm-softmax",
            "--outcome-preset",
            "fast",
            "--served-one-fit",
            "--log-draws",
            "2",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text())
    assert set(doc) >= {"dataset", "config", "methods"}
    # what a run used is recorded
    assert doc["config"]["train_preset"] == "fast" and doc["config"]["outcome_preset"] == "fast"
    assert set(doc["methods"]) == {"rm-softmax", "r-and-c", "served", "single-best", "oracle", "logged-constant"}
    # each training prompt logged twice (--log-draws 2), the test prompts never
    assert doc["dataset"]["log_draws"] == 2 and doc["config"]["log_draws"] == 2
    assert doc["dataset"]["logged_rows"] == 2 * (doc["dataset"]["n_train"] + doc["dataset"]["n_val"])
    m = doc["methods"]["rm-softmax"]
    assert m["lambdas"] == [0.0, 100.0, 200.0] and len(m["utility_mean"]) == 3 and len(m["utility_std"]) == 3
    assert set(m) >= {"accuracy_mean", "cost_mean", "auc"}
    oracle = doc["methods"]["oracle"]["utility_mean"]
    assert all(u <= o + 1e-9 for name, mm in doc["methods"].items() for u, o in zip(mm["utility_mean"], oracle))
    assert (out / "utility.md").read_text().startswith("Test utility x100")
    assert (out / "accuracy_cost.png").stat().st_size > 10_000
    # why served differs from the single best model: how often a learned router won the gate, and how often
    # the fixed choice estimated from the logs is the model full feedback picks
    assert 0.0 <= doc["diagnostics"]["served_learned_share"] <= 1.0
    assert "served_constant_is_single_best_share" in doc["diagnostics"]


@pytest.mark.slow
def test_bench_backends_routes_the_same_with_torch_and_onnx(tmp_path):
    _tiny_benchmark(tmp_path)
    result = runner.invoke(app, ["bench", "backends", "--data", str(tmp_path), "--lambdas", "0,100"])
    assert result.exit_code == 0, result.output
    assert "cosine torch vs onnx: min 0.9999" in result.output or "cosine torch vs onnx: min 1.0000" in result.output
    assert "| 0 | 0 (0.00%) |" in result.output and "| 100 | 0 (0.00%) |" in result.output


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bench_gateway_prints_torch_and_onnx_hook_rows_side_by_side():
    args = ["bench", "gateway", "--requests", "10", "--concurrency", "1", "--prompts", "short", "--repeats", "2", "--budget", "5"]
    backends = "torch,torch-eager,onnx,onnx-plain"
    result = runner.invoke(app, [*args, "--threads", "1", "--layers", "2", "--backends", backends])
    assert result.exit_code == 0, result.output
    assert "| added p99 ms |" in result.output and "| routed | read short | shed | timed out |" in result.output
    for backend, key in (
        ("torch, traced on cpu", "torch"),
        ("torch, eager on cpu", "torch-eager"),
        ("onnx, fused graph, 1 thread on cpu", "onnx-1"),
        ("onnx, fused graph, 2 layers on cpu", "onnx-L2"),
        ("onnx, plain graph on cpu", "onnx-plain"),
    ):
        assert f"| short | regret-gateway hook | {backend} | 1 | 20 |" in result.output, result.output
        # 20 warm-up requests at start, 2 at the cell's concurrency, 2 x 10 timed; plain rows are not routed
        assert f"hook ({key}): routed=42 fallback=0" in result.output
    for plain in ("plain LiteLLM, one model", "plain LiteLLM, the hook's models"):
        assert result.output.count(f"| short | {plain} | - | 1 | 20 |") == 5  # beside each hook
    bad = runner.invoke(app, ["bench", "gateway", "--backends", "tensorrt"])
    assert bad.exit_code == 2 and "unknown --backends/--prompts values: ['tensorrt']" in bad.output
    bad = runner.invoke(app, ["bench", "gateway", "--threads", "-1"])
    assert bad.exit_code == 2 and "--threads must be whole numbers >= 0" in bad.output
    bad = runner.invoke(app, ["bench", "gateway", "--layers", "2", "--backends", "torch"])
    assert bad.exit_code == 2 and "add onnx to --backends" in bad.output


def test_the_gateway_bench_compares_the_gpu_with_the_cpu_encoders_it_replaces():
    from regret_gateway.bench.hook_latency import variants

    on_gpu = variants(("torch", "onnx"), "cuda", threads=(1, 2))
    assert on_gpu == {
        "torch-cpu": {"backend": "torch", "device": "cpu", "threads": None},
        "torch-cuda": {"backend": "torch", "device": "cuda", "threads": None},
        "onnx-1": {"backend": "onnx", "device": "cpu", "threads": 1},
        "onnx-2": {"backend": "onnx", "device": "cpu", "threads": 2},
    }
    assert variants(("onnx",), "cpu", threads=(0, 1)) == {  # 0: ONNX Runtime's default beside one thread
        "onnx": {"backend": "onnx", "device": "cpu", "threads": None},
        "onnx-1": {"backend": "onnx", "device": "cpu", "threads": 1},
    }
    assert variants(("onnx",), "cpu", layers=(3,)) == {
        "onnx": {"backend": "onnx", "device": "cpu", "threads": None},
        "onnx-L3": {"backend": "onnx", "device": "cpu", "threads": None, "layers": 3},
    }
    assert variants(("onnx-plain",), "cpu") == {
        "onnx-plain": {"backend": "onnx", "device": "cpu", "threads": None, "fuse": False}
    }
    assert variants(("torch", "torch-eager"), "cuda") == {  # torch traced (the default) beside torch eager
        "torch-cpu": {"backend": "torch", "device": "cpu", "threads": None},
        "torch-cuda": {"backend": "torch", "device": "cuda", "threads": None},
        "torch-eager-cuda": {"backend": "torch", "device": "cuda", "threads": None, "trace": False},
    }
    assert variants(("static", "onnx"), "cpu")["static"] == {"kind": "static", "device": "cpu", "threads": None}
    assert variants(("torch", "onnx"), "cpu") == {
        "torch": {"backend": "torch", "device": "cpu", "threads": None},
        "onnx": {"backend": "onnx", "device": "cpu", "threads": None},
    }


def test_pooled_bench_rows_weigh_every_request_and_every_second():
    from regret_gateway.bench.hook_latency import Load, pool

    row = pool([Load(np.array([10.0, 20.0, 30.0]), 1.0, [], 0.3), Load(np.array([40.0]), 3.0, [], 0.1)])
    assert row.requests == 4 and row.p50_ms == 25.0 and row.rps == 1.0  # 4 requests in 4 seconds
    assert row.cpu_ms == pytest.approx(100.0)  # 0.4 CPU seconds over 4 requests


def test_at_concurrency_one_the_hook_and_the_plain_targets_take_turns_every_few_requests(monkeypatch):
    """So that a drift of the machine's speed within a repeat falls on all three alike."""
    import asyncio

    from regret_gateway.bench.hook_latency import MASTER_KEY, MODELS, _turns
    from regret_gateway.bench.local import LocalServer, free_port, mock_upstream

    seen: list[tuple[str, str]] = []

    def respond(model: str, text: str) -> tuple[str, int, int]:
        seen.append((model, text))
        return "ok", 1, 1

    monkeypatch.setenv("LITELLM_MASTER_KEY", MASTER_KEY)
    port = free_port()
    with LocalServer(mock_upstream(respond), port):
        hook, matched, single = asyncio.run(_turns(port, [f"p{i}" for i in range(5)], turn=2))
    # no LiteLLM here: the "hook's models" are the virtual name it was sent, as served
    assert seen[:6] == [("regret-router", "p0"), ("regret-router", "p1")] * 2 + [(MODELS[0], "p0"), (MODELS[0], "p1")]
    assert [t for _, t in seen[6:]] == ["p2", "p3"] * 3 + ["p4"] * 3
    assert all(len(load.latencies_ms) == 5 and len(load.served) == 5 and load.seconds > 0 for load in (hook, matched, single))


def test_bench_offline_clear_errors(tmp_path):
    result = runner.invoke(app, ["bench", "offline", "--data", str(tmp_path / "none.csv"), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "not found" in result.output
    write_routerbench(tmp_path / "t_train.csv", [rb_row(i) for i in range(5)])
    result = runner.invoke(
        app,
        ["bench", "offline", "--data", str(tmp_path / "t_train.csv"), "--out", str(tmp_path), "--methods", "rm-softmax,bogus"],
    )
    assert result.exit_code == 2 and "unknown methods ['bogus']" in result.output
    result = runner.invoke(
        app, ["bench", "offline", "--data", str(tmp_path / "t_train.csv"), "--out", str(tmp_path), "--outcome-preset", "slow"]
    )
    assert result.exit_code == 2 and "unknown training preset 'slow'" in result.output
    result = runner.invoke(
        app, ["bench", "offline", "--data", str(tmp_path / "t_train.csv"), "--out", str(tmp_path), "--context", "{prompt}"]
    )
    assert result.exit_code == 2 and "must name one or more of" in result.output


def test_db_upgrade_status_export(tmp_path):
    import numpy as np
    from sqlalchemy.orm import Session

    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
    from regret_gateway.store.writes import record_decisions, record_feedback

    url = f"sqlite:///{tmp_path}/gw.db"
    status = runner.invoke(app, ["db", "status", "--url", url])
    assert status.exit_code == 1 and "pending migrations: 0001, 0002, 0003, 0004, 0005, 0006, 0007" in status.output
    up = runner.invoke(app, ["db", "upgrade", "--url", url])
    assert up.exit_code == 0 and "at revision 0007" in up.output
    engine = make_engine(url)
    with Session(engine) as s, s.begin():
        record_decisions(
            s,
            [
                DecisionRecord(
                    request_id=f"r{i}",
                    tier="t",
                    lam=0.0,
                    embedding_model="m",
                    embedding=np.ones(3),
                    chosen_model=("a", "b")[i % 2],
                    propensity=0.5,
                    team="x",
                    outcome=OutcomeRecord(f"r{i}", cost_usd=0.001),
                    created_at=datetime.now(timezone.utc) - timedelta(days=100 if i == 3 else 1),
                )
                for i in range(4)
            ],
        )
        record_feedback(s, [FeedbackRecord("r0", 1.0), FeedbackRecord("r1", 0.0), FeedbackRecord("r2", 0.5)])
    engine.dispose()
    status = runner.invoke(app, ["db", "status", "--url", url])
    assert status.exit_code == 0 and "decisions: 4 rows, " in status.output and "feedback: 3 rows, " in status.output
    assert "MiB on disk" in status.output, status.output
    out = tmp_path / "train.csv"
    export = runner.invoke(app, ["db", "export", str(out), "--url", url])
    assert export.exit_code == 0 and "wrote 3 rows" in export.output and "no_feedback=1" in export.output
    assert len(out.read_text().splitlines()) == 4
    parts = runner.invoke(app, ["db", "export", str(tmp_path / "parts"), "--url", url, "--slice", "12h"])
    assert parts.exit_code == 0 and "wrote 3 rows in 1 parts" in parts.output, parts.output
    assert (tmp_path / "parts" / "manifest.json").exists() and (tmp_path / "parts" / "part-00000.parquet").exists()
    bad = runner.invoke(app, ["db", "export", str(tmp_path / "x.txt"), "--url", url])
    assert bad.exit_code == 2 and "unsupported file type: x.txt (supported: .csv, .csv.gz, .parquet)" in bad.output
    # retention: the default 90 days; r3 is 100 days old
    dry = runner.invoke(app, ["db", "prune", "--url", url, "--dry-run"])
    assert dry.exit_code == 0 and "1 decisions before" in dry.output and "would be deleted (dry run)" in dry.output, dry.output
    pruned = runner.invoke(app, ["db", "prune", "--url", url])
    assert pruned.exit_code == 0 and "deleted 1 decisions" in pruned.output and "decisions: 4 -> 3 rows" in pruned.output, (
        pruned.output
    )
    again = runner.invoke(app, ["db", "prune", "--url", url, "--older-than", "12h"])
    assert again.exit_code == 0 and "deleted 3 decisions" in again.output and "decisions: 3 -> 0 rows" in again.output, (
        again.output
    )
    assert runner.invoke(app, ["db", "prune", "--url", url, "--older-than", "soon"]).exit_code == 2


def test_feedback_import_all_or_nothing(tmp_path):
    import numpy as np
    from sqlalchemy.orm import Session

    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.migrate import upgrade
    from regret_gateway.store.queries import get_decision
    from regret_gateway.store.records import DecisionRecord
    from regret_gateway.store.writes import record_decisions

    url = f"sqlite:///{tmp_path}/gw.db"
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as s, s.begin():
        record_decisions(
            s,
            [
                DecisionRecord(
                    request_id=f"r{i}",
                    tier="t",
                    lam=0.0,
                    embedding_model="m",
                    embedding=np.ones(3),
                    chosen_model="a",
                    propensity=1.0,
                )
                for i in range(3)
            ],
        )
    good = tmp_path / "scores.csv"
    good.write_text("request_id,score,source\nr0,1,judge\nr1,0.25,\n")
    result = runner.invoke(app, ["feedback", "import", str(good), "--url", url])
    assert result.exit_code == 0 and "imported 2 scores" in result.output
    with_unknown = tmp_path / "scores.jsonl"
    with_unknown.write_text('{"request_id": "r2", "score": 0.5}\n{"request_id": "ghost", "score": 1}\n')
    refused = runner.invoke(app, ["feedback", "import", str(with_unknown), "--url", url])
    assert refused.exit_code == 2 and "'ghost'" in refused.output
    bad = tmp_path / "bad.csv"
    bad.write_text("request_id,score\nr2,1.7\n")
    refused_bad = runner.invoke(app, ["feedback", "import", str(bad), "--url", url])
    assert refused_bad.exit_code == 2 and "line 2" in refused_bad.output and "`score` must be in [0, 1]" in refused_bad.output
    with Session(engine) as s:
        assert get_decision(s, "r2").feedback is None  # nothing changed
        assert get_decision(s, "r0").feedback.source == "judge" and get_decision(s, "r1").feedback.source == "import"
    partial = runner.invoke(app, ["feedback", "import", str(with_unknown), "--url", url, "--skip-unknown"])
    assert partial.exit_code == 0 and "imported 1 scores" in partial.output and "skipped 1 unknown" in partial.output
    engine.dispose()


def migrated(tmp_path) -> None:
    """The store a gateway that started once leaves: ``tmp_path/gw.db``, migrated, empty."""
    from regret_gateway.store.migrate import upgrade

    upgrade(f"sqlite:///{tmp_path}/gw.db")


def test_status_and_retrain_on_a_missing_or_unmigrated_store_say_what_to_do_and_write_nothing(tmp_path, monkeypatch):
    """Run where nothing was logged (no --config: the default store in the current folder), then on a store
    never migrated: one line that says what to run, exit 2, and no file or folder left behind."""
    import sqlite3

    monkeypatch.chdir(tmp_path)
    for command in ("status", "retrain"):
        result = runner.invoke(app, [command])
        assert result.exit_code == 2, result.output
        assert result.output.startswith(f"error: `{command}`: no store at regret-gateway.db") and "db upgrade" in result.output
        assert len(result.output.strip().splitlines()) == 1 and list(tmp_path.iterdir()) == []
    sqlite3.connect(tmp_path / "regret-gateway.db").close()  # a file, but no schema
    for command in ("status", "retrain"):
        result = runner.invoke(app, [command])
        assert result.exit_code == 2 and "is at schema revision none" in result.output, result.output
        assert "run `regret-gateway db upgrade --url sqlite:///regret-gateway.db`" in result.output
        assert "Traceback" not in result.output and "SELECT" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["regret-gateway.db"]


def test_retrain_refuses_an_empty_store_and_status_reports_cold_start(tmp_path):
    cfg = tmp_path / "settings.yaml"
    cfg.write_text(
        f"models: [a, b]\ndefault_tier: std\ntiers: {{std: {{lam: 100}}}}\n"
        f"store: {{url: 'sqlite:///{tmp_path}/gw.db'}}\nartifacts_dir: {tmp_path}/artifacts\n"
    )
    migrated(tmp_path)
    result = runner.invoke(app, ["retrain", "--config", str(cfg)])
    assert result.exit_code == 2 and "refused: no usable rows" in result.output
    assert " reading the logs\n" in result.stderr and " read 0 usable rows in " in result.stderr  # its progress
    status = runner.invoke(app, ["status", "--config", str(cfg)])
    assert status.exit_code == 0 and "cold start" in status.output and "requests in total: 0" in status.output
    bad = runner.invoke(app, ["retrain", "--config", str(cfg), "--every", "soon"])
    assert bad.exit_code == 2 and "--every must look like" in bad.output
    one_fit = runner.invoke(app, ["retrain", "--config", str(cfg), "--no-cross-fit", "--folds", "3"])
    assert one_fit.exit_code == 2 and "refused: no usable rows" in one_fit.output
    one_fold = runner.invoke(app, ["retrain", "--config", str(cfg), "--folds", "1"])
    assert one_fold.exit_code == 2 and "--folds" in one_fold.output
    no_threads = runner.invoke(app, ["retrain", "--config", str(cfg), "--threads", "0"])
    assert no_threads.exit_code == 2 and "--threads" in no_threads.output


def test_retrain_threads_sets_the_fits_threads(tmp_path, monkeypatch):
    import torch

    import regret_gateway.retrain as retrain_module
    from regret_gateway.retrain import pipeline

    seen = []
    monkeypatch.setattr(
        pipeline,
        "retrain",
        lambda *a, **k: seen.append(torch.get_num_threads()) or retrain_module.RetrainResult("refused", "stand-in"),
    )
    before = torch.get_num_threads()
    cfg = tmp_path / "settings.yaml"
    cfg.write_text(
        f"models: [a, b]\ndefault_tier: std\ntiers: {{std: {{lam: 100}}}}\nstore: {{url: 'sqlite:///{tmp_path}/gw.db'}}\n"
    )
    migrated(tmp_path)
    try:
        torch.set_num_threads(2)  # not already what the option asks for, whatever this machine's default
        result = runner.invoke(app, ["retrain", "--config", str(cfg), "--threads", "1"])
    finally:
        torch.set_num_threads(before)
    assert result.exit_code == 2 and seen == [1], result.output


def _retrain_options_seen(tmp_path, monkeypatch, field: str):
    """``retrain`` on a small config with the pipeline replaced: returns the CLI's arguments -> result and the
    list of ``RetrainOptions.<field>`` each call passed on."""
    import regret_gateway.retrain as retrain_module
    from regret_gateway.retrain import pipeline

    seen: list = []
    monkeypatch.setattr(
        pipeline,
        "retrain",
        lambda s, e, opts, **k: seen.append(getattr(opts, field)) or retrain_module.RetrainResult("refused", "x"),
    )
    cfg = tmp_path / "settings.yaml"
    cfg.write_text(
        f"models: [a, b]\ndefault_tier: std\ntiers: {{std: {{lam: 100}}}}\nstore: {{url: 'sqlite:///{tmp_path}/gw.db'}}\n"
    )
    migrated(tmp_path)
    return (lambda *args: runner.invoke(app, ["retrain", "--config", str(cfg), *args])), seen


def test_retrain_precision_is_passed_on_and_a_bad_one_refused_in_one_line(tmp_path, monkeypatch):
    run, seen = _retrain_options_seen(tmp_path, monkeypatch, "precision")
    assert run().exit_code == 2 and seen == ["auto"]
    assert run("--precision", "float32").exit_code == 2 and seen == ["auto", "float32"]
    bad = run("--precision", "half")
    assert bad.exit_code == 2 and seen == ["auto", "float32"], bad.output
    assert bad.output.strip().splitlines() == ["error: --precision: precision must be one of float32, bfloat16, auto, got 'half'"]


def test_retrain_cold_start_rows_is_passed_on_and_a_negative_one_refused(tmp_path, monkeypatch):
    run, seen = _retrain_options_seen(tmp_path, monkeypatch, "cold_start_rows")
    assert run().exit_code == 2 and seen == [0]
    assert run("--cold-start-rows", "1500").exit_code == 2 and seen == [0, 1500]
    bad = run("--cold-start-rows", "-5")
    assert bad.exit_code == 2 and seen == [0, 1500] and "--cold-start-rows" in bad.output, bad.output


def test_retrain_feedback_sources_and_status_coverage_spend_agreement(tmp_path):
    """retrain --feedback picks the quality sources (and reports rows per source); status shows coverage by
    source, the judge's spend and its agreement with the user scores."""
    from sqlalchemy.orm import Session

    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.migrate import upgrade
    from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
    from regret_gateway.store.writes import record_decisions, record_feedback

    url = f"sqlite:///{tmp_path}/gw.db"
    cfg = tmp_path / "settings.yaml"
    cfg.write_text(f"models: [a, b]\ndefault_tier: std\ntiers: {{std: {{lam: 100}}}}\nstore: {{url: '{url}'}}\n"
                   f"artifacts_dir: {tmp_path}/artifacts\nteams: {{support: {{tier: std, budget: {{usd: 0.01, per: month}}}}}}\n")  # fmt: skip
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as s, s.begin():
        record_decisions(s, [DecisionRecord(request_id=f"r{i}", tier="std", lam=100.0, embedding_model=EmbedderSpec().embedding_id, team="support",
                                            embedding=np.ones(3), chosen_model="ab"[i % 2], propensity=0.5,
                                            outcome=OutcomeRecord(f"r{i}", cost_usd=1e-4)) for i in range(10)])  # fmt: skip
        record_feedback(s, [FeedbackRecord(f"r{i}", 1.0, source="judge", cost_usd=1e-3) for i in range(10)])
        record_feedback(s, [FeedbackRecord(f"r{i}", float(i % 3 == 0), source="user") for i in range(4)])
        # the judge scored r5..r9 again: it disagreed with itself on r5 (a) and r6 (b)
        record_feedback(s, [FeedbackRecord(f"r{i}", float(i > 6), source="judge-repeat", cost_usd=1e-3) for i in range(5, 10)])
    engine.dispose()
    default = runner.invoke(app, ["retrain", "--config", str(cfg)])
    assert default.exit_code == 2 and "only 10 usable rows" in default.output and "scored by: judge 6, user 4" in default.output
    assert "scores from judge in the window cost $0.0100" in default.output  # a repeat score never teaches (above)
    user = runner.invoke(app, ["retrain", "--config", str(cfg), "--feedback", "user"])
    assert "only 4 usable rows" in user.output and "scored by: user 4" in user.output and "no_feedback': 6" in user.output
    assert runner.invoke(app, ["retrain", "--config", str(cfg), "--feedback", "user,user"]).exit_code == 2
    status = runner.invoke(app, ["status", "--config", str(cfg)])
    assert status.exit_code == 0, status.output
    assert "feedback from judge: 10 = 100.0%, spend $0.0100" in status.output and "feedback from user: 4 = 40.0%" in status.output
    # r0 and r3: user 1 = judge 1; r1, r2: user 0 vs judge 1
    assert "judge vs user on 4 requests scored by both: same pass/fail (>= 0.5) 50.0%" in status.output
    # per model judged: a (r0, r2) the user failed r2, the judge passed it; b (r1, r3) the user failed r1
    assert ("judge's error against user scores, per model judged: *: 4 pairs, false pass 100.0%, false fail 0.0% "
            "(too few pairs to correct); a: 2 pairs") in status.output, status.output  # fmt: skip
    assert ("judge against itself, per model judged: *: 5 judged twice, same pass/fail 60.0%, implied error 27.6% "
            "either way (too few to correct); a: 2 judged twice, same pass/fail 50.0%") in status.output, status.output  # fmt: skip
    # the team's budget: its requests' outcomes today (the judge's calls are not the team's spend)
    assert "team support: budget $0.01 per month" in status.output and "spent $0.0010 (10.0%) on 10 requests" in status.output


DOWN = "postgresql+psycopg2://postgres@127.0.0.1:1/test?connect_timeout=1"


def test_retrain_reports_an_unreachable_store_in_one_line_with_its_own_exit_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["retrain", "--url", DOWN])
    assert result.exit_code == 3, result.output
    assert "store unreachable" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_retrain_every_keeps_going_when_the_store_is_down(tmp_path, monkeypatch):
    from regret_gateway.retrain import schedule as scheduler

    monkeypatch.chdir(tmp_path)
    naps = []

    def nap(seconds):
        naps.append(seconds)
        if len(naps) == 2:
            raise KeyboardInterrupt  # end the loop after two failed runs

    monkeypatch.setattr(scheduler.time, "sleep", nap)
    result = runner.invoke(app, ["retrain", "--url", DOWN, "--every", "90s"])
    assert naps == [90.0, 90.0] and result.output.count("store unreachable") == 2, result.output


def test_bench_routing_times_each_step():
    result = runner.invoke(app, ["bench", "routing", "--calls", "100", "--dim", "16"])
    assert result.exit_code == 0, result.output
    for step in ("choose, one request (igw)", "policy forward, batch 1024", "log a decision (record + queue)"):
        assert f"| {step} |" in result.output, result.output


def test_bench_retrain_times_cross_fitted_and_one_fit_side_by_side():
    """Each size is retrained both ways on the same logged rows, and the table says how many times one
    fit's time the default (cross-fitted) retrain took, the rows fitted and the peak memory. (retrain
    itself is timed by a stand-in here: the real pipeline is tested in tests/retrain/test_pipeline.py.)"""
    from regret_gateway.bench.retrain_timing import retrain_table, time_retrain
    from regret_gateway.store.engine import make_engine

    calls = []

    def timed(settings, opts):
        engine = make_engine(settings.store.url)
        with engine.connect() as conn:
            n = conn.exec_driver_sql("SELECT COUNT(*) FROM decisions").scalar()
        engine.dispose()
        calls.append((settings.store.url, n, opts.cross_fit, opts.precision))
        fit = (5.0 if opts.cross_fit else 1.0) * (2 if opts.precision == "float32" else 1)
        return "published", "", {"read": 0.5, "fit": fit, "evaluate": 0.5, "total": fit + 1}, n, 100.0

    table = retrain_table(time_retrain([300], dim=8, echo=lambda _: None, run=timed, precisions=("float32", "auto")))
    assert [(n, cf, p) for _, n, cf, p in calls] == [(300, True, "float32"), (300, False, "float32"), (300, True, "auto"),
                                                     (300, False, "auto")]  # fmt: skip
    assert len({url for url, *_ in calls}) == 1  # the same logs each time
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| 300 |")]
    assert [(r[2], r[3]) for r in rows] == [("cross-fitted", "float32"), ("one fit", "float32"), ("cross-fitted", "auto"),
                                            ("one fit", "auto")], table  # fmt: skip
    assert [r[8] for r in rows] == ["100"] * 4, table
    assert [r[-2] for r in rows] == ["1.00", "0.27", "0.55", "0.18"], table  # against the first row
    assert [r[-1].rstrip(" |") for r in rows] == ["3.67", "1.00", "3.00", "1.00"], table  # against one fit, same precision


def test_bench_offline_of_full_information_references_alone_reads_no_logs(tmp_path, monkeypatch):
    """Full-information references train on the true outcomes: such a run fits no nuisance stage (the
    logs' outcome models are the slow part), and --max-length sets how many tokens the router reads."""
    from regret_gateway.causal.estimators import Nuisance

    def no_nuisance(*args, **kwargs):
        raise AssertionError("a nuisance stage was fitted for a full-information run")

    monkeypatch.setattr(Nuisance, "fit", no_nuisance)
    _tiny_benchmark(tmp_path)
    out = tmp_path / "out"

    def args(max_length: int) -> list[str]:
        return ["bench", "offline", "--data", str(tmp_path), "--out", str(out), "--trials", "1", "--lambdas", "0,100",
                "--methods", "full-info-regression", "--max-length", str(max_length), "--cache-dir", str(tmp_path / "cache"),
                "--device", "cpu"]  # fmt: skip

    result = runner.invoke(app, args(16))
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text())
    assert set(doc["methods"]) == {"full-info-regression", "single-best", "oracle"} and not doc["diagnostics"]
    assert len(list((tmp_path / "cache").iterdir())) == 1
    assert runner.invoke(app, args(64)).exit_code == 0
    assert len(list((tmp_path / "cache").iterdir())) == 2  # another token limit is another embedding


@pytest.mark.parametrize(
    "change, key",
    [
        ({"models": ["a", "ghost"]}, "regret_gateway.models: ['ghost'] not a model_name of model_list"),
        ({"judge": {"model": "ghost"}}, "regret_gateway.judge.model: 'ghost' is not a model_name"),
        ({"judge": {"model": ["a", "ghost"]}}, "regret_gateway.judge.model: 'ghost' is not a model_name"),  # a panel
        (
            {"store": {"url": "mongodb://127.0.0.1/x"}},
            "regret_gateway.store.url: 'mongodb://127.0.0.1/x': the store is SQLite or PostgreSQL",
        ),
        ({"store": {"url": "postgresql+nosuchdriver://u@127.0.0.1/x"}}, "regret_gateway.store.url: 'postgresql+nosuchdriver"),
        (
            {"store": {"url": "sqlite:///{tmp}/missing/dir/gw.db"}},
            "regret_gateway.store.url: the folder of the SQLite file does not exist",
        ),
        ({"store": {"url": "not a url"}}, "regret_gateway.store.url: 'not a url' is not a database URL"),
    ],
)
def test_serve_refuses_a_config_that_cannot_work_in_one_line(tmp_path, change, key):
    import yaml

    from regret_gateway.bench.local import proxy_config

    section = {"models": ["a", "b"], "tiers": {"standard": {"lam": 0}}, "artifacts_dir": str(tmp_path / "artifacts"),
               "store": {"url": f"sqlite:///{tmp_path}/gw.db"}}  # fmt: skip
    change = yaml.safe_load(yaml.safe_dump(change).replace("{tmp}", str(tmp_path)))
    cfg = proxy_config({**section, **change}, {"a": (1e-6, 1e-6), "b": (1e-6, 1e-6)}, "http://127.0.0.1:1/v1")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    result = runner.invoke(app, ["serve", "--config", str(path)])
    assert result.exit_code == 2 and key in result.output, result.output
    assert result.output.strip().count("\n") == 0  # one line, no traceback


@pytest.mark.parametrize(
    "unset, key",
    [
        ("LITELLM_MASTER_KEY", "general_settings.master_key: set LITELLM_MASTER_KEY (the proxy's admin key"),
        ("TEST_SUPPORT_KEY", "regret_gateway.api_keys: set TEST_SUPPORT_KEY (team support), or remove the entry"),
    ],
)
def test_serve_names_an_environment_variable_the_config_reads_and_is_not_set(tmp_path, monkeypatch, unset, key):
    import yaml

    from regret_gateway.bench.local import proxy_config

    monkeypatch.setenv("LITELLM_MASTER_KEY", "sk-master-test-0123456789abcdef")
    monkeypatch.setenv("TEST_SUPPORT_KEY", "sk-support-test")
    monkeypatch.delenv(unset)
    section = {"models": ["a", "b"], "tiers": {"standard": {"lam": 0}}, "teams": {"support": {"tier": "standard"}},
               "api_keys": {"os.environ/TEST_SUPPORT_KEY": "support"}, "artifacts_dir": str(tmp_path / "artifacts"),
               "store": {"url": f"sqlite:///{tmp_path}/gw.db"}}  # fmt: skip
    cfg = proxy_config(section, {"a": (1e-6, 1e-6), "b": (1e-6, 1e-6)}, "http://127.0.0.1:1/v1", custom_auth=True)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    result = runner.invoke(app, ["serve", "--config", str(path)])
    assert result.exit_code == 2 and key in result.output, result.output
    assert result.output.strip().count("\n") == 0


CONFIG_COMMANDS = [
    ["serve"],
    ["status"],
    ["retrain"],
    ["db", "status"],
    ["db", "upgrade"],
    ["db", "prune"],
    ["import-logs", "logs.csv"],
    ["feedback", "import", "scores.csv"],
]


@pytest.mark.parametrize("command", CONFIG_COMMANDS, ids=" ".join)
@pytest.mark.parametrize(
    "text, says",
    [
        ("models: [a, b\ntiers: {x: 1}\n", "not valid YAML at line 2, column 6"),
        ("regret_gateway:\n  models: [a, b]\n  tiers:\n    economy: {lam: -1}\n", "tiers.economy.lam: Input should be greater"),
        ("- just\n- a list\n", "expected a mapping at the top level"),
    ],
    ids=["malformed", "invalid", "not-a-mapping"],
)
def test_a_bad_config_is_one_line_and_exit_2_for_every_command(tmp_path, command, text, says):
    config = tmp_path / "config.yaml"
    config.write_text(text)
    for name in ("logs.csv", "scores.csv"):
        (tmp_path / name).write_text("request_id,score\n")
    args = [tmp_path / c if c.endswith(".csv") else c for c in command]
    result = runner.invoke(app, [*map(str, args), "--config", str(config)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and str(config) in lines[0], result.output


@pytest.mark.parametrize("command", [["demo"], ["bench", "offline", "--data", ".", "--out", "out"]], ids=" ".join)
def test_a_command_that_needs_an_extra_names_it_before_it_starts(command, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    result = runner.invoke(app, command)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"error: `{' '.join(command[:2]) if command[0] == 'bench' else 'demo'}` needs the `train` extra (matplotlib missing): "
        "pip install 'regret-gateway[train]'"
    ]


def test_bench_offline_help_names_every_method_of_the_registry():
    from regret_gateway.cli.bench_offline import METHODS
    from regret_gateway.policy.registry import method_names

    assert METHODS == tuple(method_names())


def _leaf_commands(command, path=()):
    """(path, click command) of every command of the app, groups walked."""
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _leaf_commands(sub, (*path, name))
    else:
        yield path, command


def test_every_help_text_is_printed_as_written_and_wrapped_to_the_terminal():
    """``--help`` of every command shows each help text word for word (brackets included: rich markup once
    swallowed retrain's "[default: 5, or 2 past 60,000 rows ...]"; code spans lose only their backticks), and a
    docstring's paragraph wraps to the terminal instead of keeping the docstring's own line breaks."""
    import typer.main

    for path, command in _leaf_commands(typer.main.get_command(app)):
        wide = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "2000"}).output
        shown = " ".join(wide.replace("│", " ").replace("`", "").split())
        for text in [command.help or ""] + [p.help for p in command.params if getattr(p, "help", None)]:
            assert " ".join(text.replace("`", "").split()) in shown, (path, text)
    narrow = runner.invoke(app, ["retrain", "--help"], env={"COLUMNS": "80"}).output
    lines = [line.strip() for line in narrow.split("╭")[0].splitlines()]
    description = "\n".join(lines).strip().split("\n\n")[-1].splitlines()  # retrain's second paragraph
    assert len(description) > 3 and all(len(line) > 60 for line in description[:-1]), description
