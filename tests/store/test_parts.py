"""The store as Parquet day parts (`db export FOLDER`), read with DuckDB (`retrain --parts`): the same training set
as the store gives, under retrain's rules, on SQLite and PostgreSQL; a daily export adds only the new days, and a
score revised after its day was exported is read at its latest."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from sqlalchemy.orm import Session

from regret_gateway.config import TrustSpec
from regret_gateway.store.parts import PartsRows, days_to_export, export_days, exported_days
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
from regret_gateway.store.writes import record_decisions, record_feedback
from regret_gateway.trainset.window import training_set

pytest.importorskip("duckdb")
T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
MODELS = ("a", "b", "c")


def _store(engine, days: int = 4, per_day: int = 60, seed: int = 0) -> None:
    """``days`` days of traffic with every reason a row does not train: failed, mock, left streams, a fallback's
    answer, fail-open fallbacks, kept turns, another embedder, an unknown model, unscored requests; users'
    scores of three teams on two apps, the judge's (some judged twice), revisions, and an imported row."""
    rng = np.random.default_rng(seed)
    decisions, scores = [], []
    for i in range(days * per_day):
        at = T0 + timedelta(hours=24 * i / per_day + 0.1)
        rid, model, team = f"r{i:04d}", MODELS[i % 3], ("red", "blue", "green", None)[i % 4]
        kind = i % 17
        status, answered = ("failure", None) if kind == 1 else ("client_left", None) if kind == 2 else ("success", model)
        if kind == 3:
            answered = "a" if model != "a" else "b"
        outcome = None if kind == 4 else OutcomeRecord(rid, float(rng.uniform(0, 1e-3)), status=status, answered_model=answered,
                                                       created_at=at)  # fmt: skip
        decisions.append(DecisionRecord(
            rid, ("eco", "pro")[i % 2], (100.0, 1.0)[i % 2], "other" if kind == 5 else "emb",
            rng.normal(size=4).astype(np.float32), "z" if kind == 6 else model,
            None if kind == 7 else (p := float(rng.uniform(0.1, 1.0))),
            mode="fallback" if kind == 8 else "imported" if kind == 7 else "policy" if i % 5 else "exploration",
            team=team, router_version=None if i < per_day else "v1", created_at=at, outcome=outcome,
            mock=kind == 9, session_turn="kept" if kind == 10 else "first" if kind == 11 else None,
            app=("app1", "app2", None)[i % 3], greedy_model=MODELS[(i + 1) % 3] if i >= per_day else None,
            propensities={model: p, "b" if model != "b" else "c": 1.0 - p} if i >= per_day and kind < 6 and p < 1 else None,
        ))  # fmt: skip
        if kind != 12:  # unscored
            scores.append(FeedbackRecord(rid, float(rng.uniform()), created_at=at + timedelta(minutes=5)))
        if i % 3 == 0:
            scores.append(FeedbackRecord(rid, float(rng.uniform()), source="judge", created_at=at + timedelta(minutes=1),
                                         cost_usd=1e-4))  # fmt: skip
        if i % 9 == 0:
            scores.append(FeedbackRecord(rid, float(rng.uniform()), source="judge-repeat", created_at=at + timedelta(minutes=2)))
    with Session(engine) as s, s.begin():
        record_decisions(s, decisions)
        record_feedback(s, scores)


def _same(a, b) -> None:
    assert a.request_ids == b.request_ids and a.skipped == b.skipped and a.sources == b.sources
    assert (a.teams, a.tiers, a.modes, a.router_versions, a.apps, a.loggers) == (b.teams, b.tiers, b.modes, b.router_versions,
                                                                                 b.apps, b.loggers)  # fmt: skip
    assert a.embedding_model == b.embedding_model and a.sampled_from == b.sampled_from
    np.testing.assert_array_equal(a.created_at, b.created_at)
    np.testing.assert_array_equal(a.favoured, b.favoured)
    np.testing.assert_array_equal(a.distributions, b.distributions)  # NaN rows alike
    assert a.team_checks == b.team_checks and a.judge_corrected == b.judge_corrected
    assert a.judge_errors.keys() == b.judge_errors.keys() and a.judge_self_agreement == b.judge_self_agreement
    assert a.spend_by_source == pytest.approx(b.spend_by_source)
    x, y = a.logged, b.logged
    assert x is not None and y is not None and x.model_names == y.model_names
    np.testing.assert_array_equal(x.X, y.X)
    np.testing.assert_array_equal(x.action, y.action)
    for name in ("quality", "cost", "propensity", "lam", "target", "target_errors"):
        u, v = getattr(x, name), getattr(y, name)
        assert (u is None) == (v is None), name
        if u is not None:
            np.testing.assert_allclose(u, v, equal_nan=True)


