"""Day partitions (PostgreSQL): a gateway id's day decides its partition in all three tables, retention drops
the days before its cutoff whole and deletes the rest row by row, the coming days are made ahead, and
migrating a store that holds rows keeps them (both ways)."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import numpy as np
import pytest
from alembic import command
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from regret_gateway.request_ids import day_bounds, made_at, new_request_id
from regret_gateway.store.engine import make_engine
from regret_gateway.store.migrate import alembic_config, upgrade
from regret_gateway.store.partitions import DAYS_AHEAD, days, ensure_days, partitioned
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
from regret_gateway.store.retention import prune, table_sizes
from regret_gateway.store.schema import Decision, Feedback, Outcome
from regret_gateway.store.writes import record_decisions, record_feedback

pg_only = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)


def _today() -> date:
    """Today (UTC) when a test starts: the partitions the migration makes are counted from it."""
    return datetime.now(timezone.utc).date()


def at(day: date, hour: int = 12) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=timezone.utc)


def record(rid: str, created_at: datetime) -> DecisionRecord:
    return DecisionRecord(
        request_id=rid, tier="standard", lam=100.0, embedding_model="mini", embedding=np.ones(8, dtype=np.float32),
        chosen_model="small", propensity=0.5, created_at=created_at, outcome=OutcomeRecord(request_id=rid, cost_usd=1e-4),
    )  # fmt: skip


def where(engine, table: str) -> dict[str, str]:
    """Each row's partition, by request id."""
    with engine.connect() as conn:
        return dict(conn.execute(text(f"SELECT request_id, tableoid::regclass::text FROM {table}")).all())


def test_ids_sort_by_the_time_they_were_made_and_a_day_s_ids_lie_between_its_bounds():
    today = _today()
    moments = [at(today, h) for h in (0, 5, 23)] + [at(today + timedelta(days=1), 0)]
    ids = [new_request_id(m) for m in moments]
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert [made_at(i) for i in ids] == moments
    lo, hi = day_bounds(today)
    assert all(lo <= i < hi for i in ids[:3])
    assert ids[3] >= hi == day_bounds(today + timedelta(days=1))[0]
    assert made_at("rg-" + "f" * 32) is None and made_at("r1") is None  # an earlier version's id, an import's


@pg_only
def test_a_request_s_decision_outcome_and_scores_share_its_day_s_partitions(engine):
    today = _today()
    with engine.connect() as conn:
        assert partitioned(conn)
        assert days(conn) == [today + timedelta(days=i) for i in range(DAYS_AHEAD + 1)]
    rid, legacy = new_request_id(), "rg-" + "0" * 32
    with Session(engine) as s, s.begin():
        record_decisions(s, [record(rid, at(today)), record(legacy, at(today))])
        record_feedback(s, [FeedbackRecord(rid, 1.0), FeedbackRecord(legacy, 0.0)])
    day = f"_d{today:%Y%m%d}"
    for table in ("decisions", "outcomes", "feedback"):
        assert where(engine, table) == {rid: table + day, legacy: f"{table}_default"}


