"""The CLI's wiring: `db`, `feedback import`, `retrain` and `status`, `serve`'s refusals, bad configs, `--help` (the `bench` commands: test_bench.py)."""

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from typer.testing import CliRunner

from regret_gateway.cli import app
from regret_gateway.config import EmbedderSpec

runner = CliRunner()


def test_db_upgrade_status_export(tmp_path):
    import numpy as np
    from sqlalchemy.orm import Session

    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
    from regret_gateway.store.writes import record_decisions, record_feedback

    url = f"sqlite:///{tmp_path}/gw.db"
    status = runner.invoke(app, ["db", "status", "--url", url])
    assert (
        status.exit_code == 1
        and "pending migrations: 0001, 0002, 0003, 0004, 0005, 0006, 0007, 0008, 0009, 0010, 0011, 0012, 0013" in status.output
    )
    up = runner.invoke(app, ["db", "upgrade", "--url", url])
    assert up.exit_code == 0 and "at revision 0013" in up.output
    engine = make_engine(url)
    recent = datetime.now(timezone.utc) - timedelta(days=1)
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
                    created_at=recent - timedelta(days=99) if i == 3 else recent,
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
    parts = runner.invoke(app, ["db", "export", str(tmp_path / "parts"), "--url", url])
    # whole UTC days that ended an hour ago, from the oldest decision's (100 days back) on; the scores are today's
    over = (datetime.now(timezone.utc) - timedelta(hours=1)).date()
    days, sent = (over - (recent - timedelta(days=99)).date()).days, 1 + 3 * (recent.date() < over)
    assert parts.exit_code == 0 and f"wrote {days} days" in parts.output, parts.output
    assert f": {sent} decisions, 0 scores" in parts.output, parts.output
    assert (tmp_path / "parts" / "decisions").is_dir() and (tmp_path / "parts" / "feedback").is_dir()
    again = runner.invoke(app, ["db", "export", str(tmp_path / "parts"), "--url", url])  # a day is written once
    assert again.exit_code == 0 and "wrote 0 days" in again.output and f"{days} days were there already" in again.output
    mixed = runner.invoke(app, ["db", "export", str(tmp_path / "parts"), "--url", url, "--team", "x"])
    assert mixed.exit_code == 2 and "--team and --since apply to a file export" in mixed.output
    bad = runner.invoke(app, ["db", "export", str(tmp_path / "x.txt"), "--url", url])
    assert bad.exit_code == 2 and "unsupported file type: x.txt (supported: .csv, .csv.gz, .parquet)" in bad.output
    # retention: the default 90 days; r3 is 100 days old
    dry = runner.invoke(app, ["db", "prune", "--url", url, "--dry-run"])
    assert dry.exit_code == 0 and "1 decisions before" in dry.output and "would be deleted (dry run)" in dry.output, dry.output
    assert "1 embeddings of decisions unscored before" in dry.output and "would be dropped (dry run)" in dry.output  # r3's
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
    assert "retrain would read 0 rows in total (left out: none)" in status.output, status.output
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
        lambda *a, **k: (
            seen.append(torch.get_num_threads()) or retrain_module.RetrainResult(retrain_module.RetrainStatus.REFUSED, "stand-in")
        ),
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
        lambda s, e, opts, **k: (
            seen.append(getattr(opts, field)) or retrain_module.RetrainResult(retrain_module.RetrainStatus.REFUSED, "x")
        ),
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
    spark = run("--executor", "spark")
    assert spark.output.strip().splitlines() == ["error: --executor: executor must be one of local, ray, got 'spark'"]


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
    assert "team support: budget $0.01 per month" in status.output and "spent $0.001 (10.0%) on 10 requests" in status.output
    assert "retrain would read 10 rows in total (left out: none)" in status.output, status.output


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


def _serve_config(tmp_path, deployments: list[dict], top: str = "regret_gateway"):
    import yaml

    section = {"models": ["a", "b"], "tiers": {"standard": {"lam": 0}}, "artifacts_dir": str(tmp_path / "artifacts"),
               "store": {"url": f"sqlite:///{tmp_path}/gw.db"}}  # fmt: skip
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump({"model_list": deployments, "general_settings": {"master_key": "sk-m-0123456789"}, top: section})
    )
    return path


def test_serve_refuses_a_routed_model_without_a_price_and_takes_a_stated_zero(tmp_path, monkeypatch):
    """A self-hosted model behind an OpenAI-compatible api_base that LiteLLM cannot price would be logged at $0
    and learned as free: serve refuses it in one line; a price of 0 stated in its litellm_params is a price."""
    from regret_gateway.gateway.preflight import check_deployment

    monkeypatch.setattr("regret_gateway.gateway.preflight.check_embedder", lambda settings: None)  # not what this tests
    priced = {"model_name": "a", "litellm_params": {"model": "openai/gpt-4o-mini"}}  # LiteLLM's cost map knows it
    unpriced = {"model_name": "b", "litellm_params": {"model": "openai/my-llama", "api_base": "http://10.0.0.9:8000/v1"}}
    from regret_gateway.bench.local import free_port

    result = runner.invoke(
        app, ["serve", "--config", str(_serve_config(tmp_path, [priced, unpriced])), "--port", str(free_port())]
    )
    assert result.exit_code == 2 and "'b' (openai/my-llama) has no price LiteLLM knows" in result.output, result.output
    assert result.output.strip().count("\n") == 0
    free = {**unpriced, "litellm_params": {**unpriced["litellm_params"], "input_cost_per_token": 0, "output_cost_per_token": 0}}
    assert check_deployment(_serve_config(tmp_path, [priced, free])).models == ("a", "b")