@pytest.mark.parametrize(
    "window",
    [
        {},
        {"since": T0 + timedelta(hours=30), "until": T0 + timedelta(hours=80)},  # bounds inside days
        {"team": "red", "max_rows": 20},
        {"trust": TrustSpec(min_rows=5, min_gap=0.05, alpha=0.5), "feedback": ("user", "judge")},
    ],
    ids=["everything", "mid-day-bounds", "one-team-sampled", "trust-checked"],
)
def test_the_day_parts_give_the_store_s_training_set(engine, tmp_path, window):
    _store(engine)
    url = str(tmp_path / "parts")
    with Session(engine) as s:
        done = export_days(s, url, until=T0 + timedelta(days=5))
        from_store = training_set(s, model_names=MODELS, **window)
    assert done.days == ("2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05") and done.decisions == 240
    from_parts = training_set(PartsRows(url), model_names=MODELS, **window)
    assert from_store.n_rows > 5
    assert sum(from_store.skipped.values()) > 0 and all(from_store.skipped[k] for k in ("failed", "mock", "session_kept"))
    _same(from_store, from_parts)


def test_a_daily_export_adds_only_new_days_and_a_later_revision_is_read_at_its_latest(engine, tmp_path):
    _store(engine, days=2)
    folder = tmp_path / "parts"
    url = f"file://{folder}"  # where the parts live is a URL
    with Session(engine) as s:
        first = export_days(s, url, until=T0 + timedelta(days=1, hours=12))  # day 2 not over: not exported
        assert first.days == ("2026-11-01",) and days_to_export(s, url, T0 + timedelta(days=1, hours=12)) == []
    revised = T0 + timedelta(days=2, hours=3)  # a user re-scores a day-1 request on day 3, and scores another first
    with Session(engine) as s, s.begin():
        record_feedback(s, [FeedbackRecord("r0000", 0.0, created_at=revised), FeedbackRecord("r0029", 0.25, created_at=revised)])
    with Session(engine) as s:
        second = export_days(s, url, until=T0 + timedelta(days=3))
        from_store = training_set(s, model_names=MODELS)
    assert second.days == ("2026-11-02", "2026-11-03") and second.already == 1 and second.decisions == 60
    assert exported_days(url) == ["2026-11-01", "2026-11-02", "2026-11-03"]
    from_parts = training_set(PartsRows(url), model_names=MODELS)
    assert from_parts.logged is not None
    assert from_parts.logged.quality[from_parts.request_ids.index("r0000")] == 0.0
    assert from_parts.logged.quality[from_parts.request_ids.index("r0029")] == 0.25  # its embedding is in day 3's part
    # an embedding is exported only for a scored request, from the day of its score; decisions carry none
    import pyarrow.parquet as pq

    assert "embedding" not in pq.read_schema(folder / "decisions" / "2026-11-01.parquet").names
    day3 = pq.read_table(folder / "embeddings" / "2026-11-03.parquet").column("request_id").to_pylist()
    assert sorted(day3) == ["r0000", "r0029"]
    assert pq.read_table(folder / "embeddings" / "2026-11-01.parquet").num_rows == 58  # r0029, r0046 had no score that day
    _same(from_store, from_parts)