@pg_only
def test_retention_drops_the_days_before_its_cutoff_whole_and_deletes_the_rest_row_by_row(engine):
    today = _today()
    old_days = [today - timedelta(days=d) for d in (3, 2)]
    ensure_days(engine, today - timedelta(days=3), ahead=3)  # as the gateway's starts on those days made them
    made = {d: [new_request_id(at(d, h)) for h in (1, 13, 23)] for d in [*old_days, today - timedelta(days=1), today]}
    imported = {"imported-old": at(today - timedelta(days=5)), "imported-new": at(today)}
    with Session(engine) as s, s.begin():
        record_decisions(s, [record(rid, at(d, 12)) for d, ids in made.items() for rid in ids])
        record_decisions(s, [record(rid, when) for rid, when in imported.items()])
        record_feedback(s, [FeedbackRecord(ids[0], 1.0) for ids in made.values()] + [FeedbackRecord("imported-old", 0.5)])

    cutoff = at(today - timedelta(days=1), 9)  # within yesterday: retention keeps all of yesterday
    counted = prune(engine, cutoff, dry_run=True)
    assert (counted.cutoff, counted.days) == (at(today - timedelta(days=1), 0), 2)
    assert (counted.decisions, counted.outcomes, counted.feedback) == (7, 7, 3)  # 2 days of 3, and the old import
    done = prune(engine, cutoff, batch_size=1)
    assert (done.decisions, done.outcomes, done.feedback, done.days, done.batches) == (7, 7, 3, 2, 1)

    kept = {rid for d, ids in made.items() if d not in old_days for rid in ids} | {"imported-new"}
    with Session(engine) as s:
        for model in (Decision, Outcome, Feedback):
            assert set(s.scalars(select(model.request_id))) <= kept
        assert set(s.scalars(select(Decision.request_id))) == kept
    with engine.connect() as conn:
        assert min(days(conn)) == today - timedelta(days=1)


@pg_only
def test_a_day_whose_rows_went_to_the_default_partition_is_not_made_and_its_rows_stay_where_they_are(engine):
    today = _today()
    later = today + timedelta(days=DAYS_AHEAD + 2)
    early = new_request_id(at(later))  # a request of a day that had no partition yet
    with Session(engine) as s, s.begin():
        record_decisions(s, [record(early, at(later))])
    made = ensure_days(engine, today, ahead=DAYS_AHEAD + 3)
    assert made.blocked == [later]
    assert made.made == [later - timedelta(days=1), later + timedelta(days=1)]
    assert where(engine, "decisions") == {early: "decisions_default"}
    with Session(engine) as s, s.begin():
        record_decisions(s, [record(new_request_id(at(later)), at(later))])  # still written: into the default
    assert sorted(where(engine, "decisions").values()) == ["decisions_default"] * 2


@pg_only
def test_migrating_a_store_that_holds_rows_keeps_them_both_ways(db_url):
    today = _today()
    upgrade(db_url, revision="0011")
    engine = make_engine(db_url)
    rids = [new_request_id(at(today)), "rg-" + "a" * 32]
    try:
        with Session(engine) as s, s.begin():
            record_decisions(s, [record(rid, at(today)) for rid in rids])
            record_feedback(s, [FeedbackRecord(rid, 0.25, source="judge") for rid in rids])

        def rows() -> dict:
            with Session(engine) as s:
                return {m.__tablename__: sorted(s.scalars(select(m.request_id))) for m in (Decision, Outcome, Feedback)}

        before = rows()
        upgrade(db_url)
        with engine.connect() as conn:
            assert partitioned(conn)
        assert rows() == before
        assert where(engine, "decisions")[rids[1]] == "decisions_default"
        command.downgrade(alembic_config(db_url), "0011")
        with engine.connect() as conn:
            assert not partitioned(conn)
        assert rows() == before
        assert all(size.bytes for size in table_sizes(engine))  # a plain table's own bytes, not its (no) partitions'.
    finally:
        engine.dispose()


@pg_only
def test_a_day_s_outcomes_and_scores_need_its_decision_and_go_with_it(engine):
    """The foreign keys join each partition to the same day's decisions: an outcome or a score of no decision is
    refused in a day partition and in the default one, and a decision deleted takes its rows with it."""
    today = _today()
    from sqlalchemy.exc import IntegrityError

    from regret_gateway.store.writes import record_outcomes

    kept, gone = new_request_id(), "imported-1"
    with Session(engine) as s, s.begin():
        record_decisions(s, [record(kept, at(today)), record(gone, at(today))])
        record_feedback(s, [FeedbackRecord(kept, 1.0), FeedbackRecord(gone, 1.0)])
    for orphan in (new_request_id(), "imported-2"):
        with pytest.raises(IntegrityError), Session(engine) as s, s.begin():
            record_outcomes(s, [OutcomeRecord(request_id=orphan, cost_usd=0.0)], decisions_known=True)
    with Session(engine) as s, s.begin():
        s.execute(text("DELETE FROM decisions WHERE request_id IN (:a, :b)"), {"a": kept, "b": gone})
    for table in ("outcomes", "feedback"):
        assert where(engine, table) == {}