def test_serve_names_a_misspelled_section_in_one_line(tmp_path):
    deployments = [{"model_name": m, "litellm_params": {"model": "openai/gpt-4o"}} for m in ("a", "b")]
    result = runner.invoke(app, ["serve", "--config", str(_serve_config(tmp_path, deployments, top="regret_gatway"))])
    assert result.exit_code == 2 and "no `regret_gateway:` section (is `regret_gatway:` a misspelling of it?)" in result.output
    assert result.output.strip().count("\n") == 0, result.output


def test_serve_refuses_a_port_in_use_before_anything_loads(tmp_path, monkeypatch):
    import socket

    def loaded(*args, **kwargs):
        raise AssertionError("the config was loaded before the port was checked")

    monkeypatch.setattr("regret_gateway.gateway.preflight.check_deployment", loaded)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(app, ["serve", "--config", str(tmp_path / "any.yaml"), "--host", "127.0.0.1", "--port", str(port)])
    assert result.exit_code == 2 and f"--port {port}: cannot listen on 127.0.0.1:{port}" in result.output, result.output
    assert result.output.strip().count("\n") == 0


def test_serve_with_litellms_database_runs_litellms_own_cli_which_migrates_it(tmp_path, monkeypatch):
    """With LiteLLM's database, `serve` is `litellm --config` on the same config (LiteLLM's CLI runs its database
    migrations before it serves; its database cannot start offline, so the command is checked, not run)."""
    import subprocess

    import yaml

    from regret_gateway.bench.local import free_port

    monkeypatch.setattr("regret_gateway.gateway.preflight.check_embedder", lambda settings: None)  # not what this tests
    deployments = [{"model_name": m, "litellm_params": {"model": "openai/gpt-4o"}} for m in ("a", "b")]
    path = _serve_config(tmp_path, deployments)
    raw = yaml.safe_load(path.read_text())
    raw["general_settings"]["database_url"] = "postgresql://litellm@db:5432/litellm"
    path.write_text(yaml.safe_dump(raw))
    started = []

    class Child:
        def __init__(self, command):
            started.append(command)

        def wait(self):
            return 0

    monkeypatch.setattr(subprocess, "Popen", Child)
    port = free_port()
    result = runner.invoke(app, ["serve", "--config", str(path), "--host", "127.0.0.1", "--port", str(port)])
    assert result.exit_code == 0, result.output
    assert [c[0].rsplit("/", 1)[-1] for c in started] == ["litellm"]
    assert started[0][1:] == ["--config", str(path), "--host", "127.0.0.1", "--port", str(port)]


@pytest.mark.parametrize(
    "info, says",
    [({"supports_function_calling": "maybe"}, "model_info.supports_function_calling: 'maybe' is not true or false"),
     ({"supports_vision": "no"}, "model_info.supports_vision: 'no' is not true or false"),
     ({"max_tokens": -5}, "model_info.max_tokens: -5 is not a positive whole number of tokens"),
     ({"input_cost_per_token": "cheap"}, "model_info.input_cost_per_token: 'cheap' is not a price")],
)  # fmt: skip
def test_serve_refuses_a_deployments_model_info_of_the_wrong_type_in_one_line(tmp_path, info, says):
    """LiteLLM takes such a config and fails every answer of that deployment afterwards (a 500 after the upstream
    answered); the gateway would read the value as unknown and send it tools or images: refused at start."""
    from regret_gateway.bench.local import free_port

    deployments = [{"model_name": "a", "litellm_params": {"model": "openai/gpt-4o"}, "model_info": info},
                   {"model_name": "b", "litellm_params": {"model": "openai/gpt-4o-mini"}}]  # fmt: skip
    result = runner.invoke(app, ["serve", "--config", str(_serve_config(tmp_path, deployments)), "--port", str(free_port())])
    assert result.exit_code == 2 and f"model_list: 'a' {says}" in result.output, result.output
    assert result.output.strip().count("\n") == 0


def test_the_example_config_passes_every_start_up_check(monkeypatch):
    """examples/config.yaml is what the README starts: every routed model priced (LiteLLM's cost map knows each
    deployment's model), every key it reads named, the encoder loadable."""
    from pathlib import Path

    from regret_gateway.gateway.preflight import check_deployment

    for var in ("LITELLM_MASTER_KEY", "RESEARCH_KEY", "PRODUCT_KEY", "SUPPORT_KEY"):
        monkeypatch.setenv(var, f"sk-{var.lower()}-0123456789")
    settings = check_deployment(Path(__file__).resolve().parents[2] / "examples" / "config.yaml")
    assert settings.models == ("gpt-4o-mini", "claude-haiku", "gpt-4o")


def test_demo_refuses_an_unknown_team_apps_before_it_starts():
    result = runner.invoke(app, ["demo", "--team-apps", "mine"])
    assert result.exit_code == 2 and "--team-apps is all or own, got 'mine'" in result.output, result.output