def test_a_score_that_comes_after_its_embedding_was_dropped_is_left_out_by_both_readers(engine, tmp_path):
    """`db prune` drops the embeddings of day 1's unscored decisions (the score window over); a user then scores one
    of them: the store and the parts both leave it out as embedding_dropped, and no part holds an empty embedding."""
    from regret_gateway.store.retention import drop_embeddings

    _store(engine, days=2)
    url = str(tmp_path / "parts")
    with Session(engine) as s:
        export_days(s, url, until=T0 + timedelta(days=1, hours=12))
    assert drop_embeddings(engine, T0 + timedelta(days=1)) == 2  # r0029, r0046: day 1's unscored
    with Session(engine) as s, s.begin():
        record_feedback(s, [FeedbackRecord("r0029", 0.25, created_at=T0 + timedelta(days=2, hours=3))])
    with Session(engine) as s:
        export_days(s, url, until=T0 + timedelta(days=3))
        from_store = training_set(s, model_names=MODELS)
    from_parts = training_set(PartsRows(url), model_names=MODELS)
    assert from_store.skipped["embedding_dropped"] == 1 and "r0029" not in from_store.request_ids
    _same(from_store, from_parts)
    import pyarrow.parquet as pq

    assert "r0029" not in pq.read_table(tmp_path / "parts" / "embeddings" / "2026-11-03.parquet").column("request_id").to_pylist()


def test_db_export_into_a_folder_writes_day_parts_and_retrain_reads_them(tmp_path):
    """The commands as an operator runs them: `db export FOLDER` daily, `retrain --parts FOLDER`."""
    from typer.testing import CliRunner

    from regret_gateway.cli import app
    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.migrate import upgrade

    url = f"sqlite:///{tmp_path}/gw.db"
    upgrade(url)
    engine = make_engine(url)
    _store(engine, days=2)
    engine.dispose()
    runner = CliRunner()
    out = tmp_path / "parts"
    result = runner.invoke(app, ["db", "export", str(out), "--url", url, "--until", "2026-11-03T00:00:00"])
    assert result.exit_code == 0, result.output
    assert "wrote 2 days (2026-11-01 to 2026-11-02)" in result.output and "120 decisions" in result.output
    again = runner.invoke(app, ["db", "export", str(out), "--url", url, "--until", "2026-11-03T00:00:00"])
    assert again.exit_code == 0 and "wrote 0 days" in again.output and "2 days were there already" in again.output
    refused = runner.invoke(app, ["db", "export", str(out), "--url", url, "--team", "red"])
    assert refused.exit_code != 0 and "--team and --since apply to a file export" in refused.output
    cfg = tmp_path / "config.yaml"  # an embedder the rows were not embedded by: retrain reads them all and refuses
    cfg.write_text(f"models: [a, b, c]\ndefault_tier: eco\ntiers: {{eco: {{lam: 100}}, pro: {{lam: 1}}}}\n"
                   f"store: {{url: '{url}'}}\nartifacts_dir: {tmp_path}/artifacts\n")  # fmt: skip
    from_store = runner.invoke(app, ["retrain", "--config", str(cfg)])
    from_parts = runner.invoke(app, ["retrain", "--config", str(cfg), "--parts", str(out)])
    assert from_store.exit_code == from_parts.exit_code == 2, from_parts.output
    assert "(left out: mock=7, no_outcome=7, client_left=7, failed=7, answered_by_other=14, no_feedback=4, fallback=7, " \
           "session_kept=7, other_embedder=60)" in from_parts.stdout, from_parts.stdout  # fmt: skip

    def said(result) -> list[str]:  # what it said, less its time and its report's name
        return [line.split(" ", 2)[-1] for line in result.stdout.splitlines() if "report:" not in line]

    assert said(from_store) == said(from_parts)


def test_a_day_exported_before_decisions_carried_their_distribution_still_reads(engine, tmp_path):
    """A part written before the ``propensities`` column existed reads as rows without one (NaN), beside a day
    that has it."""
    import pyarrow.parquet as pq

    _store(engine, days=3)
    url = str(tmp_path / "parts")
    with Session(engine) as s:
        export_days(s, url, until=T0 + timedelta(days=4))
    old = tmp_path / "parts" / "decisions" / "2026-11-02.parquet"
    pq.write_table(pq.read_table(old).drop_columns(["propensities"]), old)
    ts = training_set(PartsRows(url), model_names=MODELS)
    day = ts.created_at.astype("datetime64[D]").astype(str)
    assert np.isnan(ts.distributions[day == "2026-11-02"]).all()
    assert not np.isnan(ts.distributions[day == "2026-11-03"]).all()  # the later day's are read