@pg_only
def test_db_prune_and_status_say_what_the_day_partitions_did(engine, db_url):
    today = _today()
    from typer.testing import CliRunner

    from regret_gateway.cli import app

    ensure_days(engine, today - timedelta(days=3), ahead=3)
    with Session(engine) as s, s.begin():
        record_decisions(s, [record(new_request_id(at(d)), at(d)) for d in (today - timedelta(days=k) for k in range(4))])
    status = CliRunner().invoke(app, ["db", "status", "--url", db_url])
    assert status.exit_code == 0, status.output
    assert (
        f"day partitions: {DAYS_AHEAD + 4} ({today - timedelta(days=3)} .. {today + timedelta(days=DAYS_AHEAD)})" in status.output
    )
    pruned = CliRunner().invoke(app, ["db", "prune", "--url", db_url, "--older-than", "1d", "--score-window", "30d"])
    assert pruned.exit_code == 0, pruned.output
    assert "deleted 2 decisions" in pruned.output and "2 days dropped whole and 0 batches" in pruned.output


@pg_only
def test_a_store_that_refuses_the_coming_days_partitions_still_migrates_and_says_so(db_url, monkeypatch, caplog):
    """A gateway whose database user may not create tables starts: its days' rows go to the default partition."""
    today = _today()
    from sqlalchemy.exc import ProgrammingError

    import regret_gateway.store.migrate as migrate

    def refused(engine, today):
        raise ProgrammingError("CREATE TABLE decisions_d20261208 ...", None, Exception("permission denied for schema"))

    monkeypatch.setattr(migrate, "ensure_days", refused)
    with caplog.at_level("WARNING", logger="regret_gateway.store.migrate"):
        upgrade(db_url)
    assert "the coming days' partitions were not made" in caplog.text and "permission denied" in caplog.text
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            assert partitioned(conn) and days(conn) == []
        rid = new_request_id()
        with Session(engine) as s, s.begin():
            record_decisions(s, [record(rid, at(today))])
        assert where(engine, "decisions") == {rid: "decisions_default"}
    finally:
        engine.dispose()


def test_bench_prune_prints_both_stores_side_by_side_and_refuses_what_it_cannot_measure():
    """`regret-gateway bench prune`: the same days pruned row by row (revision 0011) and dropped whole (head), in
    scratch schemas of the test server; a cutoff that leaves no day, or SQLite, is refused before any work."""
    from typer.testing import CliRunner

    from regret_gateway.cli import app

    from .conftest import PG_URL, _pg_admin

    _pg_admin().dispose()  # skips (or fails under REGRET_GATEWAY_REQUIRE_PG=1) without the server
    run = CliRunner().invoke(
        app, ["bench", "prune", "--url", PG_URL, "--per-day", "300", "--days", "3", "--drop", "2", "--dim", "8"]
    )
    assert run.exit_code == 0, run.output
    rows = [
        line.split("|")
        for line in run.output.splitlines()
        if line.startswith("| row by row") or line.startswith("| day partitions")
    ]
    assert [(r[1].strip(), r[4].strip(), r[5].strip(), r[6].strip()) for r in rows] == [
        ("row by row (revision 0011)", "600", "0", "1"),
        ("day partitions (head)", "600", "2", "0"),
    ]  # 600 deleted by each: one batch of rows, or two days dropped whole
    for bad in (["--days", "2", "--drop", "2"], ["--url", "sqlite"]):
        refused = CliRunner().invoke(app, ["bench", "prune", *bad])
        assert refused.exit_code == 2, refused.output
